"""DQN: TorchRL's DQNLoss on a QValueActor, epsilon-greedy exploration, replay buffer and
target network."""

from __future__ import annotations

from collections.abc import Sequence

from tensordict.nn import TensorDictSequential
from torchrl.modules import EGreedyModule
from torchrl.objectives import DQNLoss

from xdrl.algorithms.common import AlgorithmParts, activation_class, q_value_actor, require_discrete
from xdrl.algorithms.off_policy import (
    ExplorationAnnealingHook,
    off_policy_hooks,
    optim_steps,
    replay_buffer,
    target_updater,
)
from xdrl.errors import ConfigError


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    q_cells: Sequence[int] = (64, 64),
    activation: str = "relu",
    gamma: float = 0.99,
    double_dqn: bool = False,
    loss_function: str = "l2",
    buffer_size: int = 100_000,
    batch_size: int = 64,
    utd: float = 0.5,
    init_random_frames: int = 1_000,
    eps_init: float = 1.0,
    eps_end: float = 0.05,
    eps_annealing_frames: int = 10_000,
    target_update: str = "hard",
    tau: float = 0.005,
    hard_update_interval: int = 10,
) -> AlgorithmParts:
    """Build DQN for ``env`` (discrete actions only).

    Example:
        >>> parts = build(make_env("CartPole-v1", num_envs=8), frames_per_batch=256)
    """
    require_discrete(env, "dqn")
    if not 0 <= eps_end <= eps_init <= 1:
        raise ConfigError(
            "algorithm.build.eps_end",
            f"need 0 <= eps_end <= eps_init <= 1, got {eps_end} and {eps_init}",
        )
    actor = q_value_actor(env, q_cells, activation_class(activation), device)
    greedy = EGreedyModule(
        env.full_action_spec_unbatched["action"],
        eps_init=float(eps_init),
        eps_end=float(eps_end),
        annealing_num_steps=max(1, eps_annealing_frames),
        device=device,
    )
    loss = DQNLoss(
        actor,
        loss_function=loss_function,
        delay_value=True,
        double_dqn=double_dqn,
        action_space=env.full_action_spec_unbatched["action"],
    )
    loss.make_value_estimator(gamma=gamma)
    updater = target_updater(
        loss, target_update=target_update, tau=tau, hard_update_interval=hard_update_interval
    )
    buffer = replay_buffer(buffer_size, batch_size)
    return AlgorithmParts(
        policy=TensorDictSequential(actor, greedy),
        eval_policy=actor,
        loss_module=loss,
        optim_steps_per_batch=optim_steps(utd, frames_per_batch),
        hooks=[*off_policy_hooks(buffer, updater), (None, ExplorationAnnealingHook(greedy))],
        modules={"replay_buffer": buffer},
        init_random_frames=init_random_frames,
    )
