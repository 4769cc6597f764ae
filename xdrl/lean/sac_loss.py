"""LeanSACLoss: TorchRL's ``SACLoss`` (v2: twin Q, no V network) on plain tensors.

Why it exists: on the SAC Pendulum workload with SB3's defaults (256x256 networks, batches of
256, one env, UTD 1) ``SACLoss.forward`` took ~70% of an optimizer step in cProfile (1 thread),
and most of it was not arithmetic: per call, eight ``to_module`` parameter swaps (the two
Q-networks are run one after the other through one module), the TensorDict wrappers of the
actor and critics, two ``TanhNormal`` objects (transforms, ``Independent``, argument checks),
TensorDict stacking of the Q outputs and cloning of the batch. This subclass computes the same
outputs from the batch's tensors: the actor's MLP by ``F.linear``, the ``TanhNormal`` sample and
log-density written out (same operations, same random draws in the same order), and both
Q-networks in one ``baddbmm`` per layer over the stacked parameters ``SACLoss`` already holds
(:mod:`xdrl.lean.ensemble`). It applies when the loss uses the options xdrl builds it with
(a ``TanhNormal`` actor over an MLP and ``NormalParamExtractor``, MLP critics on
``observation``/``action``, TD(0) targets, mean reduction, no V network, no delayed actor, no
alpha bounds, no prioritized weights); anything else runs ``SACLoss.forward`` unchanged. Tested
against ``SACLoss`` on fixed batches: same values and gradients (1e-6).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.modules import ValueOperator
from torchrl.objectives import SACLoss
from torchrl.objectives.utils import distance_loss
from torchrl.objectives.value import TD0Estimator

from xdrl.lean.ensemble import Activation, ensemble_forward, mlp_layout, stacked_layers
from xdrl.lean.tanh_normal_actor import TanhNormalHead


class LeanSACLoss(SACLoss):
    """``SACLoss`` with a tensor-level forward for xdrl's SAC networks (same arguments, same
    outputs: ``loss_actor``, ``loss_qvalue``, ``loss_alpha``, ``alpha``, ``entropy``, and the
    batch's ``td_error`` priority).

    Example:
        >>> loss = LeanSACLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2")
    """

    def _lean(self) -> bool:
        """Whether the tensor-level forward applies (decided once: the options are constructor
        arguments; the parameter tensors are updated in place, so they are looked up once)."""
        if "_lean_ok" not in self.__dict__:
            self.__dict__["_lean_ok"] = self._lean_setup()
        return self.__dict__["_lean_ok"]

    def _lean_setup(self) -> bool:
        keys = self.tensor_keys
        estimator = self._value_estimator
        head = TanhNormalHead.of(self.actor_network)
        critic = self.qvalue_network
        layout = mlp_layout(critic.module) if isinstance(critic, ValueOperator) else None
        ok = (
            head is not None
            and layout is not None
            and self._version == 2
            and not self.delay_actor
            and self.delay_qvalue
            and self.reduction == "mean"
            and not self.skip_done_states
            and self.min_log_alpha is None
            and self.max_log_alpha is None
            and self.target_entropy is not None
            and self.loss_function in ("l2", "l1", "smooth_l1")
            and type(estimator) is TD0Estimator
            and not estimator.average_rewards
            and list(critic.in_keys) == ["observation", "action"]
            and list(critic.out_keys) == ["state_action_value"]
            and (keys.action, keys.reward, keys.done, keys.terminated, keys.state_action_value)
            == ("action", "reward", "done", "terminated", "state_action_value")
            and estimator.tensor_keys.steps_to_next_obs == "steps_to_next_obs"
        )
        if ok:
            names, act = layout  # type: ignore[misc]
            self.__dict__["_head"] = head
            self.__dict__["_q_act"] = act
            self.__dict__["_q"] = stacked_layers(self.qvalue_network_params, names)
            self.__dict__["_q_target"] = stacked_layers(self.target_qvalue_network_params, names)
        return ok

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The SAC losses of a replay batch."""
        if (
            not self._lean()
            or self.tensor_keys.priority_weight in tensordict.keys()
            or "steps_to_next_obs" in tensordict.keys()
        ):
            return super().forward(tensordict)
        head: TanhNormalHead = self.__dict__["_head"]
        act: Activation = self.__dict__["_q_act"]
        observation = tensordict.get("observation")
        nxt = tensordict.get("next")
        alpha = self._alpha

        # Q-value loss against TD(0) targets from the target critics
        with torch.no_grad():
            next_obs = nxt.get("observation")
            next_action, next_log_prob = head.rsample_and_log_prob(next_obs)
            next_q = ensemble_forward(
                self.__dict__["_q_target"], act, torch.cat([next_obs, next_action], -1)
            )
            next_value = (next_q - alpha * next_log_prob.unsqueeze(-1)).min(0)[0]
            not_terminated = (~nxt.get("terminated")).int()
            target = nxt.get("reward") + self.value_estimator.gamma * not_terminated * next_value
            target = target.squeeze(-1)
        pred = ensemble_forward(
            self.__dict__["_q"], act, torch.cat([observation, tensordict.get("action")], -1)
        ).squeeze(-1)
        loss_qvalue = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        tensordict.set(self.tensor_keys.priority, (pred - target).abs().detach().max(0)[0])

        # Actor loss against the critics with detached parameters
        action, log_prob = head.rsample_and_log_prob(observation)
        frozen = [(w.detach(), b.detach()) for w, b in self.__dict__["_q"]]
        q_new = ensemble_forward(frozen, act, torch.cat([observation, action], -1))
        loss_actor = alpha * log_prob - q_new.min(0)[0].squeeze(-1)

        # Temperature loss
        log_prob = log_prob.detach()
        loss_alpha = -self.log_alpha * (log_prob + self.target_entropy)
        return TensorDict(
            {
                "loss_actor": loss_actor.mean(),
                "loss_qvalue": loss_qvalue.mean(),
                "loss_alpha": loss_alpha.mean(),
                "alpha": alpha,
                "entropy": -log_prob.mean(),
            },
            batch_size=[],
        )
