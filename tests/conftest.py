"""Shared fixtures and helpers: compose the real config tree with small overrides, run
xdrl-train, wait for what a run reports, a plain CartPole env and a fake trainer for hooks."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
XDRL_TRAIN = str(Path(sys.executable).with_name("xdrl-train"))

# No logger, evaluation or checkpoint: for in-process runs that only train.
QUIET = ["logging=none", "eval=none", "checkpoint=none"]

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


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose the real config with overrides, output under tmp_path."""

    def _make(*overrides: str) -> DictConfig:
        return compose_config(list(overrides), tmp_path / "run")

    return _make


def run_cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run the installed ``xdrl-train`` console script as a user would."""
    full_env = {**os.environ, **WANDB_OFFLINE, **(env or {})}
    return subprocess.run(
        [XDRL_TRAIN, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def read_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every CSV scalar under ``log_dir/**/scalars`` as {metric: [(step, value), ...]}."""
    out: dict[str, list[tuple[int, float]]] = {}
    for scalars in log_dir.rglob("scalars"):
        for path in scalars.rglob("*.csv"):
            name = str(path.relative_to(scalars).with_suffix(""))
            with path.open() as fh:
                out[name] = [(int(float(s)), float(v)) for s, v in csv.reader(fh)]
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
    proc: subprocess.Popen,
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
        proc = subprocess.Popen(
            [XDRL_TRAIN, *args], cwd=cwd, env={**ENV, "WANDB_MODE": "disabled"},
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
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
