"""Shared fixtures and helpers: compose the real config tree with small overrides, run
xdrl-train, wait for what a run reports, a plain CartPole env and a fake trainer for hooks."""

from __future__ import annotations

import array
import atexit
import csv
import importlib.util
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import IO, Any

import pytest
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
XDRL_TRAIN = str(Path(sys.executable).with_name("xdrl-train"))

# No logger, evaluation or checkpoint: for in-process runs that only train.
QUIET = ["logging=none", "eval=none", "checkpoint=none"]

# One torch thread per test process (xdrl's `num_threads: auto` reads OMP_NUM_THREADS as its cap):
# make test runs two workers on two cores, and `auto` sampling the load while the other worker was
# between tests picked 2 threads, which then waited for each other's cores (the atari_dqn preset's
# one-batch run took 3.8 s alone and 8.9 s in the suite). Set before the warm interpreter starts.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The test envs (tests/user_envs.py, tests/stop_envs.py) stand for a user's installed package
# (`env.id=tests.user_envs:XdrlCorridor-v0`): every console script the suite starts can import
# them, wherever its working folder is. Set before the warm interpreter starts.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

# W&B never reaches a server from a test; the environment of every xdrl-train subprocess.
WANDB_OFFLINE = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
ENV = {**os.environ, **WANDB_OFFLINE}

# Optional env packages: the xdrl extra named in an env file, and the module it installs.
OPTIONAL_ENV_PACKAGES = {"box2d": "Box2D", "mujoco": "mujoco", "atari": "ale_py"}

# A few hundred frames: enough for two iterations, an evaluation and every metric.
SMALL = [
    "total_frames=512",
    "frames_per_batch=256",
    "env.num_envs=4",
    "algorithm.build.epochs=2",
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=50",
]


def compose_config(overrides: list[str], run_dir: Path) -> DictConfig:
    """The config ``xdrl-train <overrides>`` would run, writing into ``run_dir``."""
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        return compose("config", overrides=[*overrides, f"run_dir={run_dir}", "exp_name=test"])


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> None:
    """In-process training runs with one torch thread, as ``num_threads: auto`` gives the small
    test networks from the console script (which the in-process ``xdrl.run.lifecycle.run`` skips):
    two
    pytest workers with torch's default of one thread per core each oversubscribed the two
    cores, and a 256-frame SAC preset took 94-120 s instead of about 1 s."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose the real config with overrides, output under tmp_path."""

    def _make(*overrides: str) -> DictConfig:
        return compose_config(list(overrides), tmp_path / "run")

    return _make


# Console scripts run from the warm interpreter of tests/warm_python.py unless XDRL_TEST_WARM=0.
WARM = os.environ.get("XDRL_TEST_WARM", "1") != "0"
# Variables read while torch and its kin are imported: a request that changes one starts fresh.
# RAY_: a run joining a Ray cluster with RAY_AUTH_MODE=token from a warm child sent no token
# (seen: "RAY_AUTH_MODE is currently 'disabled'"); the same run started fresh joined.
_IMPORT_TIME_PREFIXES = (
    "OMP_",
    "MKL_",
    "KMP_",
    "TORCH",
    "PYTORCH",
    "CUDA",
    "PYTHON",
    "LD_",
    "RAY_",
)
_warm: tuple[subprocess.Popen, str, dict[str, str]] | None = None


def _warm_socket() -> tuple[str, dict[str, str]] | None:
    """The socket of this test process's warm interpreter (started on first use), and the
    environment it was started with; None where it could not start."""
    global _warm
    if _warm is None:
        folder = Path(tempfile.mkdtemp(prefix="xdrl-warm-"))
        path = str(folder / "socket")
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("warm_python.py")), path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=(folder / "stderr.txt").open("w"),
        )  # fmt: skip
        atexit.register(proc.kill)
        while not os.path.exists(path) and proc.poll() is None:
            time.sleep(0.05)  # until it has imported torch and listens
        _warm = (proc, path, dict(os.environ))
    proc, path, started_with = _warm
    return (path, started_with) if proc.poll() is None else None


