"""LeanTD3Loss: TorchRL's ``TD3Loss`` (twin Q, target policy smoothing) on plain tensors.

Why it exists: for the same reasons as :mod:`xdrl.lean.sac_loss`: ``TD3Loss`` runs its
actor and both critics through the TensorDict wrappers with ``to_module`` parameter swaps (the
target actor, then each critic in turn), ``step_mdp`` and batch clones on every call. This
subclass overrides ``value_loss`` and ``actor_loss`` (which ``TD3Loss.forward`` and xdrl's
delayed-actor stepper call) with the same computation on the batch's tensors: the actors' MLPs by
``F.linear`` plus TorchRL's ``TanhModule`` rescaling, both critics in one ``baddbmm`` per layer
over the stacked parameters ``TD3Loss`` already holds, the same smoothing noise drawn in the same
order. The actor loss differentiates through the first critic only, as ``TD3Loss`` does; the
second is evaluated without a graph for the ``state_action_value_actor`` entry. It applies to
xdrl's TD3 networks (a tanh-squashed MLP actor, MLP critics on ``observation``/``action``, TD(0)
targets, mean reduction, no prioritized weights); anything else runs ``TD3Loss`` unchanged.
Tested against ``TD3Loss`` on fixed batches: same values and gradients (1e-6). A critic and an
actor loss on 256 transitions, forward and backward ([400, 300] networks: an actor step of the
delayed-actor stepper), took 11.3 ms against 15.5 ms with ``TD3Loss``, 1.4x (``python
scripts/bench_ablation.py --piece td3_loss --reps 9 --calls 200``: 1 thread, the two alternated
in one process, medians; load average 2.8 on 2 cores, November 26; 1.4x at load 16 too).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.modules import TanhModule, ValueOperator
from torchrl.objectives import TD3Loss
from torchrl.objectives.utils import distance_loss
from torchrl.objectives.value import TD0Estimator

from xdrl.lean.ensemble import (
    Activation,
    Layers,
    ensemble_forward,
    mlp_forward,
    mlp_layout,
    stacked_layers,
)


class TanhActorHead:
    """xdrl's deterministic actor (an MLP, then TorchRL's ``TanhModule`` to the action bounds) as
    a tensor function of its layers.

    Args:
        names: the MLP's ``Linear`` children.
        act: its hidden activation.
        tanh: the ``TanhModule`` (bounds and clamping read from it).

    Example:
        >>> head = TanhActorHead.of(actor)
        >>> action = head(head.layers_of(loss.actor_network_params), observation)
    """

    PREFIX = ("module", "0", "module")  # the MLP's place in the actor's parameter TensorDict

    def __init__(self, names: list[str], act: Activation, tanh: TanhModule) -> None:
        self.names, self.act = names, act
        self.clamp = bool(tanh.clamp)

    @classmethod
    def of(cls, actor: nn.Module) -> TanhActorHead | None:
        """The head of an actor built like xdrl's ``deterministic_actor``, or None."""
        if not isinstance(actor, TensorDictSequential) or len(actor.module) != 2:
            return None
        net, tanh = actor.module
        if (
            not isinstance(net, TensorDictModule)
            or not isinstance(tanh, TanhModule)
            or list(net.in_keys) != ["observation"]
            or list(net.out_keys) != [tanh.in_keys[0]]
            or list(tanh.out_keys) != ["action"]
            or len(tanh.in_keys) != 1
        ):
            return None
        layout = mlp_layout(net.module)
        return None if layout is None else cls(layout[0], layout[1], tanh)

    def layers_of(self, params) -> tuple[Layers, torch.Tensor, torch.Tensor]:
        """``(weight, bias)`` per layer and the action bounds (buffers of the ``TanhModule``)
        from an actor parameter TensorDict (online or target)."""
        bounds = (params.get(("module", "1", f"action_{end}")) for end in ("low", "high"))
        return (stacked_layers(params, self.names, self.PREFIX), *bounds)

    def __call__(
        self, actor: tuple[Layers, torch.Tensor, torch.Tensor], observation: torch.Tensor
    ) -> torch.Tensor:
        """Actions ``[B, d]`` for observations ``[B, obs_dim]``."""
        layers, low, high = actor
        return self.squash(mlp_forward(layers, self.act, observation), low, high)

    def squash(self, param: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        """The ``TanhModule``'s map from the MLP's output ``param`` to the action bounds."""
        feature = param.tanh()
        if self.clamp:
            eps = torch.finfo(feature.dtype).resolution
            feature = feature.clamp(-1 + eps, 1 - eps)
        return low + (high - low) * (feature + 1) / 2


class LeanTD3Loss(TD3Loss):
    """``TD3Loss`` with tensor-level ``value_loss`` and ``actor_loss`` for xdrl's TD3 networks
    (same arguments, same outputs and metadata).

    Example:
        >>> loss = LeanTD3Loss(actor, qvalue, action_spec=spec, num_qvalue_nets=2)
    """

    def _lean(self, tensordict: TensorDictBase) -> bool:
        """Whether the tensor-level path applies (options decided once; parameter tensors are
        updated in place, so they are looked up once)."""
        if "_lean_ok" not in self.__dict__:
            self.__dict__["_lean_ok"] = self._lean_setup()
        return self.__dict__["_lean_ok"] and not (
            self.tensor_keys.priority_weight in tensordict.keys()
            or "steps_to_next_obs" in tensordict.keys()
        )

    def _lean_setup(self) -> bool:
        keys = self.tensor_keys
        estimator = self._value_estimator
        head = TanhActorHead.of(self.actor_network)
        critic = self.qvalue_network
        layout = mlp_layout(critic.module) if isinstance(critic, ValueOperator) else None
        ok = (
            head is not None
            and layout is not None
            and self.delay_actor
            and self.delay_qvalue
            and self.reduction == "mean"
            and self.loss_function in ("l2", "l1", "smooth_l1")
            and type(estimator) is TD0Estimator
            and not estimator.average_rewards
            and list(critic.in_keys) == ["observation", "action"]
            and list(critic.out_keys) == ["state_action_value"]
            and (keys.action, keys.reward, keys.done, keys.terminated, keys.state_action_value)
            == ("action", "reward", "done", "terminated", "state_action_value")
        )
        if ok:
            names, act = layout  # type: ignore[misc]
            self.__dict__["_head"] = head
            self.__dict__["_actor"] = head.layers_of(self.actor_network_params)  # type: ignore[union-attr]
            self.__dict__["_actor_target"] = head.layers_of(self.target_actor_network_params)  # type: ignore[union-attr]
            self.__dict__["_q_act"] = act
            self.__dict__["_q"] = stacked_layers(self.qvalue_network_params, names)
            self.__dict__["_q_target"] = stacked_layers(self.target_qvalue_network_params, names)
        return ok

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``-Q1(s, actor(s))`` averaged; the critics' parameters get no gradient. The metadata
        holds both critics' values of the actor's actions, as ``TD3Loss.actor_loss``'s."""
        if not self._lean(tensordict):
            return super().actor_loss(tensordict)
        q1, x = self._actor_q1(tensordict)
        critics = self.__dict__["_q"]
        with torch.no_grad():
            q2 = mlp_forward([(w[1], b[1]) for w, b in critics], self.__dict__["_q_act"], x)
        both = torch.stack([q1.detach(), q2]).squeeze(-1)
        return -q1.squeeze(-1).mean(), {"state_action_value_actor": both}

    def actor_only_loss(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``actor_loss``'s loss without its metadata, for callers that discard it (xdrl's
        ``DelayedActorStepper``): the second critic's forward pass that only fills the metadata
        is skipped, ~62 MFLOP per actor update with SB3's [400, 300] critics on batches of 256."""
        if not self._lean(tensordict):
            return super().actor_loss(tensordict)[0]
        return -self._actor_q1(tensordict)[0].squeeze(-1).mean()

    def _actor_q1(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``Q1(s, actor(s))`` with gradients to the actor only, and the critic input."""
        head: TanhActorHead = self.__dict__["_head"]
        observation = tensordict.get("observation")
        action = head(self.__dict__["_actor"], observation)
        x = torch.cat([observation, action], -1)
        critics = self.__dict__["_q"]
        q1 = mlp_forward(
            [(w[0].detach(), b[0].detach()) for w, b in critics], self.__dict__["_q_act"], x
        )
        return q1, x

    def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """Both critics against TD(0) targets from the target actor (with clipped smoothing
        noise) and the smaller target critic."""
        if not self._lean(tensordict):
            return super().value_loss(tensordict)
        head: TanhActorHead = self.__dict__["_head"]
        act: Activation = self.__dict__["_q_act"]
        action = tensordict.get("action")
        noise = (torch.randn_like(action) * self.policy_noise).clamp(
            -self.noise_clip, self.noise_clip
        )
        nxt = tensordict.get("next")
        with torch.no_grad():
            next_obs = nxt.get("observation")
            next_action = (head(self.__dict__["_actor_target"], next_obs) + noise).clamp(
                self.min_action, self.max_action
            )
            next_q = ensemble_forward(
                self.__dict__["_q_target"], act, torch.cat([next_obs, next_action], -1)
            ).squeeze(-1)
        next_value = next_q.min(0)[0]
        not_terminated = (~nxt.get("terminated")).int()
        target = nxt.get("reward") + self.value_estimator.gamma * not_terminated * (
            next_value.unsqueeze(-1)
        )
        target = target.squeeze(-1)
        current = ensemble_forward(
            self.__dict__["_q"], act, torch.cat([tensordict.get("observation"), action], -1)
        ).squeeze(-1)
        loss = distance_loss(current, target.expand_as(current), self.loss_function).sum(0)
        metadata = {
            "td_error": (current - target).pow(2),
            "next_state_value": next_value.detach(),
            "pred_value": current.detach(),
            "target_value": target.detach(),
        }
        return loss.mean(), metadata
