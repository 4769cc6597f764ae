"""With observation normalization, evaluation sees the training statistics, frozen, after a
resume too."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.conftest import compose_config
from xdrl.trainer_hooks.observation_norm import observation_norm
from xdrl.training.build import build_trainer

PENDULUM = [
    "env=pendulum",
    "env.normalize_observations=true",
    "env.num_envs=2",
    "frames_per_batch=128",
    "algorithm.build.minibatch_size=64",
    "eval.episodes=2",
    "eval.max_steps=30",
    "eval.interval_frames=128",
    "checkpoint.interval_frames=256",
    "logging=none",
]


def _norms(run_):
    train_env = run_.envs[0]  # build_trainer appends the train env, then the evaluation env
    eval_env = run_.hook_set.eval_hook_set.environment
    return observation_norm(train_env), observation_norm(eval_env), eval_env


def _stats(norm) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """loc, scale and count of the observation statistics (copies)."""
    return tuple(t["observation"].clone() for t in (norm.loc, norm.scale, norm._count))


def test_evaluation_uses_the_training_statistics_frozen(tmp_path: Path) -> None:
    cfg = compose_config([*PENDULUM, "total_frames=256"], tmp_path / "run")
    run_ = build_trainer(cfg)
    try:
        train_norm, eval_norm, eval_env = _norms(run_)
        assert train_norm is not None and eval_norm is not None
        run_.trainer.train()
        assert eval_norm.frozen and not train_norm.frozen
        trained = _stats(train_norm)
        # every collected frame and the first reset of the 2 envs (a Pendulum episode is 200
        # steps: none ends in 128 per env) updated the training statistics, nothing else did
        assert int(trained[2]) == 256 + 2
        torch.testing.assert_close(_stats(eval_norm), trained)
        eval_env.rollout(10, break_when_any_done=False)  # evaluating changes no statistics
        torch.testing.assert_close(_stats(eval_norm), trained)
        torch.testing.assert_close(_stats(train_norm), trained)
    finally:
        run_.close()

    # A resume: the restored training statistics, before the first new batch
    cfg = compose_config([*PENDULUM, "total_frames=384"], tmp_path / "run")
    resumed = build_trainer(cfg)
    try:
        train_norm, eval_norm, _ = _norms(resumed)
        assert resumed.resumed_from is not None
        assert eval_norm.frozen
        restored = _stats(train_norm)
        assert int(restored[2]) == 256 + 2
        torch.testing.assert_close(_stats(eval_norm), restored)
    finally:
        resumed.close()


def test_without_normalization_the_envs_have_no_statistics(tmp_path: Path) -> None:
    cfg = compose_config([*PENDULUM[:1], "total_frames=128"], tmp_path / "run")
    run_ = build_trainer(cfg)
    try:
        assert _norms(run_)[:2] == (None, None)
    finally:
        run_.close()
