"""build_trainer wires the composed config into a TorchRL Trainer the way the issue asks."""

from __future__ import annotations

import pytest

from xdrl.algorithms.on_policy import StackedValueGAE
from xdrl.algorithms.stepper import DetachedOptimizationStepper
from xdrl.config.errors import ConfigError
from xdrl.trainer_hooks.logging import LoggingHookSet
from xdrl.training.build import build_trainer


def _ops(trainer, stage: str) -> list:
    return [op for op, _ in getattr(trainer, f"_{stage}_ops")]


def test_ppo_trainer_wiring(make_cfg) -> None:
    cfg = make_cfg("frames_per_batch=256", "env.num_envs=4", "algorithm.build.minibatch_size=64")
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        assert trainer._log_interval == 0 and trainer.auto_log_optim_steps is False
        assert isinstance(trainer.optimization_stepper, DetachedOptimizationStepper)
        assert trainer.optim_steps_per_batch == 256 // 64  # no empty epoch
        assert trainer.num_epochs == cfg.algorithm.build.epochs
        assert trainer.collector.requested_frames_per_batch == 256
        # register_op wraps hooks in functions named after them
        names = [getattr(op, "__name__", "") for op in _ops(trainer, "batch_process")]
        assert names.index(StackedValueGAE.__name__) < names.index("extend")  # GAE first
        assert isinstance(trainer._modules["logging_hooks"], LoggingHookSet)
        assert trainer.checkpoint is not None and trainer.checkpoint_rotation is not None
        assert run.hook_set.eval_hook_set is not None
    finally:
        run.close()


def test_eval_none_and_logging_none_build_without_them(make_cfg) -> None:
    run = build_trainer(make_cfg("eval=none", "logging=none", "checkpoint=none"))
    try:
        assert run.logger is None and run.hook_set.eval_hook_set is None
        assert run.trainer.checkpoint is None
    finally:
        run.close()


def test_the_same_seed_builds_the_same_networks(make_cfg) -> None:
    weights = []
    for _ in range(2):
        run = build_trainer(make_cfg("seed=7", "logging=none", "eval=none", "checkpoint=none"))
        weights.append([p.detach().clone() for p in run.trainer.loss_module.parameters()])
        run.close()
    assert all((a == b).all() for a, b in zip(*weights, strict=True))


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("total_frames=-1", "total_frames"),
        ("num_threads=0", "num_threads"),
        ("num_threads=banana", "num_threads"),
        ("checkpoint.keep_last=0", "checkpoint.keep_last"),
        ("algorithm.lr_schedule=cosine", "algorithm.lr_schedule"),
        ("env.num_envs=0", "env.num_envs"),
    ],
)
def test_bad_values_raise_a_config_error_naming_the_key(make_cfg, override: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_trainer(make_cfg(override, "logging=none"))
    assert str(err.value).startswith(key)


def test_torchrl_collector_counts_the_warm_up_in_agent_steps(make_cfg) -> None:
    """On TorchRL's Collector path (Atari with serial batching) the warm-up and budget reach
    the collector in agent steps: frames / frame_skip, as the Trainer counts frames."""
    from torchrl.collectors import Collector

    cfg = make_cfg(
        "experiment=atari_dqn",
        "env.batching=serial",
        "env.num_envs=2",
        "frames_per_batch=8",
        "total_frames=400",
        "algorithm.build.init_random_frames=100",
        "algorithm.build.buffer_size=all",
        "logging=none",
        "eval=none",
        "checkpoint=none",
    )
    run = build_trainer(cfg)
    try:
        collector = run.trainer.collector
        assert type(collector) is Collector
        assert cfg.env.frame_skip == 4
        assert collector.init_random_frames == 25  # 100 frames / 4 frames per agent step
        assert collector.total_frames == 104  # 416 frames (13 batches of 32) / 4
        storage = run.trainer._modules["replay_buffer"].replay_buffer.storage
        assert storage.max_size == 104  # buffer_size: all = one transition per agent step
    finally:
        run.close()
