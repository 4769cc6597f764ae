"""Action distributions of xdrl's actors that TorchRL does not ship as such."""

from __future__ import annotations

import torch
from torchrl.modules import IndependentNormal


class ClippedModeNormal(IndependentNormal):
    """A diagonal Gaussian (TorchRL's ``IndependentNormal``, no location squashing) whose
    deterministic action is its mean clipped to ``[low, high]``; samples, log-densities and
    entropies are the unbounded Gaussian's.

    Why: SB3's and CleanRL's MuJoCo PPO sample an unbounded Gaussian, score that sample in the
    loss, and clip only the copy sent to the env; their deterministic action is the clipped mean
    (SB3's ``predict``). Evaluation, ``xdrl.load_policy`` and the exported files run the actor
    under ``ExplorationType.DETERMINISTIC`` and so return an action inside the bounds.

    Args:
        loc: the means.
        scale: the standard deviations.
        low: lower action bounds (broadcast against ``loc``).
        high: upper action bounds.

    Example:
        >>> one = torch.ones(1)
        >>> ClippedModeNormal(torch.tensor([2.0]), one, -one, one).deterministic_sample
        tensor([1.])
    """

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        low: torch.Tensor,
        high: torch.Tensor,
        **kwargs,
    ) -> None:
        self.low = low
        self.high = high
        super().__init__(loc, scale, tanh_loc=False, **kwargs)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return torch.clamp(self.mean, self.low, self.high)
