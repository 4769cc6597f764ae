"""Ctrl-C on a sweep: what the sweep process, its jobs and its sweepers share.

A terminal sends SIGINT to the whole foreground process group: the sweep process and every
joblib worker. Each running job handles it as a single run does (``xdrl.run.lifecycle``: the
iteration
finishes, a checkpoint is written, ``summary.json`` says ``interrupted``). Here: the sweep
process's handler, which notes the stop in ``<sweep dir>/.interrupted`` instead of raising
KeyboardInterrupt (joblib would then kill every worker); the loky worker initializer that makes
idle workers ignore SIGINT; and the reads the jobs and sweepers use so that no job starts after.
Light: imported by Hydra at start-up (no torch).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from xdrl.run.layout import SUMMARY_FILE, write_atomically

log = logging.getLogger(__name__)

STOP_FILE = ".interrupted"  # in the sweep dir: Ctrl-C reached the sweep; no job starts after it


def sweep_interrupted(sweep_dir: str | Path) -> bool:
    """Whether Ctrl-C reached the sweep writing into ``sweep_dir`` (jobs not started skip)."""
    return (Path(sweep_dir) / STOP_FILE).exists()


def mark_interrupted(sweep_dir: str | Path) -> None:
    """Note in ``sweep_dir`` that the sweep was interrupted (read by the jobs and the sweepers)."""
    try:
        Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        (Path(sweep_dir) / STOP_FILE).touch()
    except OSError:
        log.warning("Could not mark %s as interrupted", sweep_dir, exc_info=True)


def note_job_status(run_dir: str | Path, status: str, reason: str) -> None:
    """A ``summary.json`` for a job that trained nothing (skipped, or Ctrl-C while it was being
    built), unless the folder already holds one from an earlier run of the command."""
    path = Path(run_dir) / SUMMARY_FILE
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {"status": status, "total_frames": 0, "error": reason}
    write_atomically(path, json.dumps(summary, indent=2, sort_keys=True) + "\n")


def ignore_ctrl_c() -> None:
    """Loky worker initializer: an idle worker ignores SIGINT (each job handles its own); by
    default the KeyboardInterrupt killed the idle worker, which broke joblib's pool and made it
    kill every running job without a checkpoint."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def use_loky_workers_that_ignore_ctrl_c() -> None:
    """Make joblib's ``loky`` backend (Hydra's joblib launcher asks for it by name) start its
    workers with :func:`ignore_ctrl_c` as initializer."""
    from joblib import register_parallel_backend
    from joblib.parallel import LokyBackend

    class CtrlCSafeLokyBackend(LokyBackend):
        def configure(self, n_jobs: int = 1, parallel: Any = None, **kwargs: Any) -> int:
            kwargs.setdefault("initializer", ignore_ctrl_c)
            return int(super().configure(n_jobs, parallel, **kwargs))

    register_parallel_backend("loky", CtrlCSafeLokyBackend)


class SweepCtrlC:
    """The sweep process's SIGINT handler: the first Ctrl-C marks the sweep interrupted (the
    running jobs, which got the same signal from the terminal, finish their iteration, checkpoint
    and stop; no job starts after); a second aborts at once."""

    def __init__(self, sweep_dir: str) -> None:
        self.sweep_dir = sweep_dir
        self.previous: Any = None
        self.received = False

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)

    def restore(self) -> None:
        if self.previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None

    def _handle(self, _signum: int, _frame: Any) -> None:
        if self.received:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        self.received = True
        mark_interrupted(self.sweep_dir)
        log.warning(
            "Ctrl-C: running jobs stop after their iteration and checkpoint; no new job starts "
            "(Ctrl-C again to abort at once)"
        )


INTERRUPTED: list[str] = []  # sweep dirs this process saw interrupted (read by the CLI)


def interrupted_sweep() -> str | None:
    """The sweep dir of this process's sweep if Ctrl-C interrupted it, else None."""
    return INTERRUPTED[-1] if INTERRUPTED else None
