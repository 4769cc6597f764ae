"""EpsilonGreedyQPolicy: DQN's exploration policy (the greedy ``QValueActor``, then TorchRL's
``EGreedyModule``) with a tensor-level fast path.

Why it exists: the collector ran this policy's TensorDict forward once per collected step (8
CartPole envs per step on ``cartpole_dqn``): the Q-network module, ``QValueModule``'s argmax
and bookkeeping and the epsilon-greedy module's reads and writes, each through TensorDict
wrappers; in a cProfile of 40 batches of 256 frames that forward was 0.54 s of 1.04 s of
collection, the network's matmuls 0.07 s. :meth:`EpsilonGreedyQPolicy.act` computes the same
outputs from the observation tensor: the network called directly, ``QValueModule``'s greedy
action and chosen value, and ``EGreedyModule``'s draws (one uniform per env against epsilon,
then the action spec's ``rand``, in that order, so the torch RNG moves as it does through the
TensorDict forward). The module is still the ``TensorDictSequential(actor, greedy)`` TorchRL
would run; evaluation and checkpoints use it unchanged.
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.data import TensorSpec
from torchrl.modules import EGreedyModule, QValueActor, QValueModule

from xdrl.lean.mlp_forward import MLPForward
from xdrl.lean.policy_types import TensorSampler

_OUT_KEYS = ["action", "action_value", "chosen_action_value"]


class EpsilonGreedyQPolicy(TensorDictSequential, TensorSampler):
    """``TensorDictSequential(actor, greedy)``: the Q-network's greedy ``action``,
    ``action_value`` and ``chosen_action_value``, the action replaced by a random one with
    probability epsilon under random exploration.

    Args:
        actor: a ``QValueActor`` on ``observation`` (categorical or one-hot actions, no mask).
        greedy: TorchRL's ``EGreedyModule`` on ``action``.

    Example:
        >>> policy = EpsilonGreedyQPolicy(actor, EGreedyModule(spec, annealing_num_steps=8_000))
        >>> policy.act(torch.zeros(8, 4), explore=True)["action"].shape
        torch.Size([8])
    """

    def __init__(self, actor: QValueActor, greedy: EGreedyModule) -> None:
        super().__init__(actor, greedy)
        net, head = actor.module[0], actor.module[1]
        tensor_path = (
            isinstance(net, TensorDictModule)
            and list(net.in_keys) == ["observation"]
            and list(net.out_keys) == ["action_value"]
            and type(head) is QValueModule
            and head.action_space in ("categorical", "one_hot")
            and head.action_mask_key is None
            and list(head.out_keys) == _OUT_KEYS
            and greedy.action_key == "action"
            and greedy.action_mask_key is None
            and greedy.spec is not None
        )
        self._forward = MLPForward(net.module) if tensor_path else None
        self._one_hot = head.action_space == "one_hot"
        self._specs: dict[torch.Size, TensorSpec] = {}  # the action spec expanded per batch shape

    def act(self, observation: torch.Tensor, explore: bool) -> dict[str, torch.Tensor] | None:
        """``action``, ``action_value`` and ``chosen_action_value`` for a batch of
        observations; None for an actor outside the tensor path (it then takes the TensorDict
        forward)."""
        if self._forward is None:
            return None
        values = self._forward(observation)
        if self._one_hot:
            action = (values == values.max(dim=-1, keepdim=True)[0]).to(torch.long)
            chosen = (action * values).sum(-1, True)
        else:
            action = torch.argmax(values, dim=-1).to(torch.long)
            chosen = values.gather(-1, action.unsqueeze(-1))
        if explore:
            action = self._explore(action, values.shape[:-1])  # the batch: one row per env
        return {"action": action, "action_value": values, "chosen_action_value": chosen}

    def _explore(self, action: torch.Tensor, batch: torch.Size) -> torch.Tensor:
        """``EGreedyModule.forward`` on the greedy action: the same draws in the same order."""
        greedy: EGreedyModule = self.module[1]  # type: ignore[assignment]
        eps = greedy.eps
        cond = torch.rand(batch, device=eps.device) < eps
        cond = cond.reshape(*cond.shape, *(1,) * (action.dim() - cond.dim())).expand_as(action)
        spec = self._specs.get(action.shape)
        if spec is None:
            spec = greedy.spec["action"]
            if spec.shape != action.shape:
                spec = spec.expand(action.shape)
            self._specs[action.shape] = spec
        return torch.where(cond, spec.rand().to(eps.device), action)
