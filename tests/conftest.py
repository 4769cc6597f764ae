"""Shared fixtures: compose the real config tree with small overrides, run xdrl-train."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
XDRL_TRAIN = str(Path(sys.executable).with_name("xdrl-train"))

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
    full_env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
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
