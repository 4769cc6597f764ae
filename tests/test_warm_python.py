"""The warm interpreter behind the console-script tests (``tests/warm_python.py``, driven by
``conftest.WarmProcess``): a child runs with the request's argv, working directory, environment,
standard streams and session, its exit code and signals come back as a real process's would, runs
overlap, and the server holds no thread pool when it forks.

The children run ``probe`` below (imported in the child as the top-level module
``test_warm_python``, from the server's own folder): this module imports nothing from ``tests``
at its top, because the child's ``sys.path`` has ``tests/`` and not the repository root.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROBE = "test_warm_python:probe"
# A request's environment, far from the test process's own (LANG set: no locale coercion).
REQUEST_ENV = {"PATH": os.environ.get("PATH", "/usr/bin"), "LANG": "C.UTF-8", "XDRL_PROBE": "42"}

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="reads threads from /proc (Linux)"
)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def probe() -> int:
    """The entry point the tests ask the warm interpreter to run; ``sys.argv[1]`` picks what."""
    mode = sys.argv[1]
    if mode == "report":  # what the child was given; exit with argv[2]
        report = {"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ),
                  "pid": os.getpid(), "sid": os.getsid(0), "stdin": sys.stdin.read(),
                  "threads": _threads()}  # fmt: skip
        print(json.dumps(report))
        print("to stderr", file=sys.stderr)
        return int(sys.argv[2])
    if mode == "torch":  # a parallel torch op on 2 threads: the child starts its own pool
        import torch

        before = _threads()
        torch.set_num_threads(2)
        total = torch.ones(1 << 22).sum().item()
        print(json.dumps({"before": before, "after": _threads(), "total": total}))
        return 0
    if mode == "wait":  # until SIGUSR1 (exit 7) or another signal
        signal.signal(signal.SIGUSR1, lambda *_: sys.exit(7))
        print("ready", flush=True)
        while True:
            signal.pause()
    return 2


def _start(args: list[str], cwd: Path, *, env: dict[str, str] | None = None,
           stdout: Any = subprocess.PIPE, new_session: bool = False) -> Any:  # fmt: skip
    from tests.conftest import WarmProcess, _warm_socket

    warm = _warm_socket()
    assert warm is not None, "the warm interpreter did not start"
    env = dict(os.environ) if env is None else env
    return WarmProcess(warm[0], ["/somewhere/probe", *args], cwd, env, stdout, subprocess.PIPE,
                       new_session, entry_point=PROBE)  # fmt: skip


@functools.cache
def _cold_environment() -> dict[str, str]:
    """The environment a fresh interpreter started with ``REQUEST_ENV`` has once it has imported
    what the server imports (gymnasium, torch and TorchRL set variables at import)."""
    from tests.warm_python import WARM_IMPORTS

    code = ("import importlib, json, os, sys\n"
            "for name in sys.argv[1:]: importlib.import_module(name)\n"
            "print(json.dumps(dict(os.environ)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, *WARM_IMPORTS], env=REQUEST_ENV, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return json.loads(out)


def _server_pid() -> int:
    from tests import conftest

    assert conftest._warm is not None
    return conftest._warm[0].pid


@pytest.mark.parametrize(("code", "new_session"), [(0, False), (3, True)])
def test_a_child_gets_the_request_and_reports_its_exit_code(
    tmp_path: Path, code: int, new_session: bool
) -> None:
    proc = _start(["report", str(code), "a b"], tmp_path, env=REQUEST_ENV, new_session=new_session)
    out, err = proc.communicate(timeout=120)
    report = json.loads(out)
    assert proc.returncode == code
    assert report["argv"] == ["/somewhere/probe", "report", str(code), "a b"]
    assert report["cwd"] == str(tmp_path)
    # the request's environment, not the server's (which has pytest's), plus what the imports
    # set in a fresh interpreter (those the server's own start environment lacked: a test
    # process that imported torchrl first passes them on in every request, as a real one does)
    cold = _cold_environment()
    extra = {k: v for k, v in report["env"].items() if k not in REQUEST_ENV}
    assert {k: report["env"].get(k) for k in REQUEST_ENV} == REQUEST_ENV
    assert extra == {k: cold[k] for k in extra}
    assert report["env"]["XDRL_PROBE"] == "42" and "PYTEST_CURRENT_TEST" not in report["env"]
    assert report["stdin"] == "" and err == "to stderr\n"
    assert report["pid"] == proc.pid != _server_pid()  # signals go to this pid
    assert (report["sid"] == report["pid"]) is new_session
    assert report["threads"] == 1


def test_two_runs_overlap(tmp_path: Path) -> None:
    from tests.conftest import wait_for

    log = tmp_path / "first.txt"
    with log.open("w") as fh:
        first = _start(["wait"], tmp_path, stdout=fh)
        try:
            wait_for(lambda: log.read_text() == "ready\n", first)
            second = _start(["report", "5"], tmp_path)
            assert second.wait(timeout=120) == 5  # started and ended while the first waits
            assert first.poll() is None and second.pid != first.pid
            first.send_signal(signal.SIGUSR1)
            assert first.wait(timeout=120) == 7
        finally:
            first.kill()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGUSR1, 7), (signal.SIGTERM, -15)])
def test_a_signal_reaches_the_child(tmp_path: Path, sig: int, code: int) -> None:
    from tests.conftest import wait_for

    log = tmp_path / "out.txt"
    with log.open("w") as fh:
        proc = _start(["wait"], tmp_path, stdout=fh)
        try:
            wait_for(lambda: log.read_text() == "ready\n", proc)
            proc.send_signal(sig)
            # the child's own handler (SIGUSR1), or the default action, as for a real process
            assert proc.wait(timeout=120) == code
        finally:
            proc.kill()


def test_the_server_forks_with_no_thread_pool(tmp_path: Path) -> None:
    """Why forking after ``import torch`` is safe here (see warm_python's docstring): at each
    fork the server is one thread. numpy's OpenBLAS starts a worker at import but shuts it down
    before any fork (its pthread_atfork handler) and restarts it only on a BLAS call, which the
    server never makes; torch's OpenMP pool starts at the first parallel region, which the
    server never runs (it only imports). So after a fork the server is exactly one thread, and a
    child that runs a parallel torch op builds its own pool and gets the right answer."""
    proc = _start(["torch"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    child = json.loads(out)
    assert child["before"] == 1  # a fork copies only the thread that forked
    assert child["after"] > 1  # the child's own OpenMP pool
    assert child["total"] == float(1 << 22)
    assert len(os.listdir(f"/proc/{_server_pid()}/task")) == 1
