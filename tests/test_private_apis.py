"""A tripwire: every private TorchRL, tensordict, W&B, OmegaConf and CPython name xdrl relies on
still exists.

xdrl reaches past the public APIs in a few measured places (each module says why). An upgrade
that renames one of these names would otherwise make a lean path fall back silently (only speed
drops) or fail deep inside a run; here it turns into a red test naming the xdrl module to fix.
"""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch

# (module, dotted attribute, the xdrl module relying on it)
ATTRIBUTES = [
    # XdrlTrainer.optim_steps replays Trainer.optim_steps through its private hook runners
    *(
        ("torchrl.trainers", f"Trainer.{name}", "xdrl/lean/trainer.py")
        for name in (
            "_pre_optim_hook",
            "_pre_epoch_log_hook",
            "_pre_epoch_hook",
            "_process_optim_batch_hook",
            "_post_optim_hook",
            "_post_optim_log",
            "_post_epoch_log_hook",
            "_post_epoch_hook",
            "_post_optim_complete_log_hook",
        )
    ),
    (
        "torchrl.trainers",
        "DefaultOptimizationStepper._compute_and_clip_grad_norm",
        "algorithms/stepper.py",
    ),
    ("torchrl.objectives", "ClipPPOLoss._clip_bounds", "xdrl/lean/ppo_loss.py"),
    ("tensordict", "TensorDict._new_unsafe", "xdrl/envs/vector_env.py"),
    ("torchrl.envs.libs.gym", "_gym_to_torchrl_spec_transform", "xdrl/envs/vector_env.py"),
    ("torchrl.envs", "EnvBase._step", "xdrl/envs/vector_env.py"),
    ("torchrl.envs", "EnvBase._reset", "xdrl/envs/vector_env.py"),
    ("torchrl.envs", "EnvBase._set_seed", "xdrl/envs/vector_env.py"),
    ("torchrl.checkpoint", "Checkpoint._local_path", "xdrl/training/checkpointing.py"),
    ("torchrl.checkpoint", "Checkpoint._resolve_adapter", "xdrl/training/checkpointing.py"),
    ("torch", "_foreach_lerp_", "xdrl/algorithms/off_policy.py (LeanSoftUpdate)"),
    ("torch", "_foreach_copy_", "xdrl/algorithms/off_policy.py (LeanHardUpdate)"),
    ("torchrl.modules", "AdditiveGaussianModule._add_noise", "xdrl/lean/td3_actor.py"),
    ("torchrl.data", "LazyTensorStorage._rand_given_ndim", "xdrl/lean/replay.py"),
    ("torchrl.objectives", "SACLoss._alpha", "xdrl/lean/sac_loss.py"),
    ("torchrl.record.loggers.wandb", "WandbLogger._create_experiment", "xdrl/training/loggers.py"),
    *(
        ("torchrl.record.loggers", f"CSVLogger.{name}", "xdrl/training/loggers.py")
        for name in ("_checkpoint_state", "_load_checkpoint_state")
    ),
    ("omegaconf", "DictConfig._get_node", "xdrl/config/check.py"),
    ("hydra._internal.utils", "get_args_parser", "xdrl/cli.py (_hydra_flags)"),
    ("atexit", "_run_exitfuncs", "xdrl/cli.py (exit_without_teardown)"),
    ("threading", "_shutdown", "xdrl/cli.py (exit_without_teardown)"),
    ("torchrl.envs.batched_envs", "BatchedEnvBase", "xdrl/training/env_state.py"),
    *(
        ("torch", name, "xdrl/lean/fused_adam.py")
        for name in ("_fused_adam_", "_fused_adamw_", "_foreach_add_")
    ),
    *(
        ("torch.optim.optimizer", name, "xdrl/lean/fused_adam.py")
        for name in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")
    ),
]