def run_script(
    name: str,
    args: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """Run the installed console script ``name`` (``xdrl-train``, ``xdrl-eval``, ...) with
    ``args`` as a user would, output captured; from the warm interpreter where it can."""
    proc = start_script(name, args, cwd, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def start_script(
    name: str,
    args: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    *,
    stdout: int | IO[str] = subprocess.DEVNULL,
    stderr: int | IO[str] = subprocess.DEVNULL,
    start_new_session: bool = False,
) -> subprocess.Popen | WarmProcess:
    """Start the installed console script ``name`` with ``args`` (output: DEVNULL, PIPE read
    back as text, or a file); from the warm interpreter where it can, else a real Popen."""
    # An in-process W&B test leaves its service's address in os.environ; a run started from a
    # shell has its own service (sharing one, a killed run's id stayed "in use" for the restart).
    full_env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"} | (env or {})
    argv = [str(Path(sys.executable).with_name(name)), *map(str, args)]
    warm = _warm_socket() if WARM else None
    if warm is not None:
        path, started_with = warm
        import_time = [k for k in {*full_env, *started_with} if k.startswith(_IMPORT_TIME_PREFIXES)]
        if all(full_env.get(k) == started_with.get(k) for k in import_time):
            return WarmProcess(path, argv, cwd or Path.cwd(), full_env, stdout, stderr,
                               start_new_session)  # fmt: skip
    return subprocess.Popen(
        argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        text=True, start_new_session=start_new_session,
    )  # fmt: skip


class WarmProcess:
    """What the tests use of ``subprocess.Popen``, for a console script run by a child of the
    warm interpreter: ``pid``, ``poll``, ``wait``, ``communicate``, ``send_signal``, ``kill``
    and ``stderr``; piped output goes to files, read back as text. ``entry_point``
    (``module:function``) replaces the console script's, for tests of the server itself."""

    def __init__(
        self,
        path: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        stdout: int | IO[str],
        stderr: int | IO[str],
        new_session: bool,
        entry_point: str | None = None,
    ) -> None:
        if entry_point is None:  # the console script's, as installed
            (entry,) = entry_points(group="console_scripts", name=Path(argv[0]).name)
            entry_point = entry.value
        self.args = argv
        self.returncode: int | None = None
        self._pipes = [tempfile.TemporaryFile() if s == subprocess.PIPE else None
                       for s in (stdout, stderr)]  # fmt: skip
        request = {"script": argv[0], "args": argv[1:], "cwd": str(cwd), "env": env,
                   "entry_point": entry_point, "new_session": new_session}  # fmt: skip
        with open(os.devnull, "r+") as null:
            fds = [null.fileno()]
            for target, pipe in zip((stdout, stderr), self._pipes, strict=True):
                chosen = pipe or (null if target == subprocess.DEVNULL else target)
                assert not isinstance(chosen, int), "PIPE, DEVNULL or a file"
                fds.append(chosen.fileno())
            self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._conn.connect(path)
            self._conn.sendmsg(
                [json.dumps(request).encode()],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
            )
        self._replies = self._conn.makefile()
        self.pid: int = json.loads(self._replies.readline())["pid"]

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._finish()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._finish()
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        self.wait(timeout)
        out, err = (p.read().decode() if p is not None else None for p in self._pipes)
        return out, err

    @property
    def stderr(self) -> IO[str] | None:
        """The piped error output so far, as a file to read."""
        pipe = self._pipes[1]
        return None if pipe is None else io.StringIO(os.pread(pipe.fileno(), 1 << 26, 0).decode())

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _finish(self) -> None:
        self.returncode = json.loads(self._replies.readline())["returncode"]
        self._conn.close()
        for pipe in self._pipes:
            if pipe is not None:
                pipe.seek(0)


def run_cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """Run the installed ``xdrl-train`` console script as a user would (W&B offline).

    ``timeout`` is a safety net against a hung run, not a deadline: the three-job ``dst_dqn``
    sweep of ``test_pareto.py`` ran past 300 s with three other CPU-bound jobs beside the suite
    on 2 cores."""
    return run_script("xdrl-train", args, cwd, {**WANDB_OFFLINE, **(env or {})}, timeout)


def load_script(name: str) -> Any:
    """``scripts/<name>.py`` (a script, not an importable module) loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every CSV scalar under ``log_dir/**/scalars`` as {metric: [(step, value), ...]}."""
    out: dict[str, list[tuple[int, float]]] = {}
    for scalars in log_dir.rglob("scalars"):
        for path in scalars.rglob("*.csv"):
            name = str(path.relative_to(scalars).with_suffix(""))
            with path.open() as fh:
                out[name] = [(int(float(s)), float(v)) for s, v in csv.reader(fh)]
    return out


def made_up_transitions(n: int, obs_dim: int, draw_actions: Any, *, seed: int = 0) -> Any:
    """A fixed batch of ``n`` made-up transitions (``obs_dim``-d observations, actions from
    ``draw_actions(generator, n)``, a quarter of them terminal, to test bootstrapping) for the
    off-policy losses and updates."""
    import torch
    from tensordict import TensorDict

    gen = torch.Generator().manual_seed(seed)
    terminated = torch.rand(n, 1, generator=gen) < 0.25
    return TensorDict(
        {
            "observation": torch.randn(n, obs_dim, generator=gen),
            "action": draw_actions(gen, n),
            "next": {
                "observation": torch.randn(n, obs_dim, generator=gen),
                "reward": torch.randn(n, 1, generator=gen),
                "terminated": terminated,
                "done": terminated.clone(),
            },
        },
        batch_size=[n],
    )


def pendulum_transitions(n: int = 64, *, seed: int = 0) -> Any:
    """Made-up Pendulum transitions: 3-d observations, actions in [-2, 2]."""
    import torch

    return made_up_transitions(
        n, 3, lambda gen, k: 4 * torch.rand(k, 1, generator=gen) - 2, seed=seed
    )


def train_each(
    tmp_path_factory: pytest.TempPathFactory, runs: dict[str, list[str]], common: list[str]
) -> dict[str, Path]:
    """Train each named run of ``runs`` (overrides after ``common``) once, in process: name ->
    run dir (for module-scoped fixtures whose tests read the same trained runs)."""
    import xdrl.run.lifecycle

    out = {}
    for name, overrides in runs.items():
        run_dir = tmp_path_factory.mktemp(name) / "run"
        xdrl.run.lifecycle.run(compose_config([*common, *overrides], run_dir))
        out[name] = run_dir
    return out


def read_summary(run_dir: Path) -> dict:
    """The run's summary.json."""
    return json.loads((run_dir / "summary.json").read_text())


def missing_extra(env_file: str) -> str | None:
    """The xdrl extra ``conf/env/<env_file>.yaml`` needs and this venv lacks, or None."""
    text = (CONF / "env" / f"{env_file}.yaml").read_text()
    for extra, module in OPTIONAL_ENV_PACKAGES.items():
        if f"xdrl[{extra}]" in text and importlib.util.find_spec(module) is None:
            return extra
    return None


def wait_for(
    predicate: Callable[[], bool],
    proc: subprocess.Popen | WarmProcess,
    *,
    timeout: float = 120,
    log: Path | None = None,
) -> None:
    """Poll ``predicate`` until it holds; fail with the run's output (``log``, else its piped
    stderr) if ``proc`` ends first or ``timeout`` seconds pass (a safety net, not a deadline)."""

    def output() -> str:
        if log is not None:
            return log.read_text()[-3000:]
        return proc.stderr.read()[-2000:] if proc.stderr else ""

    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"run ended early:\n{output()}"
        assert time.monotonic() < deadline, f"timed out:\n{output()}"
        time.sleep(0.1)


# Sweep jobs that can be stopped mid-run: a checkpoint every 256-frame PPO iteration and no
# evaluation on the way (add total_frames, the sweep's own keys and hydra.sweep.dir).
STOPPABLE_JOB = [
    "frames_per_batch=256",
    "env.num_envs=4",
    "algorithm.build.epochs=1",
    "eval.interval_frames=1000000",
    "eval.episodes=2",
    "eval.max_steps=50",
    "eval.before_training=false",
    "logging=none",
    "checkpoint.interval_frames=256",
    "num_threads=1",
]


def ctrl_c_when(args: list[str], cwd: Path, ready: Callable[[], bool]) -> tuple[int, str]:
    """Run ``xdrl-train args`` in its own session and, once ``ready()`` holds, send one SIGINT
    to its whole process group (what one Ctrl-C in a terminal sends); its exit code and stderr.
    """
    log = cwd / "ctrl_c_stderr.txt"
    with log.open("w") as err:
        proc = start_script(
            "xdrl-train", args, cwd, {**WANDB_OFFLINE, "WANDB_MODE": "disabled"}, stderr=err,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_for(ready, proc, timeout=600, log=log)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return code, log.read_text()


def cartpole(render: bool = False) -> Any:
    """TorchRL's ``GymEnv`` CartPole with the transforms xdrl's hooks read (no xdrl code)."""
    from torchrl.envs import Compose, GymEnv, InitTracker, RewardSum, StepCounter, TransformedEnv

    kwargs = {"render_mode": "rgb_array"} if render else {}
    base = GymEnv("CartPole-v1", categorical_action_encoding=True, **kwargs)
    return TransformedEnv(base, Compose(StepCounter(), RewardSum(), InitTracker()))


class FakeTrainer:
    """Enough of TorchRL's Trainer for hooks that only register ops and read counters."""

    def __init__(self, logger: Any = None, total_frames: int = 1000) -> None:
        self.logger = logger
        self.collected_frames = 0
        self.total_frames = total_frames
        self.ops: list[tuple[str, object]] = []
        self.modules: dict[str, object] = {}

    def register_op(self, dest: str, op: object, **kwargs: Any) -> None:
        self.ops.append((dest, op))

    def register_module(self, name: str, module: object) -> None:
        self.modules[name] = module
