"""FusedAdamStep: ``torch.optim.Adam(fused=True).step()`` and ``zero_grad()`` without the
``Optimizer`` wrappers around them.

Why it exists: off-policy methods take one small optimizer step per sampled minibatch (DQN's
CartPole settings: 128 steps of batch 64 on a 256x256 network per 256 frames), so the step's
fixed cost counts. On that network ``Adam(fused=True).step()`` took 122 us, of which the fused
kernel (``torch._fused_adam_`` and the step-count increment) is 47 us: the rest is
``Optimizer.step``'s profiler ``record_function``, hook and dynamo wrappers, ``_init_group``
rebuilding six lists from the state dicts and torch's grouping of the tensors by device and
dtype (1 thread, AMD EPYC, 5,000 calls each). This class calls the same kernel with the same
arguments on lists it looks up once, so the parameters and the optimizer's state (``step``,
``exp_avg``, ``exp_avg_sq``) come out bit for bit as torch's, and ``state_dict``, checkpoints
and LR schedulers keep working on the optimizer itself.

It applies to ``Adam`` and ``AdamW`` with ``fused=True`` (no AMSGrad, capturable or
differentiable mode, real parameters of one device and dtype, no step hooks, no AMP gradient
scaler); anything else, and the first step in a process (it creates the state and marks the
optimizer stepped for LR schedulers), goes through ``optimizer.step()``. Tested against torch's
step, bit for bit, with an LR schedule, weight decay and parameters whose gradient is missing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import optim
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks


class FusedAdamStep:
    """The optimizer step and ``zero_grad(set_to_none=True)`` of ``optimizer``, lean when it is
    a fused ``Adam``/``AdamW`` (see the module docstring), else the optimizer's own.

    Example:
        >>> step = FusedAdamStep(adam)
        >>> loss.backward(); step(); step.zero_grad()
    """

    def __init__(self, optimizer: optim.Optimizer) -> None:
        self.optimizer = optimizer
        self._stepped = False  # one step through torch first: state created, schedulers told
        self._layout: tuple[Any, Any, int] | None = None  # what the cached lists were built from
        self._groups: list[tuple[dict[str, Any], list[torch.Tensor]]] = []
        self._lists: dict[tuple[int, tuple[bool, ...]], tuple[list[torch.Tensor], ...]] = {}

    def zero_grad(self) -> None:
        """``optimizer.zero_grad(set_to_none=True)``: every parameter's gradient set to None."""
        if not self._current():
            self.optimizer.zero_grad(set_to_none=True)
            return
        for _, params in self._groups:
            for p in params:
                p.grad = None

    def __call__(self) -> None:
        """One optimizer step on the parameters' current gradients."""
        work = self._work() if self._stepped and (self._current() or self._prepare()) else None
        if work is None:
            self.optimizer.step()
            self._stepped = True
            return
        with torch.no_grad():
            for group, (kept, exp_avgs, exp_avg_sqs, steps) in work:
                beta1, beta2 = group["betas"]
                torch._foreach_add_(steps, 1)
                kernel = (
                    torch._fused_adamw_ if group["decoupled_weight_decay"] else torch._fused_adam_
                )
                kernel(
                    kept,
                    [p.grad for p in kept],  # type: ignore[misc]  # all present here
                    exp_avgs,
                    exp_avg_sqs,
                    [],
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=group["maximize"],
                    grad_scale=None,
                    found_inf=None,
                )

    def _work(self) -> list[tuple[dict[str, Any], tuple[list[torch.Tensor], ...]]] | None:
        """Each group with gradients and its parameters and state tensors that have one; None
        if one of them has no state yet (torch's step creates it)."""
        work = []
        for g, (group, params) in enumerate(self._groups):
            present = tuple(p.grad is not None for p in params)
            if not any(present):
                continue
            lists = self._lists.get((g, present))
            if lists is None:
                lists = self._state_lists(params, present)
                if lists is None:
                    return None
                self._lists[(g, present)] = lists
            work.append((group, lists))
        return work

    def _current(self) -> bool:
        """Whether the cached lists still describe the optimizer (``load_state_dict`` replaces
        its state and groups) and nothing was hooked onto its step since."""
        opt = self.optimizer
        layout = self._layout
        return (
            layout is not None
            and layout[0] is opt.state
            and layout[1] is opt.param_groups
            and layout[2] == len(opt.param_groups)
            and not self._hooked()
        )

    def _hooked(self) -> bool:
        """Whether a step hook is registered (on this optimizer or on every optimizer)."""
        opt = self.optimizer
        return bool(
            opt._optimizer_step_pre_hooks
            or opt._optimizer_step_post_hooks
            or _global_optimizer_pre_hooks
            or _global_optimizer_post_hooks
        )

    def _prepare(self) -> bool:
        """Rebuild the cache for the optimizer as it is; False where the lean step does not
        apply (the optimizer's own ``step`` runs then)."""
        opt = self.optimizer
        self._layout, self._groups, self._lists = None, [], {}
        if type(opt) not in (optim.Adam, optim.AdamW) or opt.__dict__.get("grad_scale") is not None:
            return False
        if opt.__dict__.get("found_inf") is not None or self._hooked():
            return False
        kinds: set[tuple[torch.device, torch.dtype]] = set()
        for group in opt.param_groups:
            flags = ("amsgrad", "capturable", "differentiable")
            if not group["fused"] or any(group[flag] for flag in flags):
                return False
            if any(isinstance(v, torch.Tensor) for v in (group["lr"], *group["betas"])):
                return False
            kinds.update((p.device, p.dtype) for p in group["params"])
        if len(kinds) != 1 or next(iter(kinds))[1] not in (torch.float32, torch.float64):
            return False
        self._groups = [(group, list(group["params"])) for group in opt.param_groups]
        self._layout = (opt.state, opt.param_groups, len(opt.param_groups))
        return True

    def _state_lists(
        self, params: list[torch.Tensor], present: tuple[bool, ...]
    ) -> tuple[list[torch.Tensor], ...] | None:
        """The parameters with a gradient and their ``exp_avg``, ``exp_avg_sq`` and ``step``
        state tensors; None if one has no state yet."""
        kept = [p for p, has in zip(params, present, strict=True) if has]
        states = [self.optimizer.state.get(p) for p in kept]
        if not all(states):
            return None
        return (
            kept,
            [s["exp_avg"] for s in states],  # type: ignore[index]
            [s["exp_avg_sq"] for s in states],  # type: ignore[index]
            [s["step"] for s in states],  # type: ignore[index]
        )
