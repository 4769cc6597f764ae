"""The deterministic policy as one tensor-in, tensor-out ``nn.Module``: raw env observation in,
env action out, everything between inside (float32 cast, frozen normalization statistics, the
network, and the action mapping the TorchRL actor applies: argmax for discrete actions, the
tanh-normal's deterministic sample scaled to the action bounds for continuous ones).

The TorchRL actor itself runs inside (a ``TensorDict`` built in ``forward`` under
``ExplorationType.DETERMINISTIC``): ``torch.export`` traces through it, so the exported graph is
the policy that was evaluated, not a re-implementation of it. The normalization statistics are
copied out of ``VecNormV2`` as constant buffers: computing them from its running sums in the graph
emits ``aten._foreach_mul``, which torch 2.13's ONNX exporter cannot translate (measured).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class DeterministicPolicy(nn.Module):
    """``forward(observation) -> action`` of a TorchRL policy, with frozen observation statistics.

    Args:
        actor: the TorchRL evaluation policy (reads ``observation``, writes ``action``).
        loc: observation mean subtracted first (None: no normalization).
        scale: observation scale divided by after ``loc``.

    Example:
        >>> module = DeterministicPolicy(loaded.module, loc, scale)
        >>> module(torch.zeros(8, 4)).shape
        torch.Size([8])
    """

    def __init__(
        self, actor: Any, loc: torch.Tensor | None = None, scale: torch.Tensor | None = None
    ) -> None:
        super().__init__()
        self.actor = actor
        self.normalized = loc is not None
        if loc is not None and scale is not None:
            self.register_buffer("loc", loc.detach().clone().to(torch.float32))
            self.register_buffer("scale", scale.detach().clone().to(torch.float32))

    def normalize(self, observation: torch.Tensor) -> torch.Tensor:
        """Raw observations as the actor saw them in training."""
        observation = observation.to(torch.float32)
        if not self.normalized:
            return observation
        loc, scale = self.get_buffer("loc"), self.get_buffer("scale")
        return (observation - loc) / scale

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        data = TensorDict(
            {"observation": self.normalize(observation)}, batch_size=observation.shape[:1]
        )
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            return self.actor(data).get("action")
