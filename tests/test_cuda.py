"""``device=cuda`` end to end: train, evaluate, checkpoint and resume on a GPU (skipped without
one). Every tensor xdrl creates must follow the run's device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import SMALL, read_summary, run_cli

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ALGORITHMS = {
    "ppo": ["env=cartpole", "algorithm=ppo"],
    "sac": ["env=pendulum", "algorithm=sac", "algorithm.build.init_random_frames=256"],
}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_train_evaluate_checkpoint_and_resume_on_cuda(tmp_path: Path, algorithm: str) -> None:
    run_dir = tmp_path / "run"
    args = [
        *[o for o in SMALL if not o.startswith("total_frames")],
        *ALGORITHMS[algorithm],
        "device=cuda",
        "checkpoint.interval_frames=256",
        f"hydra.run.dir={run_dir}",
    ]
    first = run_cli([*args, "total_frames=512"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["total_frames"] == 512
    assert "eval/deterministic/reward/episode_reward_mean" in summary["eval"]
    second = run_cli([*args, "total_frames=1024"], cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["total_frames"] == 1024
    assert int(Path(summary["resumed_from"]).name.split("-")[-1]) == 512
