"""A2C: TorchRL's A2CLoss with GAE advantages, sharing the on-policy plumbing with PPO."""

from __future__ import annotations

from typing import Literal

from torchrl.objectives import A2CLoss

from xdrl.algorithms.common import AlgorithmParts
from xdrl.algorithms.on_policy import actor_critic, on_policy_parts
from xdrl.algorithms.recurrent import RecurrentLoss
from xdrl.config.types import (
    Activation,
    Cells,
    Discount,
    Encoder,
    FiniteFloat,
    Fraction,
    NonNegativeFloat,
    PositiveInt,
    RecurrentCell,
)


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    actor_cells: Cells = (64, 64),
    critic_cells: Cells = (64, 64),
    activation: Activation = "tanh",
    encoder: Encoder = "auto",
    entropy_coef: NonNegativeFloat = 0.0,
    critic_coef: NonNegativeFloat = 0.5,
    gamma: Discount = 0.99,
    lmbda: Fraction = 1.0,
    epochs: PositiveInt = 1,
    minibatch_size: PositiveInt | None = None,
    normalize_rewards: bool = False,
    recurrent: RecurrentCell | None = None,
    recurrent_hidden: PositiveInt = 64,
    recurrent_critic: bool = False,
    recurrent_head_cells: Cells = (),
    distribution: Literal["tanh_normal", "normal"] = "tanh_normal",
    log_std_init: FiniteFloat = 0.0,
    ortho_init: bool = True,
    lean: bool = True,
) -> AlgorithmParts:
    """Build A2C for ``env`` (discrete or continuous actions); ``recurrent`` (lstm | gru) as
    PPO's (:mod:`xdrl.algorithms.recurrent`); ``distribution``, ``log_std_init`` and
    ``ortho_init`` as PPO's; ``lean`` (supplied by xdrl): xdrl's GAE and minibatch buffer, else
    TorchRL's.

    Example:
        >>> parts = build(make_env("CartPole-v1", num_envs=8), frames_per_batch=40)
    """
    minibatch_size = minibatch_size or frames_per_batch
    actor, critic = actor_critic(
        env,
        actor_cells,
        critic_cells,
        activation,
        device,
        encoder,
        recurrent=recurrent,
        recurrent_hidden=recurrent_hidden,
        recurrent_critic=recurrent_critic,
        recurrent_head_cells=recurrent_head_cells,
        distribution=distribution,
        log_std_init=log_std_init,
        ortho_init=ortho_init,
    )
    loss = (RecurrentA2CLoss if recurrent else A2CLoss)(
        actor,
        critic,
        entropy_bonus=entropy_coef > 0,
        entropy_coeff=entropy_coef if entropy_coef > 0 else None,
        critic_coeff=critic_coef,
        loss_critic_type="l2",
        functional=False,  # no per-call parameter swapping (see ppo.build)
    )
    return on_policy_parts(
        loss,
        actor,
        critic,
        frames_per_batch=frames_per_batch,
        minibatch_size=minibatch_size,
        epochs=epochs,
        gamma=gamma,
        lmbda=lmbda,
        device=device,
        normalize_rewards=normalize_rewards,
        num_envs=int(env.batch_size[0]) if env.batch_size else 1,
        lean=lean,
    )


class RecurrentA2CLoss(RecurrentLoss, A2CLoss):
    """TorchRL's ``A2CLoss`` run in recurrent mode (a recurrent actor or critic)."""
