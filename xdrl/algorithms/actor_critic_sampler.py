"""ActorCriticSampler: the collection policy of a categorical actor and a critic that share an
image torso, writing each step's action and its state value from one torso pass.

Why: GAE needs ``V(s)`` of every collected observation. Computed after collection (as
:class:`~xdrl.algorithms.on_policy.OnePassGAE` did), that is a second Nature-CNN pass over the
batch: 0.29 s of 3.9 s per Atari PPO batch (cProfile of ``experiment=atari_ppo`` on Breakout,
2 threads, 4 batches of 1,024 agent steps). During collection the torso's features are already
computed and the value head is one 512x1 matmul. No update happens between collection and GAE,
so the collected values are the critic's values of the same parameters (tested against
TorchRL's ``GAE`` with the critic as value network).
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModuleBase, TensorDictSequential
from torchrl.modules import ValueOperator

from xdrl.algorithms.categorical_actor import CategoricalActor
from xdrl.algorithms.encoders import shared_torso
from xdrl.policy_types import TensorSampler


class ActorCriticSampler(TensorDictSequential, TensorSampler):
    """``TensorDictSequential(actor, critic)`` (action, log-prob, logits, then the state value)
    whose tensor path (:meth:`act`) runs the shared torso once for both heads.

    Args:
        actor: a :class:`CategoricalActor` on ``Sequential(torso, head)``.
        critic: a ``ValueOperator`` on ``Sequential(torso, head)`` over the same torso.

    Example:
        >>> policy = ActorCriticSampler(actor, critic)
        >>> policy.act(frames, explore=True).keys()  # action, action_log_prob, logits, state_value
    """

    def __init__(self, actor: CategoricalActor, critic: ValueOperator) -> None:
        super().__init__(actor, critic)
        shared = shared_torso(actor.logits_net, critic.module)
        if shared is None:
            raise ValueError("ActorCriticSampler needs an actor and a critic on one torso")
        # kept outside the module tree: they are the actor's and critic's own submodules
        self.__dict__["_shared"] = shared
        self._value_key = critic.out_keys[0]

    def act(self, observation: torch.Tensor, explore: bool) -> dict[str, torch.Tensor]:
        """The actor's :meth:`CategoricalActor.act` outputs and the critic's value, the same
        values the TensorDict forward writes for the same torch RNG state."""
        torso, actor_head, critic_head = self.__dict__["_shared"]
        features = torso(observation)
        pick = CategoricalActor.sample_logits if explore else CategoricalActor.mode_logits
        action, log_prob, logits = pick(actor_head(features))
        return {
            "action": action,
            "action_log_prob": log_prob,
            "logits": logits,
            self._value_key: critic_head(features),
        }


def collection_policy(
    actor: TensorDictModuleBase, critic: ValueOperator
) -> ActorCriticSampler | None:
    """An :class:`ActorCriticSampler` where the actor is categorical and shares its torso with
    the critic, else None (the actor collects alone and GAE runs the critic)."""
    if isinstance(actor, CategoricalActor) and shared_torso(actor.logits_net, critic.module):
        return ActorCriticSampler(actor, critic)
    return None
