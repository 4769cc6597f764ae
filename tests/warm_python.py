"""A warm interpreter for the console-script tests: it imports torch, TorchRL and the other heavy
third-party libraries once, then forks one child per request, which runs the console script's
entry point (``xdrl.cli:main``, ...) with the request's arguments, working directory,
environment and standard streams, and exits as the script's own process would.

Why: each ``xdrl-train`` process spends about 2.5 s of CPU importing torch, tensordict (which
imports ``torch._dynamo``) and TorchRL before it does anything, and the suite starts about a
hundred of them; on two cores that import was a third of ``make test``'s wall time. xdrl itself
is not imported here, so each child imports it fresh, in the order the console script does.
Tests that are about the process itself (signals, import cost, a terminal) start the real
console script; ``XDRL_TEST_WARM=0`` makes every test do so.

Why forking after ``import torch`` is safe here: a fork copies only the thread that calls it, so
it is unsafe where another thread holds a lock or a library believes its worker threads exist
(GNU OpenMP's pool, once started, hangs a forked child's first parallel region). At each fork
this server is a single thread. The imports start one thread pool: numpy's OpenBLAS starts its
workers at import, and its ``pthread_atfork`` handler stops them before every fork (they restart
only on a BLAS call, which the server never makes). torch's OpenMP pool starts at the first
parallel region, and the server never runs a torch op: it imports, listens and forks. So after
its first fork the server has exactly one thread (measured with torch 2.13: 2 threads after the
imports, 1 after a fork; a torch op on 2 threads would add an OpenMP worker that no fork stops),
and each child builds its own pools on first use. ``tests/test_warm_python.py`` asserts both:
the server's thread count after a fork, and a child's parallel torch op. Keep torch ops out of
this module: one parallel region before a fork would break it.

Run as ``python warm_python.py <socket path>``; requests come from ``conftest.run_script``.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import socket
import sys
from importlib import import_module

# The libraries every console script of xdrl imports before its first step; xdrl is not among
# them (its import order is part of what the tests check).
WARM_IMPORTS = (
    "numpy",
    "torch",
    "tensordict",
    "torchrl",
    "torchrl.envs",
    "torchrl.collectors",
    "torchrl.objectives",
    "torchrl.trainers",
    "gymnasium",
    "hydra",
    "omegaconf",
)
# Variables the warm imports set in os.environ; a child's environment is the request's plus these.
IMPORT_ENV: dict[str, str] = {}


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: its JSON and the three file descriptors sent along (stdin, stdout, stderr)."""
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def serve(path: str) -> dict:
    """Serve requests while the test process lives; in a forked child, return its request.

    Each request gets a handler (a fork) that forks the run, reports its pid, waits for it and
    reports its exit code, so that runs overlap as real processes do (a test may start a second
    run while the first is going)."""
    before = dict(os.environ)
    for name in WARM_IMPORTS:
        import_module(name)
    # what the imports set (gymnasium: PYGAME_HIDE_SUPPORT_PROMPT), as a cold process has it
    IMPORT_ENV.update({k: v for k, v in os.environ.items() if before.get(k) != v})
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(8)
    listener.settimeout(1)
    os.replace(path + ".tmp", path)  # the socket appears only once it accepts
    parent = os.getppid()
    while os.getppid() == parent:  # until the test process is gone
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # handlers that have reported
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        request, fds = _receive(conn)
        if os.fork() != 0:
            conn.close()
            for fd in fds:
                os.close(fd)
            continue
        listener.close()
        pid = os.fork()
        if pid == 0:
            conn.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            return request
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        os._exit(0)
    sys.exit(0)


def run(request: dict) -> None:
    """Become the console script of ``request``: its directory, environment and argv."""
    if request["new_session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(IMPORT_ENV)
    sys.argv = [request["script"], *request["args"]]
    module, _, function = request["entry_point"].partition(":")
    try:
        code = _exit_code(getattr(import_module(module), function)())
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - as the interpreter does: traceback, exit status 1
        sys.excepthook(*sys.exc_info())
        code = 1
    _exit(code)


def _exit_code(code: object) -> int:
    """The exit status ``sys.exit(code)`` gives (a message goes to stderr, status 1)."""
    if code is None or isinstance(code, int):
        return int(code or 0)
    print(code, file=sys.stderr)
    return 1


def _exit(code: int) -> None:
    """Exit as the interpreter's shutdown does, up to its module teardown: wait for non-daemon
    threads, run the atexit handlers (logging's flush among them), flush the standard streams,
    then leave. The teardown itself is skipped: in a child forked from a heap holding torch and
    TorchRL it touches every object's reference count, copying the parent's pages, and took
    1.0-1.1 s of CPU per child against 0.05 s without it (6 forks each way, torch 2.13)."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # noqa: SLF001 - the interpreter's own step
    atexit._run_exitfuncs()  # noqa: SLF001 - the interpreter's own step
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run(serve(sys.argv[1]))
