"""TanhNormalActor: SAC's tanh-normal ``ProbabilisticActor`` with a tensor-level fast path.

Why it exists: on the SAC Pendulum workload (one env, SB3's defaults) the collector ran the
actor's TensorDict forward once per frame: a TensorDict module, a ``TanhNormal`` object
(transforms, ``Independent``, argument checks), its ``rsample`` and a ``log_prob`` that inverts the
tanh again. :class:`TanhNormalHead` does the same arithmetic on plain tensors; ``LeanSACLoss`` uses
it on replay batches and :meth:`TanhNormalActor.act` on each collected observation. The module is
still a ``ProbabilisticActor``: evaluation, checkpoints and TorchRL's ``SACLoss`` use it unchanged.
One Pendulum observation (SB3's SAC sizes, 256x256) took 61 us through :meth:`TanhNormalActor.act`
against 345 us through the ``ProbabilisticActor`` forward under random exploration, 5.7x
(``python scripts/bench_ablation.py --piece tanh_normal_actor --reps 9 --calls 2000``: 1 thread,
the two alternated in one process, medians; load average 2.8 on 2 cores, November 26; 7.1x at
load 19).
"""

from __future__ import annotations

import math

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.modules import ProbabilisticActor, TanhNormal

from xdrl.lean.ensemble import Layers, mlp_forward, mlp_layout
from xdrl.lean.policy_types import TensorSampler, loc_scale_parts

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
_LOG_2 = math.log(2.0)


class ClampedTanh(torch.autograd.Function):
    """``tanh(x)`` clamped to ``+-(1 - resolution)``, its gradient ``1 - y**2`` of the clamped
    output: TorchRL's ``safetanh_noeps`` (which ``TanhNormal`` squashes with), same values and
    gradients.

    Why not TorchRL's: its Function defines ``setup_context``, and ``Function.apply`` then binds
    the arguments through ``inspect.signature`` on every call; in a cProfile of the SAC Pendulum
    workload (1 thread) that was 1.1 s of 57 s, two calls per optimizer step. This one keeps
    ``ctx`` in ``forward``, which ``apply`` calls directly.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        lim = 1.0 - torch.finfo(x.dtype).resolution
        y = x.tanh().clamp(-lim, lim)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return grad * (1 - y.pow(2))


class TanhNormalHead:
    """A ``TanhNormal`` actor (MLP, ``NormalParamExtractor``, ``TanhNormal(low, high)``) as
    tensor functions: ``rsample_and_log_prob(observation)`` draws the same action and
    log-density ``TanhNormal.rsample_and_log_prob`` draws (same random numbers, same formula:
    the Normal's log-density minus the tanh and affine log-Jacobians), without building the
    distribution object.

    Args:
        mlp: the actor's MLP (its ``Linear`` weights are used in place).
        extractor: the ``NormalParamExtractor`` that follows it.
        low: lower action bounds.
        high: upper action bounds.

    Example:
        >>> head = TanhNormalHead.of(actor)  # None unless built like ``stochastic_actor``
        >>> action, log_prob = head.rsample_and_log_prob(observation)
    """

    def __init__(self, mlp: nn.Module, extractor: nn.Module, low: torch.Tensor, high: torch.Tensor):
        layout = mlp_layout(mlp)
        assert layout is not None
        names, self.act = layout
        linears = [mlp.get_submodule(n) for n in names]
        self.layers: Layers = [(m.weight, m.bias) for m in linears if isinstance(m, nn.Linear)]
        self.extractor = extractor
        self.shift = (high + low) / 2
        self.half_range = (high - low) / 2
        self.log_half_range = self.half_range.abs().log()

    @classmethod
    def of(cls, actor: nn.Module) -> TanhNormalHead | None:
        """The head of an actor built like xdrl's ``stochastic_actor``, or None."""
        parts = loc_scale_parts(actor)
        if parts is None:
            return None
        net, dist = parts
        if (
            not isinstance(net[1], NormalParamExtractor)
            or mlp_layout(net[0]) is None
            or dist.distribution_class is not TanhNormal
            or set(dist.distribution_kwargs) != {"low", "high"}
        ):
            return None
        kwargs = dist.distribution_kwargs
        low, high = (torch.as_tensor(kwargs[k], dtype=torch.float32) for k in ("low", "high"))
        if not bool((high > low).all()):
            return None
        return cls(net[0], net[1], low, high)

    def rsample_and_log_prob(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action ``[B, d]`` and its log-density ``[B]``."""
        action, log_prob, _, _ = self.sample(observation)
        return action, log_prob

    def sample(
        self, observation: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, log_prob, loc, scale)``: a reparameterized action, its log-density and the
        Normal's parameters."""
        loc, scale = self.extractor(mlp_forward(self.layers, self.act, observation))
        eps = torch.empty(loc.shape, dtype=loc.dtype, device=loc.device).normal_()
        pre = loc + eps * scale
        log_normal = -((pre - loc) ** 2) / (2 * scale**2) - scale.log() - _LOG_SQRT_2PI
        squashed = ClampedTanh.apply(pre)
        log_jacobian = 2.0 * (_LOG_2 - pre - nn.functional.softplus(-2.0 * pre))
        log_jacobian = log_jacobian + self.log_half_range.to(pre.device).expand_as(pre)
        action = self.shift.to(pre.device) + self.half_range.to(pre.device) * squashed
        return action, log_normal.sum(-1) - log_jacobian.sum(-1), loc, scale


class TanhNormalActor(ProbabilisticActor, TensorSampler):
    """A tanh-normal policy within the action bounds: reads ``observation``, writes ``loc``,
    ``scale``, ``action`` and ``action_log_prob``, as ``ProbabilisticActor(TensorDictModule(net,
    ["observation"], ["loc", "scale"]), distribution_class=TanhNormal, distribution_kwargs={"low":
    low, "high": high}, return_log_prob=True)`` does.

    Args:
        net: maps observations to ``(loc, scale)`` (an MLP then a ``NormalParamExtractor``).
        spec: the env's full action spec (unbatched).
        low: lower action bounds.
        high: upper action bounds.

    Example:
        >>> actor = TanhNormalActor(nn.Sequential(mlp, NormalParamExtractor()), spec, low, high)
        >>> actor.act(torch.zeros(1, 3), explore=True)["action"].shape
        torch.Size([1, 1])
    """

    def __init__(self, net: nn.Module, spec, low: torch.Tensor, high: torch.Tensor) -> None:
        module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
        super().__init__(
            module,
            in_keys=["loc", "scale"],
            spec=spec,
            distribution_class=TanhNormal,
            distribution_kwargs={"low": low, "high": high},
            return_log_prob=True,
        )
        # the parameter tensors are updated in place, so the tensor path is looked up once
        self._tensor_head = TanhNormalHead.of(self)

    def act(self, observation: torch.Tensor, explore: bool) -> dict[str, torch.Tensor] | None:
        """A sampled action with its log-density and the Normal's parameters (``explore``); None
        for deterministic actions and for a network :class:`TanhNormalHead` cannot read (an
        image torso), which take the TensorDict forward.

        The log-density is scored at the drawn pre-tanh value, as
        ``TanhNormal.rsample_and_log_prob`` does; the TensorDict forward scores the action
        through the inverse tanh, which agrees to float rounding (tested) but not in
        saturation. The record of a batch keeps it; no loss reads it.
        """
        if not explore or self._tensor_head is None:
            return None
        action, log_prob, loc, scale = self._tensor_head.sample(observation)
        return {"loc": loc, "scale": scale, "action": action, "action_log_prob": log_prob}
