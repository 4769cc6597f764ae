"""What the collector needs to know of a policy, without importing ``algorithms/`` (a leaf: torch
only). Arrows point down: the collector and the algorithms both import this; neither imports the
other.
"""

from __future__ import annotations

from typing import Any

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


def loc_scale_parts(actor: Any) -> tuple[Any, Any] | None:
    """``(net, dist)`` of a ``ProbabilisticActor`` built as xdrl's Gaussian-family actors are:
    one ``TensorDictModule`` from ``observation`` to ``(loc, scale)`` whose module is an
    ``nn.Sequential`` of an MLP and a scale layer, then the distribution module; else None.
    The lean heads check the scale layer and the distribution class themselves. TensorDict and
    TorchRL are imported on call, so this module stays a torch-only leaf at import."""
    from tensordict.nn import TensorDictModule
    from torch import nn
    from torchrl.modules import ProbabilisticActor

    if not isinstance(actor, ProbabilisticActor) or len(actor.module) != 2:
        return None
    head, dist = actor.module
    if (
        not isinstance(head, TensorDictModule)
        or list(head.in_keys) != ["observation"]
        or list(head.out_keys) != ["loc", "scale"]
        or not isinstance(head.module, nn.Sequential)
        or len(head.module) != 2
        or list(actor.in_keys) != ["observation"]
    ):
        return None
    return head.module, dist
