"""Continuous actions clipped to the action space's bounds before the env steps."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np


class ClipActionToBounds(gymnasium.ActionWrapper):
    """gymnasium's ``ClipAction`` that keeps the env's finite ``Box`` action space.

    Why: a Gaussian policy (``algorithm.build.distribution=normal``) samples unbounded actions;
    the loss must score the sample it drew while the env receives it clipped (SB3's
    ``collect_rollouts`` clips the copy it steps with). Clipping here, below TorchRL's wrapper,
    leaves the batch's stored ``action`` as sampled, for every batching and collector. MuJoCo
    clamps controls itself but charges its control cost on the unclipped action. gymnasium's
    ``ClipAction`` widens the space to ``(-inf, inf)``, which the specs (and the tanh actors,
    scaled to the bounds) cannot use. An action inside the bounds passes unchanged, so the
    tanh-squashed actors step exactly as before.

    Args:
        env: a gymnasium env with a ``Box`` action space of finite bounds.

    Example:
        >>> env = ClipActionToBounds(gymnasium.make("Pendulum-v1"))
        >>> env.action(np.array([5.0], dtype=np.float32))
        array([2.], dtype=float32)
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        space = env.action_space
        assert isinstance(space, gymnasium.spaces.Box), "see clip_box_actions"
        self._low = space.low
        self._high = space.high

    def action(self, action: Any) -> np.ndarray:
        return np.clip(action, self._low, self._high)


def clip_box_actions(env: gymnasium.Env) -> gymnasium.Env:
    """``env`` in :class:`ClipActionToBounds` when its actions are a ``Box``; else ``env``."""
    if isinstance(env.action_space, gymnasium.spaces.Box):
        return ClipActionToBounds(env)
    return env
