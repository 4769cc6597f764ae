"""Schedules that anneal over the run's budget, and what a resume under another budget does.

``lr_schedule: linear`` is torch's ``LinearLR`` from the optimizer's learning rate to 0 over the
run's batches, stepped after each batch by TorchRL's ``LRSchedulerHook``; each checkpoint saves
its ``total_iters``. A resume that raised ``total_frames`` used to continue the saved schedule,
which ends at the old budget: an extended finished run trained every later batch at lr 0 (its
``kl_approx`` was 0 from the old budget on, issue 47). :class:`BudgetLinearLR` re-anchors
instead, so the learning rate is what the schedule gives at the batches done under the new
budget, and anneals to 0 at the new end; a resume under the same budget loads the saved state
untouched (bit for bit). Frame-based schedules (PPO's ``clip_schedule: linear``) read the
Trainer's ``total_frames``, which is always this run's, and follow the new budget by themselves.
"""

from __future__ import annotations

from typing import Any

import torch
from torchrl.trainers import LRSchedulerHook


class BudgetLinearLR(LRSchedulerHook):
    """``LinearLR`` from the optimizer's learning rate to 0 over ``batches`` batches, stepped once
    per batch; a checkpoint written under another number of batches (``total_frames`` changed on
    resume) is re-anchored to this run's: after ``k`` scheduler steps the learning rate becomes
    ``lr0 * (1 - k / batches)`` (what the schedule gives at step ``k`` of the new budget) and
    ``total_iters`` becomes ``batches``; ``LinearLR``'s recursive step then continues that line
    to 0 at the new end. A raised and a lowered budget follow the same rule.

    Args:
        optimizer: the optimizer whose learning rates are annealed.
        batches: the run's budget in batches (``RunSpec.batches``).

    Example:
        >>> BudgetLinearLR(optimizer, batches=24).register(trainer)  # name: lr_scheduler
    """

    def __init__(self, optimizer: torch.optim.Optimizer, batches: int) -> None:
        scheduler = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0, end_factor=0.0, total_iters=batches
        )
        super().__init__(scheduler, interval="batch")
        self.batches = batches
        self.resumed_batches: int | None = None  # the loaded schedule's end, when not ours

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a checkpoint's schedule; re-anchor it when it ended at another budget."""
        super().load_state_dict(state_dict)
        saved = int(self.scheduler.total_iters)
        if saved != self.batches:
            self.resumed_batches = saved
            self._reanchor()

    def _reanchor(self) -> None:
        """Set each group's learning rate to the schedule's value at the steps done, under
        ``batches``."""
        scheduler = self.scheduler
        remaining = max(0.0, 1.0 - scheduler.last_epoch / self.batches)
        for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, strict=True):
            group["lr"] = base * remaining
        scheduler.total_iters = self.batches

    @property
    def learning_rate(self) -> float:
        """The first parameter group's learning rate: what the next batch trains with."""
        return float(self.scheduler.optimizer.param_groups[0]["lr"])


def lr_schedule(
    schedule: str, batches: int, optimizer: torch.optim.Optimizer
) -> BudgetLinearLR | None:
    """The hook of ``lr_schedule`` (None: ``constant``)."""
    if schedule == "constant":
        return None
    return BudgetLinearLR(optimizer, batches)


def budget_line(old: int, new: int, names: list[str], lr: BudgetLinearLR | None) -> str:
    """The one log line of a resume that changed the budget from ``old`` to ``new`` frames:
    which schedules (``names``) now end at the new budget, and the learning rate it resumes
    at."""
    change = f"total_frames {'raised' if new > old else 'lowered'} from {old:,} to {new:,}"
    if not names:
        return f"{change}: no schedule anneals over the budget; training continues to {new:,}"
    resumes = f"; lr resumes at {lr.learning_rate:.3g}" if lr is not None else ""
    return f"{change}: the linear schedules ({', '.join(names)}) now end at {new:,} frames{resumes}"
