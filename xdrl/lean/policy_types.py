"""What the collector needs to know of a policy, without importing ``algorithms/`` (a leaf: torch
only). Arrows point down: the collector and the algorithms both import this; neither imports the
other.
"""

from __future__ import annotations

import torch


class TensorSampler:
    """A policy that also acts on plain tensors, skipping the TensorDict plumbing: the fast path
    of :class:`~xdrl.lean.collector.VectorCollector`. Implemented by
    :class:`~xdrl.lean.categorical_actor.CategoricalActor` (PPO, A2C),
    :class:`~xdrl.lean.tanh_normal_actor.TanhNormalActor` (SAC) and
    :class:`~xdrl.lean.td3_actor.NoisyTanhActor` (TD3).

    Example:
        >>> outputs = policy.act(observations, explore=True)  # {"action": ..., ...}
    """

    def act(self, observation: torch.Tensor, explore: bool) -> dict[str, torch.Tensor] | None:
        """What the TensorDict forward writes for a batch of observations, key by key (the same
        values for the same torch RNG state), under random (``explore``) or deterministic
        exploration; None where this policy has no tensor path for that mode (the collector then
        runs the TensorDict forward)."""
        raise NotImplementedError
