"""Partial observability as a config choice: ``env.mask_observations`` zeroes observation
entries (CartPole's velocities ``[1, 3]``, Pendulum's angular velocity ``[2]``), so a
feed-forward policy cannot see them and a recurrent one has to infer them.

Built on gymnasium's ``TransformObservation`` wrapper, applied to each gymnasium env right after
``gymnasium.make`` (before TorchRL wraps it), so every batching mode, the lean collector and
the checkpointed env state see the masked observations.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from xdrl.config.errors import ConfigError

KEY = "env.mask_observations"


def check_mask(indices: Sequence[int], shape: Sequence[int], env_id: str) -> list[int]:
    """The sorted distinct indices of ``indices``; one line naming the observation size when an
    index is out of range or the observations are not a vector."""
    if len(shape) != 1:
        raise ConfigError(
            KEY, f"{env_id} observes {list(shape)}, not a vector; masking is for vector "
            "observations: set env.mask_observations=null",
        )  # fmt: skip
    size = int(shape[0])
    bad = [int(i) for i in indices if not 0 <= int(i) < size]
    if bad:
        raise ConfigError(
            KEY, f"index {bad[0]} is out of range: {env_id} has {size} observation entries; "
            f"use indices 0 to {size - 1}",
        )  # fmt: skip
    return sorted({int(i) for i in indices})


def _zero(observation: np.ndarray, indices: tuple[int, ...]) -> np.ndarray:
    """A copy of ``observation`` with ``indices`` set to zero."""
    masked = np.array(observation, copy=True)
    masked[..., list(indices)] = 0
    return masked


def masked_indices(env: Any) -> tuple[int, ...] | None:
    """The entries a :func:`mask_observations` wrapper ``env`` zeroes, None when ``env`` is not
    one: how :mod:`xdrl.policy` finds the mask to put inside the policy, so a loaded or exported
    policy takes the observation the wrapped env returns."""
    func = getattr(env, "func", None)
    if isinstance(func, functools.partial) and func.func is _zero:
        return tuple(int(i) for i in func.keywords["indices"])
    return None


def mask_observations(env: Any, indices: Sequence[int]) -> Any:
    """``env`` with the observation entries ``indices`` always zero (their bounds too).

    Example:
        >>> env = mask_observations(gymnasium.make("CartPole-v1"), [1, 3])
        >>> env.reset(seed=0)[0][[1, 3]]
        array([0., 0.], dtype=float32)
    """
    from gymnasium.spaces import Box
    from gymnasium.wrappers import TransformObservation

    space = env.observation_space
    chosen = tuple(check_mask(indices, space.shape, env.spec.id if env.spec else "this env"))
    low, high = space.low.copy(), space.high.copy()
    low[list(chosen)] = 0
    high[list(chosen)] = 0
    masked_space = Box(low=low, high=high, dtype=space.dtype)
    return TransformObservation(env, functools.partial(_zero, indices=chosen), masked_space)