# Attributes only an instance holds, found in the source of the class that sets them.
SET_IN_SOURCE = [
    ("torchrl.trainers", "Trainer", "self._log_dict", "xdrl/trainer_hooks/logging/progress.py"),
    ("torchrl.trainers", "Trainer", "self._stop_training", "trainer_hooks/logging/evaluation.py"),
    ("torchrl.trainers", "Trainer", "_optim_count", "xdrl/lean/trainer.py"),
    (
        "torchrl.record.loggers.wandb",
        "WandbLogger",
        "self._wandb_kwargs",
        "xdrl/training/loggers.py",
    ),
    ("torchrl.record.loggers.csv", "CSVExperiment", "self.files", "xdrl/training/loggers.py"),
    ("torchrl.record.loggers.wandb", "WandbLogger", "self._step_registry", "wandb_hooks.py"),
    ("wandb.sdk.wandb_run", "Run", "self._local_step", "wandb_hooks.py"),
    ("torchrl.envs", "SerialEnv", "self._envs", "render.py, xdrl/training/env_state.py"),
    ("torchrl.envs.libs.gym", "GymWrapper", "self._env", "render.py, xdrl/training/env_state.py"),
    ("torchrl.collectors", "Collector", "self._carrier", "xdrl/training/env_state.py"),
    *(
        ("torchrl.objectives.utils", "TargetNetUpdater", f"self.{name}", "off_policy.py")
        for name in ("_sources", "_targets")
    ),
    *(
        ("torchrl.objectives", "SACLoss", f"self.{name}", "xdrl/lean/sac_loss.py")
        for name in ("_version", "min_log_alpha", "max_log_alpha", "skip_done_states")
    ),
    ("torchrl.objectives.common", "LossModule", "self._value_estimator", "sac/td3/dqn_loss.py"),
    *(
        ("torch.optim", "Optimizer", f"self.{name}", "xdrl/lean/fused_adam.py")
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
    ),
]


def _resolve(module: str, dotted: str):
    obj = importlib.import_module(module)
    for part in dotted.split("."):
        obj = inspect.getattr_static(obj, part)
    return obj


@pytest.mark.parametrize(("module", "dotted", "user"), ATTRIBUTES, ids=lambda v: str(v))
def test_private_attribute_exists(module: str, dotted: str, user: str) -> None:
    try:
        _resolve(module, dotted)
    except AttributeError:
        pytest.fail(f"{module}.{dotted} is gone: {user} relies on it")


@pytest.mark.parametrize(("module", "cls", "text", "user"), SET_IN_SOURCE, ids=lambda v: str(v))
def test_private_instance_attribute_is_still_set(module: str, cls: str, text: str, user: str):
    if module.startswith("wandb"):
        pytest.importorskip("wandb")
    source = inspect.getsource(getattr(importlib.import_module(module), cls))
    assert text in source, f"{module}.{cls} no longer sets {text}: {user} relies on it"


def test_a_built_trainer_and_ppo_loss_hold_the_private_state_xdrl_reads(make_cfg) -> None:
    from xdrl.training.build import build_trainer

    cfg = make_cfg("total_frames=64", "frames_per_batch=64", "env.num_envs=2", "eval=none")
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        assert isinstance(trainer._optim_count, int)  # XdrlTrainer counts optimizer steps on it
        assert isinstance(trainer._log_dict, dict)  # ProgressLineHook's last reward
        loss = trainer.loss_module
        for name in ("_entropy_coeff_map", "_has_critic", "_asymmetric_clip"):  # ppo_loss.py
            assert hasattr(loss, name), f"ClipPPOLoss.{name} is gone: ppo_loss.py reads it"
        (low, high) = loss._clip_bounds
        assert float(low) < 0 < float(high)  # log-ratio bounds, as ppo_loss.py expects
    finally:
        run.close()


def test_tensors_have_a_version_counter() -> None:
    tensor = torch.zeros(2)
    before = tensor._version  # ppo_loss.py caches on it
    tensor.add_(1)
    assert tensor._version > before


def test_a_replay_buffer_holds_the_private_state_replay_py_reads() -> None:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage

    from xdrl.lean.replay import LeanReplayBuffer

    buffer = LeanReplayBuffer(storage=LazyTensorStorage(8))
    buffer.extend(TensorDict({"x": torch.arange(4.0)}, batch_size=[4]))
    for name in ("_storage", "_sampler", "_writer", "_transform", "_prefetch_cap", "_pin_memory",
                 "_sample_unit", "_replay_lock", "_write_lock", "_batch_size"):  # fmt: skip
        assert hasattr(buffer, name), f"ReplayBuffer.{name} is gone: replay.py reads it"
    assert isinstance(buffer._storage._storage, TensorDict)  # LazyTensorStorage's data
    assert buffer._lean()  # every condition of the direct gather still reads
