"""What the collector needs to know of a policy, without importing ``algorithms/`` (a leaf: torch
only). Arrows point down: the collector and the algorithms both import this; neither imports the
other.
"""

from __future__ import annotations

import torch


class TensorSampler:
    """A policy that also acts on plain tensors, skipping the TensorDict plumbing: the fast path
    of :class:`~xdrl.collector.VectorCollector`. Implemented by
    :class:`~xdrl.algorithms.categorical_actor.CategoricalActor`.

    Example:
        >>> action, log_prob, logits = policy.sample(observations)  # [n, obs_dim] -> [n], ...
    """

    def sample(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled actions for a batch of observations: ``(action, log_prob, logits)``."""
        raise NotImplementedError

    def mode(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The most likely actions: ``(action, log_prob, logits)``."""
        raise NotImplementedError
