"""``RunSpec``: a run's config checked once into one typed object, its derived values, and the
caller's config left as given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import SMALL, compose_config, read_summary
from xdrl.config.check import check_config
from xdrl.config.spec import RunSpec

# xdrl-train's main() with check_config counting its calls, one line each into $XDRL_TEST_CHECKS
# (patched before any module binds the name, so every caller is counted).
COUNTING_MAIN = """
import os, sys
import xdrl.config.check as check

original = check.check_config

def counted(cfg):
    with open(os.environ["XDRL_TEST_CHECKS"], "a") as fh:
        fh.write("check\\n")
    return original(cfg)

check.check_config = counted
from xdrl.cli import main

sys.argv = ["xdrl-train", *sys.argv[1:]]
main()
"""


def _train_counting_checks(args: list[str], cwd: Path) -> tuple[int, subprocess.CompletedProcess]:
    """Run ``xdrl-train args`` in a fresh interpreter; the number of check_config calls."""
    counts = cwd / "checks.txt"
    env = {**os.environ, "XDRL_TEST_CHECKS": str(counts), "WANDB_MODE": "offline"}
    result = subprocess.run(
        [sys.executable, "-c", COUNTING_MAIN, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a safety net against a hung run, not a deadline
    )
    calls = len(counts.read_text().splitlines()) if counts.exists() else 0
    return calls, result


def test_spec_values_and_derived_values(tmp_path: Path) -> None:
    cfg = compose_config(
        [
            "experiment=cartpole_ppo",
            "seed=3",
            "frames_per_batch=64",
            "env.num_envs=4",
            "env.frame_skip=2",
            "total_frames=1000",
        ],
        tmp_path / "run",
    )
    spec = check_config(cfg)
    assert isinstance(spec, RunSpec)
    assert (spec.seed, spec.frames_per_batch, spec.frame_skip) == (3, 64, 2)
    assert spec.batch_frames == 128  # 64 agent steps of 2 frames
    assert spec.requested_total_frames == 1000
    assert spec.total_frames == 1024  # 8 whole batches of 128 frames
    assert spec.batches == 8
    assert spec.eval_seed == 10_003
    assert spec.algorithm_name == "ppo"
    assert spec.env_id == "CartPole-v1"
    assert spec.run_dir == str(tmp_path / "run")
    assert spec.resolved["total_frames"] == 1000  # the config as given
    assert spec.resolved is spec.resolved  # resolved once
    assert cfg.total_frames == 1000  # the caller's config is not changed


def test_build_leaves_the_callers_config_unchanged(make_cfg) -> None:
    from xdrl.training.build import build_trainer

    cfg = make_cfg(*SMALL, "total_frames=500", "logging=none", "eval=none", "checkpoint=none")
    run = build_trainer(cfg)
    try:
        assert run.trainer.total_frames == 512  # rounded up to whole 256-frame batches
        assert cfg.total_frames == 500
    finally:
        run.close()


def test_single_run_checks_its_config_once_and_both_saved_configs_agree(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    calls, result = _train_counting_checks(
        [*SMALL, "total_frames=500", "logging=none", f"run_dir={run_dir}"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == 1
    assert read_summary(run_dir)["total_frames"] == 512  # trained in whole 256-frame batches
    hydra_config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    (checkpoint,) = sorted((run_dir / "checkpoints").glob("checkpoint-*"))
    saved = yaml.safe_load((checkpoint / "config.yaml").read_text())
    assert hydra_config["total_frames"] == saved["total_frames"] == 500


def test_each_sweep_job_checks_its_config_once(tmp_path: Path) -> None:
    """One check per job, and one of the first job's config before any starts (a value every
    job gets stops the sweep there, in one line)."""
    calls, result = _train_counting_checks(
        ["-m", *SMALL, "seed=0,1", "logging=none", "eval=none", "checkpoint=none"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(list(tmp_path.glob("multirun/*/*/*/summary.json"))) == 2
    assert calls == 3  # the sweep's pre-check of its first job, then one per job
