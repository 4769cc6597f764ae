"""The optimization step xdrl runs inside TorchRL's Trainer."""

from __future__ import annotations

from tensordict import TensorDictBase
from torchrl.trainers import DefaultOptimizationStepper, Trainer


class DetachedOptimizationStepper(DefaultOptimizationStepper):
    """TorchRL's default step (sum ``loss_*``, backward, clip, step), with detached outputs.

    ``DefaultOptimizationStepper`` returns the losses with their autograd graph attached; the
    Trainer then keeps every minibatch's graph alive while it averages them. Detaching here frees
    the graph at once. It also replaces the deprecated ``Trainer(optimizer=...)`` hook path.

    Args:
        loss_components: loss entries to sum for the backward pass (None: every ``loss_*``).

    Example:
        >>> Trainer(..., optimizer=adam, optimization_stepper=DetachedOptimizationStepper())
    """

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        """One optimizer step on ``sub_batch``; returns the detached loss entries."""
        return super().step(trainer, sub_batch).detach()
