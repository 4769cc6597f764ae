"""NormalHead: the log-densities and entropies of PPO's Gaussian actor on plain tensors.

Why it exists: with RL-Zoo's MuJoCo PPO settings (minibatches of 32, 20 epochs of 16 minibatches
per 512 frames on Walker2d) TorchRL's ``ClipPPOLoss.forward`` was 12.7 s of the 21 s the
optimizer steps took in a cProfile of 1,536 Walker2d frames (1 thread, loaded 2-core machine):
TensorDict cloning, the ``IndependentNormal`` object, key dispatch. :class:`NormalHead` computes
what the loss needs (the Normal's log-density of the stored action, summed over the action
dimensions, and its entropy) with the same torch operations as ``torch.distributions.Normal``,
so :class:`~xdrl.lean.ppo_loss.LeanClipPPOLoss` can take its tensor-level path for this actor as
it does for categorical ones (tested against ``ClipPPOLoss``: same values and gradients). One
forward and backward on a Walker2d minibatch of 32 (64x64 networks) took 2.8 ms this way against
5.1 ms through ``ClipPPOLoss.forward`` (same process, best of 5 x 400 calls, 1 thread, load
average 5 on 2 cores). ``lean=false`` runs TorchRL's loss.

:class:`NormalActor` is the same ``ProbabilisticActor`` with a tensor path for collection
(:class:`~xdrl.lean.policy_types.TensorSampler`): once observation normalization ran on the lean
collector, a cProfile of 4,096 ``hopper_ppo`` frames (1 thread, loaded 2-core machine) spent 46 of
75 s of collection in the actor's TensorDict forward (``IndependentNormal`` object, argument
checks, key dispatch) for three small matrix products and a Gaussian draw. :meth:`NormalActor.act`
draws the same action with the same random numbers and the same ``Normal.rsample`` and
``Normal.log_prob`` arithmetic (tested bit for bit against the TensorDict forward).
"""

from __future__ import annotations

import math

import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn
from torchrl.modules import IndependentNormal, ProbabilisticActor

from xdrl.lean.mlp_forward import MLPForward
from xdrl.lean.policy_types import TensorSampler, loc_scale_parts

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class NormalHead:
    """A diagonal Gaussian actor (an MLP's means, TorchRL's ``AddStateIndependentNormalScale``
    with the ``exp`` mapping, an ``IndependentNormal`` without location squashing) as tensor
    functions.

    Args:
        mlp: the network mapping observations to means.
        scale: the ``AddStateIndependentNormalScale`` holding the learned log-std.

    Example:
        >>> head = NormalHead.of(actor)  # None unless built like ``normal_actor``
        >>> log_prob, entropy = head.log_prob_entropy(observation, action)
    """

    def __init__(self, mlp: nn.Module, scale: AddStateIndependentNormalScale) -> None:
        self.forward = MLPForward(mlp)
        self.scale = scale

    @classmethod
    def of(cls, actor: nn.Module) -> NormalHead | None:
        """The head of an actor built like xdrl's ``normal_actor``, or None."""
        parts = loc_scale_parts(actor)
        if parts is None:
            return None
        net, dist = parts
        if (
            not isinstance(net[1], AddStateIndependentNormalScale)
            or net[1].scale_mapping != "exp"
            or not isinstance(dist.distribution_class, type)
            or not issubclass(dist.distribution_class, IndependentNormal)
            or dist.distribution_kwargs.get("tanh_loc", False)
        ):
            return None
        return cls(net[0], net[1])

    def log_prob_entropy(
        self, observation: torch.Tensor, action: torch.Tensor, entropy: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The log-density of ``action`` ``[n]`` and (``entropy=True``) the entropy ``[n]``
        of the policy at ``observation``, with grad, summed over the action dimensions."""
        loc = self.forward(observation)
        scale = self.scale.state_independent_scale.expand_as(loc).exp()
        scale = scale.clamp_min(self.scale.scale_lb)
        log_scale = scale.log()
        log_prob = -((action - loc) ** 2) / (2 * scale**2) - log_scale - _LOG_SQRT_2PI
        if not entropy:
            return log_prob.sum(-1), None
        return log_prob.sum(-1), (0.5 + _LOG_SQRT_2PI + log_scale).sum(-1)


class NormalActor(ProbabilisticActor, TensorSampler):
    """xdrl's Gaussian PPO actor (see :func:`xdrl.algorithms.common.normal_actor`): a
    ``ProbabilisticActor`` writing ``loc``, ``scale``, ``action`` and ``action_log_prob``, whose
    :meth:`act` samples on plain tensors.

    Args:
        module: the ``TensorDictModule`` mapping ``observation`` to ``loc`` and ``scale``.
        **kwargs: ``ProbabilisticActor``'s other arguments.

    Example:
        >>> actor = NormalActor(module, in_keys=["loc", "scale"], spec=spec,
        ...                     distribution_class=ClippedModeNormal, return_log_prob=True)
        >>> actor.act(torch.zeros(1, 11), explore=True)["action"].shape
        torch.Size([1, 3])
    """

    def __init__(self, module: TensorDictModule, **kwargs) -> None:
        super().__init__(module, **kwargs)
        # the parameter tensors are updated in place, so the tensor path is looked up once
        self._tensor_head = NormalHead.of(self)

    def act(self, observation: torch.Tensor, explore: bool) -> dict[str, torch.Tensor] | None:
        """A sampled action with its log-density and the Gaussian's parameters (``explore``), as
        the TensorDict forward computes them (``Normal.rsample`` then ``Normal.log_prob`` summed
        over the action dimensions); None for deterministic actions and for actors
        :class:`NormalHead` cannot read, which take the TensorDict forward."""
        head = self._tensor_head
        if not explore or head is None:
            return None
        loc = head.forward(observation)
        scale = head.scale.state_independent_scale.expand_as(loc)
        scale = torch.exp(scale).clamp_min(head.scale.scale_lb)
        eps = torch.empty(loc.shape, dtype=loc.dtype, device=loc.device).normal_()
        action = loc + eps * scale
        var = scale**2
        log_prob = -((action - loc) ** 2) / (2 * var) - scale.log() - _LOG_SQRT_2PI
        return {"loc": loc, "scale": scale, "action": action, "action_log_prob": log_prob.sum(-1)}
