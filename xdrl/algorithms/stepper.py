"""The optimization step xdrl runs inside TorchRL's Trainer (algorithm plumbing: TD3's delayed
actor stepper builds on it)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import optim
from torchrl.trainers import DefaultOptimizationStepper, Trainer


class DetachedOptimizationStepper(DefaultOptimizationStepper):
    """TorchRL's default step (sum ``loss_*``, backward, clip, step), with detached outputs.

    ``DefaultOptimizationStepper`` returns the losses with their autograd graph attached; the
    Trainer then keeps every minibatch's graph alive while it averages them. Detaching here frees
    the graph at once. It also replaces the deprecated ``Trainer(optimizer=...)`` hook path.

    The gradient norm is computed with torch's foreach kernels and stays a tensor: TorchRL's
    version clips parameter by parameter (or, without clipping, sums ``p.grad.pow(2)`` in Python
    over every parameter) and syncs it to a Python float each step. Same norm up to float
    rounding (~1e-7 relative); the clipping itself is torch's ``clip_grad_norm_``.

    Args:
        loss_components: loss entries to sum for the backward pass (None: every ``loss_*``).

    Example:
        >>> Trainer(..., optimizer=adam, optimization_stepper=DetachedOptimizationStepper())
    """

    @staticmethod
    def _compute_and_clip_grad_norm(
        optimizer: optim.Optimizer, clip_grad_norm: bool, clip_norm: float | None
    ) -> torch.Tensor:  # type: ignore[override]
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if clip_grad_norm and clip_norm is not None:
            return torch.nn.utils.clip_grad_norm_(params, clip_norm, foreach=True)
        grads = [p.grad for p in params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads, foreach=True)
        if clip_norm is not None:
            torch.nn.utils.clip_grad_value_(params, clip_norm, foreach=True)
        return norm

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        """One optimizer step on ``sub_batch``; returns the detached loss entries and
        ``grad_norm``."""
        losses = trainer.compute_loss(sub_batch)
        if self.loss_components is not None:
            items = [value for key, value in losses.items() if key in self.loss_components]
        else:
            items = [value for key, value in losses.items() if key.startswith("loss")]
        total = items[0]
        for item in items[1:]:
            total = total + item
        total.backward()
        grad_norm = self._compute_and_clip_grad_norm(
            trainer.optimizer, trainer.clip_grad_norm, trainer.clip_norm
        )
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()
        out = losses.detach()
        out["grad_norm"] = grad_norm.detach()
        return out
