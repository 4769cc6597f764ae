"""Module paths that moved, so configs and checkpoints written before the move still load.

A saved config names its env factory, builder, logger and settings classes by ``_target_``; a
checkpoint's env state pickles xdrl's Atari wrappers (and the function that rebuilds an Atari env)
by module path. Both are read through this one table: :func:`renamed_config` maps the
``_target_`` strings of a saved config, :func:`loads` unpickles with the classes' new paths. No
module is kept at its old path. Torch-free.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from typing import Any

# old module path -> new module path (the package layout of issue 34)
RENAMES: dict[str, str] = {
    "xdrl.settings": "xdrl.config.settings",
    "xdrl.config_types": "xdrl.config.types",
    "xdrl.config_check": "xdrl.config.check",
    "xdrl.resume_check": "xdrl.config.resume",
    "xdrl.errors": "xdrl.config.errors",
    "xdrl.nested": "xdrl.config.nested",
    "xdrl.envs": "xdrl.envs.factory",
    "xdrl.vector_env": "xdrl.envs.vector_env",
    "xdrl.atari": "xdrl.envs.atari",
    "xdrl.atari_wrappers": "xdrl.envs.atari_wrappers",
    "xdrl.observation_encoding": "xdrl.envs.observation_encoding",
    "xdrl.env_state": "xdrl.training.env_state",
    "xdrl.collector": "xdrl.lean.collector",
    "xdrl.trainer": "xdrl.lean.trainer",
    "xdrl.policy_types": "xdrl.lean.policy_types",
    "xdrl.algorithms.categorical_actor": "xdrl.lean.categorical_actor",
    "xdrl.algorithms.dqn_loss": "xdrl.lean.dqn_loss",
    "xdrl.algorithms.egreedy": "xdrl.lean.egreedy",
    "xdrl.algorithms.ensemble": "xdrl.lean.ensemble",
    "xdrl.algorithms.frame_replay": "xdrl.lean.frame_replay",
    "xdrl.algorithms.fused_adam": "xdrl.lean.fused_adam",
    "xdrl.algorithms.gae": "xdrl.lean.gae",
    "xdrl.algorithms.mlp_forward": "xdrl.lean.mlp_forward",
    "xdrl.algorithms.ppo_loss": "xdrl.lean.ppo_loss",
    "xdrl.algorithms.q_policy": "xdrl.lean.q_policy",
    "xdrl.algorithms.replay": "xdrl.lean.replay",
    "xdrl.algorithms.sac_loss": "xdrl.lean.sac_loss",
    "xdrl.algorithms.tanh_normal_actor": "xdrl.lean.tanh_normal_actor",
    "xdrl.algorithms.td3_actor": "xdrl.lean.td3_actor",
    "xdrl.algorithms.td3_loss": "xdrl.lean.td3_loss",
    "xdrl.build": "xdrl.training.build",
    "xdrl.checkpointing": "xdrl.training.checkpointing",
    "xdrl.loggers": "xdrl.training.loggers",
    "xdrl.precision": "xdrl.training.precision",
    "xdrl.speedups": "xdrl.training.speedups",
    "xdrl.evaluation_history": "xdrl.trainer_hooks.evaluation_history",
    "xdrl.process": "xdrl.run.process",
    "xdrl.threads": "xdrl.run.threads",
    "xdrl.run_lock": "xdrl.run.lock",
    "xdrl.job_record": "xdrl.run.job_record",
    "xdrl.segments": "xdrl.run.segments",
    "xdrl.run": "xdrl.run.lifecycle",
    "xdrl.files": "xdrl.run.layout",
    "xdrl.sweep": "xdrl.sweep.summary",
    "xdrl.sweep_stop": "xdrl.sweep.stop",
}


def renamed_module(module: str) -> str:
    """``module``'s path today (itself when it never moved)."""
    return RENAMES.get(module, module)


def renamed_target(target: str) -> str:
    """A ``_target_`` (``module.attribute``) with its module's path today."""
    module, dot, name = target.rpartition(".")
    return f"{renamed_module(module)}{dot}{name}" if dot and module in RENAMES else target


def renamed_config(config: Any) -> Any:
    """``config`` (nested dicts and lists, as read from a saved YAML file) with every
    ``_target_`` renamed; a new object, ``config`` itself is left as it was."""
    if isinstance(config, Mapping):
        return {
            key: renamed_target(value)
            if key == "_target_" and isinstance(value, str)
            else renamed_config(value)
            for key, value in config.items()
        }
    if isinstance(config, list):
        return [renamed_config(item) for item in config]
    return config


class _RenamingUnpickler(pickle.Unpickler):
    """Finds classes and functions pickled under a module path that moved at their new path."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(renamed_module(module), name)


def loads(data: bytes) -> Any:
    """``pickle.loads`` with moved module paths found at their new place."""
    return _RenamingUnpickler(io.BytesIO(data)).load()
