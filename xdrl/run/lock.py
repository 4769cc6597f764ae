"""One run per run dir: an OS file lock on ``<run_dir>/.xdrl-run.lock`` held for the whole run.

The lock is filelock's ``FileLock`` (``flock``), so the kernel releases it when its process ends
in any way, SIGKILL included: a requeued SLURM job or a restart after a crash finds the lock
file of the dead run, takes the lock and says so. The file records the holder (pid, host, start
time) so that a second live run can say who holds the dir.

The CLI takes the lock before Hydra writes ``.hydra/`` and the log file when the command line
names the run dir (``hydra.run.dir=...``, as a restart or a requeue does); ``run()`` takes it
otherwise, and finds it already held by this process in the first case.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from xdrl.config.errors import ConfigError
from xdrl.run.layout import LOCK_FILE

log = logging.getLogger(__name__)

_HELD: dict[Path, RunDirLock] = {}  # the locks this process holds, by resolved path


class RunDirLock:
    """Hold ``<run_dir>/.xdrl-run.lock`` (exclusive, non-blocking) for a ``with`` block.

    Args:
        run_dir: the run directory to own.

    Raises:
        ConfigError: (key ``run_dir``) when another live process holds the dir.

    Example:
        >>> with RunDirLock("outputs/run"):
        ...     train()
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.path = (Path(run_dir) / LOCK_FILE).resolve()
        self.previous: dict[str, Any] = {}
        self._outer: RunDirLock | None = None
        self._lock = FileLock(self.path, blocking=False, on_acquired=self._record)

    def _record(self, fd: int) -> None:
        """Keep what a dead holder left in the file, then write this process's record."""
        left = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        self.previous = _parse(left) if left else {}
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)

    def __enter__(self) -> RunDirLock:
        self._outer = _HELD.get(self.path)
        if self._outer is not None:  # taken by the CLI before Hydra wrote anything
            self._outer.report_takeover()
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            holder = _parse(self.path.read_text(errors="replace")) if self.path.exists() else {}
            raise ConfigError(
                "run_dir",
                f"{self.path.parent} is in use by pid {holder.get('pid', '?')} on host "
                f"{holder.get('host', '?')} since {holder.get('since', '?')}; wait for that run "
                "to end or pick another hydra.run.dir",
            ) from None
        _HELD[self.path] = self
        if logging.getLogger().handlers:  # else the run's logging is not set up yet: run() says it
            self.report_takeover()
        return self

    def report_takeover(self) -> None:
        """Log, once, that the lock was taken over from a run that died holding the dir."""
        if self.previous:
            log.warning(
                "Took over the lock of %s left by pid %s on host %s (since %s), which is no "
                "longer running",
                self.path.parent,
                self.previous.get("pid", "?"),
                self.previous.get("host", "?"),
                self.previous.get("since", "?"),
            )
            self.previous = {}

    def __exit__(self, *exc: Any) -> None:
        if self._outer is not None:
            return
        _HELD.pop(self.path, None)
        # Empty the record first: a file left behind must not read as a holder that died.
        if self._lock.is_locked:
            self.path.write_text("")
            self._lock.release()


def _parse(text: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except ValueError:
        return {"pid": text.split()[0] if text.split() else "?"}
    return record if isinstance(record, dict) else {}


@contextmanager
def lock_named_run_dir(args: list[str]) -> Iterator[None]:
    """For the CLI: hold the run-dir lock from now on when the command line ``args`` name the dir
    of a single run, so a second live run stops (one line, exit 2) before Hydra rewrites
    ``.hydra/`` and the log of the first."""
    named = [a.split("=", 1)[1] for a in args if a.startswith("hydra.run.dir=")]
    if not named or "${" in named[-1] or any(a in ("-m", "--multirun") for a in args):
        yield
        return
    lock = RunDirLock(named[-1])
    try:
        lock.__enter__()
    except ConfigError as err:
        print(f"xdrl-train: config error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        yield
    finally:
        lock.__exit__()
