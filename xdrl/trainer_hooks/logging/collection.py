"""Collection metrics: per-step rewards, episode returns and lengths of a collected batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from torchrl.trainers.trainers import Trainer

from ..base import XdrlHook
from ._common import (
    COLLECTION_PREFIX,
    DEFAULT_DONE_KEY,
    DEFAULT_EPISODE_REWARD_KEY,
    DEFAULT_REWARD_KEY,
    EPISODE_LEN_NAME,
    EPISODE_REWARD_NAME,
    REWARD_SUBKEY,
    STEP_COUNT_KEY,
    STEP_REWARD_NAME,
    _collector_mask,
    _flatten_steps,
    _prepare_episode_reward,
    _reward_metrics,
)


class LoggingCollectionMetricsHook(XdrlHook):
    """Log collection metrics in the ``collection/`` namespace.

    The hook reads reward, done and episode-reward tensors of a collected batch once, with
    a few tensor reductions, and returns Python floats. Steps hidden by the collector mask
    (``("collector", "mask")``) never count. Keys, with ``<g>`` the group:

    - ``collection/<g>/reward/reward_{min,mean,max}``: per-step reward.
    - ``collection/<g>/reward/episode_reward_{min,mean,max}``: returns of the episodes that
      ended in this batch (absent when none ended).
    - ``collection/<g>/episode_len_mean``: ``("next", "step_count")`` at the end of those
      episodes (needs TorchRL's ``StepCounter``).
    - ``collection/<g>/reward/objective_<i>/...``: each objective of a vector reward.

    A vector reward (last dim k > 1) is scalarized with ``episode_reward_weights`` for the
    main keys and also logged per objective; without weights only the per-objective keys
    are logged. A reward whose last dim is 1 is already scalar.

    Args:
        group: metric group, the ``<g>`` of the keys.
        reward_key: per-step reward; None means ``("next", "reward")``.
        done_key: end-of-episode flag.
        episode_reward_key: cumulative episode reward (TorchRL ``RewardSum``); None means
            ``("next", "episode_reward")`` when the batch has it.
        episode_reward_weights: scalarization weights of a vector reward (one per objective).
        reduce_stats: False logs only the ``_mean`` of each metric; None/True min, mean, max.

    Example:
        >>> hook = LoggingCollectionMetricsHook(group="agents")
        >>> hook.register(trainer)  # pre_steps_log, name "logging_collection_metrics"
        >>> hook(batch)["collection/agents/reward/reward_mean"]
        1.0
    """

    hook_point = "pre_steps_log"

    def __init__(
        self,
        group: str = "agents",
        reward_key: tuple[str, ...] | None = None,
        done_key: tuple[str, ...] = DEFAULT_DONE_KEY,
        episode_reward_key: tuple[str, ...] | None = None,
        episode_reward_weights: Sequence[float] | None = None,
        reduce_stats: bool | None = None,
    ) -> None:
        self.group = group
        self.reward_key = reward_key
        self.done_key = done_key
        self.episode_reward_key = episode_reward_key
        self.episode_reward_weights = (
            None
            if episode_reward_weights is None
            else tuple(float(w) for w in episode_reward_weights)
        )
        self.reduce_stats = reduce_stats
        self._base = f"{COLLECTION_PREFIX}/{group}"

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        mask = _collector_mask(batch)
        out: dict[str, float] = {}
        reward = _flatten_steps(batch, self.reward_key or DEFAULT_REWARD_KEY, mask)
        if reward is not None:
            out.update(self._rewards(STEP_REWARD_NAME, reward))
        done = _flatten_steps(batch, self.done_key, mask)
        if done is None:
            return out
        done = done.reshape(done.shape[0], -1).any(-1)
        if not bool(done.any()):
            return out
        episode_reward = _flatten_steps(
            batch, self.episode_reward_key or DEFAULT_EPISODE_REWARD_KEY, mask
        )
        if episode_reward is not None:
            returns = _prepare_episode_reward(episode_reward, done, weights=None)
            out.update(self._rewards(EPISODE_REWARD_NAME, returns))
        step_count = _flatten_steps(batch, STEP_COUNT_KEY, mask)
        if step_count is not None:
            lengths = step_count.reshape(step_count.shape[0], -1)[done, 0]
            out[f"{self._base}/{EPISODE_LEN_NAME}"] = float(lengths.double().mean().item())
        return out

    def _rewards(self, name: str, value: torch.Tensor) -> dict[str, float]:
        return _reward_metrics(
            f"{self._base}/{REWARD_SUBKEY}",
            name,
            value,
            weights=self.episode_reward_weights,
            reduce_stats=self.reduce_stats,
        )

    def register(self, trainer: Trainer, name: str = "logging_collection_metrics") -> None:
        super().register(trainer, name)
