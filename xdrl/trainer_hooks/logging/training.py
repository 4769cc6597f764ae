"""Training metrics: the averaged loss TensorDict of an optimization loop as ``train/`` keys."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.trainers.trainers import Trainer

from ..base import XdrlHook
from ._common import TRAIN_PREFIX, _key_name, _summarize_metric


class LoggingTrainingMetricsHook(XdrlHook):
    """Log reduced optimization metrics under the ``train/`` namespace.

    Called by the Trainer at ``post_optim_complete_log`` with ``(optim_steps, average_losses)``.
    Every leaf of ``average_losses`` (losses and extras such as ``grad_norm``, ``entropy``,
    ``clip_fraction``, ``ESS``, ``kl_approx``; nested keys joined with '/') becomes
    ``train/<group>/<name>``; vectors are reduced with min/mean/max (or the mean only).
    ``train/<group>/optim_steps`` holds the optimizer step count. Scalars are converted to
    Python floats with a single ``tolist()``; gradients are detached first.

    Args:
        group: metric group, the ``<group>`` of the keys.
        reduce_stats: False logs only the ``_mean`` of vector metrics; None/True min/mean/max.

    Example:
        >>> hook = LoggingTrainingMetricsHook(group="agents")
        >>> hook.register(trainer)  # post_optim_complete_log, name "logging_training_metrics"
        >>> hook(10, TensorDict({"loss_objective": torch.tensor(0.5)}))
        {'train/agents/optim_steps': 10, 'train/agents/loss_objective': 0.5}
    """

    hook_point = "post_optim_complete_log"

    def __init__(self, group: str = "agents", *, reduce_stats: bool | None = None) -> None:
        self.group = group
        self.reduce_stats = reduce_stats
        self._base = f"{TRAIN_PREFIX}/{group}"

    def __call__(
        self, _optim_steps: int, average_losses: TensorDictBase | None
    ) -> dict[str, float]:
        if average_losses is None:
            return {}
        out: dict[str, float] = {f"{self._base}/optim_steps": int(_optim_steps)}
        names: list[str] = []
        scalars: list[torch.Tensor] = []
        for key, value in average_losses.items(include_nested=True, leaves_only=True):
            name = f"{self._base}/{_key_name(key)}"
            if not isinstance(value, torch.Tensor):
                value = getattr(value, "data", value)
                if isinstance(value, (bool, int, float)):
                    out[name] = float(value)
                continue
            value = value.detach()
            if value.numel() == 1:
                names.append(name)
                scalars.append(value.reshape(()).double())
            elif value.numel() > 1:
                out.update(_summarize_metric(name, value, reduce_stats=self.reduce_stats))
        if scalars:
            out.update(zip(names, torch.stack(scalars).tolist(), strict=True))
        return out

    def register(self, trainer: Trainer, name: str = "logging_training_metrics") -> None:
        super().register(trainer, name)
