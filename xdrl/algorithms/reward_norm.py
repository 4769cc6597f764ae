"""Reward normalization by the running spread of the discounted return:
``algorithm.build.normalize_rewards``.

What RL-Zoo's ``normalize: true`` does to rewards (SB3's ``VecNormalize(norm_reward=True)``,
with the algorithm's gamma): every env keeps its discounted return ``R = gamma * R + r``
(zeroed after an episode ends), a running variance of ``R`` is updated with each step's
returns, and the reward the learner sees is ``r / sqrt(var + 1e-8)``, clipped to +-10. The
mean is not subtracted: a constant reward (CartPole's 1 per step) stays positive.

Why not TorchRL's ``VecNormV2`` on the reward key: it standardizes the reward itself,
``(r - mean) / std``, which maps CartPole's constant reward to 0 (nothing to learn);
``RewardScaling`` is a fixed affine map. Why a batch hook rather than an env transform: the
normalized copy goes to a training key only (as ``reward_scale``'s), so logged and evaluated
rewards stay in the env's units, and its state (the statistics and every env's return) is saved
with the checkpoints like any other module, so a resumed run continues with it.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

TRAIN_REWARD_KEY = "train_reward"


class ReturnNormalization:
    """Write ``("next", "train_reward") = scale * clip(reward / std(return), +-clip)`` on each
    batch (a ``batch_process`` hook), stepping through time as SB3's ``VecNormalize`` does:
    the returns of step ``t`` update the running variance (a parallel Welford update, float64,
    SB3's ``RunningMeanStd`` start of mean 0, var 1, count 1e-4) before step ``t``'s rewards are
    divided by it.

    Args:
        gamma: the discount of the returns (the algorithm's).
        scale: multiplies the normalized reward (``reward_scale``; 1 leaves it).
        clip: bound of the normalized reward.
        eps: added to the variance.

    Example:
        >>> norm = ReturnNormalization(gamma=0.98)
        >>> batch = norm(batch)  # batch [envs, steps] -> ("next", "train_reward")
    """

    def __init__(
        self, gamma: float, scale: float = 1.0, clip: float = 10.0, eps: float = 1e-8
    ) -> None:
        self.gamma = gamma
        self.scale = scale
        self.clip = clip
        self.eps = eps
        self.mean = torch.zeros((), dtype=torch.float64)
        self.var = torch.ones((), dtype=torch.float64)
        self.count = torch.full((), 1e-4, dtype=torch.float64)
        self.returns: torch.Tensor | None = None

    def _update(self, returns: torch.Tensor) -> None:
        """Merge one step's returns (one per env) into the running mean and variance."""
        n = returns.numel()
        mean, var = returns.mean(), returns.var(unbiased=False)
        delta = mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total
        self.mean = self.mean + delta * n / total
        self.var = m2 / total
        self.count = total

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        reward = batch.get(("next", "reward"))
        done = batch.get(("next", "done"))
        steps = reward.shape[-2]
        rows = reward.reshape(-1, steps).double()  # [envs, steps]: time along the last dim
        ends = done.reshape(-1, steps)
        if self.returns is None or self.returns.shape != rows.shape[:1]:
            self.returns = torch.zeros(rows.shape[0], dtype=torch.float64)
        out = torch.empty_like(rows)
        for t in range(steps):
            self.returns = self.returns * self.gamma + rows[:, t]
            self._update(self.returns)
            out[:, t] = rows[:, t] / torch.sqrt(self.var + self.eps)
            self.returns = self.returns.masked_fill(ends[:, t], 0.0)
        normalized = out.clamp(-self.clip, self.clip) * self.scale
        batch.set(("next", TRAIN_REWARD_KEY), normalized.to(reward.dtype).reshape(reward.shape))
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "var": self.var,
            "count": self.count,
            "returns": self.returns if self.returns is not None else torch.zeros(0),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.mean = torch.as_tensor(state_dict["mean"], dtype=torch.float64).clone()
        self.var = torch.as_tensor(state_dict["var"], dtype=torch.float64).clone()
        self.count = torch.as_tensor(state_dict["count"], dtype=torch.float64).clone()
        returns = torch.as_tensor(state_dict["returns"], dtype=torch.float64).clone()
        self.returns = returns if returns.numel() else None
