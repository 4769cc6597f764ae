"""A2C: TorchRL's A2CLoss with GAE advantages, on-policy, sharing PPO's buffer and hooks."""

from __future__ import annotations

from torchrl.objectives import A2CLoss
from torchrl.objectives.value import GAE

from xdrl.algorithms.common import AlgorithmParts, activation_class, state_value, stochastic_actor
from xdrl.algorithms.ppo import buffer_modules, minibatch_buffer, on_policy_hooks
from xdrl.config_check import Activation, Cells, Discount, Fraction, NonNegativeFloat, PositiveInt
from xdrl.errors import ConfigError


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    actor_cells: Cells = (64, 64),
    critic_cells: Cells = (64, 64),
    activation: Activation = "tanh",
    entropy_coef: NonNegativeFloat = 0.0,
    critic_coef: NonNegativeFloat = 0.5,
    gamma: Discount = 0.99,
    lmbda: Fraction = 1.0,
    epochs: PositiveInt = 1,
    minibatch_size: PositiveInt | None = None,
) -> AlgorithmParts:
    """Build A2C for ``env`` (discrete or continuous actions).

    Example:
        >>> parts = build(make_env("CartPole-v1", num_envs=8), frames_per_batch=40)
    """
    if epochs < 1:
        raise ConfigError("algorithm.build.epochs", f"must be at least 1, got {epochs}")
    minibatch_size = minibatch_size or frames_per_batch
    act = activation_class(activation)
    actor = stochastic_actor(env, actor_cells, act, device)
    critic = state_value(env, critic_cells, act, device)
    loss = A2CLoss(
        actor,
        critic,
        entropy_bonus=entropy_coef > 0,
        entropy_coeff=entropy_coef if entropy_coef > 0 else None,
        critic_coeff=critic_coef,
        loss_critic_type="l2",
        functional=False,  # no per-call parameter swapping (see ppo.build)
    )
    loss.make_value_estimator(
        GAE, gamma=gamma, lmbda=lmbda, value_network=critic, average_gae=False, device=device
    )
    buffer = minibatch_buffer(frames_per_batch, minibatch_size, "algorithm.build.minibatch_size")
    return AlgorithmParts(
        policy=actor,
        eval_policy=actor,
        loss_module=loss,
        optim_steps_per_batch=frames_per_batch // minibatch_size,
        num_epochs=epochs,
        hooks=on_policy_hooks(loss, buffer, advantage_every_epoch=False),
        modules=buffer_modules(buffer),
    )
