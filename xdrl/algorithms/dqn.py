"""DQN: TorchRL's DQNLoss on a QValueActor, epsilon-greedy exploration, replay buffer and
target network."""

from __future__ import annotations

from typing import Literal

from tensordict.nn import TensorDictSequential
from torchrl.modules import EGreedyModule
from torchrl.objectives import DQNLoss

from xdrl.algorithms.common import (
    AlgorithmParts,
    activation_class,
    image_torso,
    q_value_actor,
    require_discrete,
)
from xdrl.algorithms.frame_replay import stacked_frames
from xdrl.algorithms.off_policy import (
    ExplorationAnnealingHook,
    off_policy_parts,
    target_updater,
)
from xdrl.config_types import (
    Activation,
    Cells,
    Discount,
    Encoder,
    Fraction,
    LossFunction,
    NonNegativeInt,
    OpenFraction,
    PositiveFloat,
    PositiveInt,
)
from xdrl.errors import ConfigError


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    q_cells: Cells = (64, 64),
    activation: Activation = "relu",
    encoder: Encoder = "auto",
    gamma: Discount = 0.99,
    double_dqn: bool = False,
    loss_function: LossFunction = "l2",
    buffer_size: PositiveInt = 100_000,
    batch_size: PositiveInt = 64,
    utd: PositiveFloat = 0.5,
    init_random_frames: NonNegativeInt = 1_000,
    eps_init: Fraction = 1.0,
    eps_end: Fraction = 0.05,
    eps_annealing_frames: NonNegativeInt = 10_000,
    target_update: Literal["hard", "soft"] = "hard",
    tau: OpenFraction = 0.005,
    hard_update_interval: PositiveInt = 10,
) -> AlgorithmParts:
    """Build DQN for ``env`` (discrete actions only); image observations get a Nature CNN
    torso, and frame stacks a replay buffer that stores each frame once.

    Example:
        >>> parts = build(make_env("CartPole-v1", num_envs=8), frames_per_batch=256)
    """
    require_discrete(env, "dqn")
    if not 0 <= eps_end <= eps_init <= 1:
        raise ConfigError(
            "algorithm.build.eps_end",
            f"need 0 <= eps_end <= eps_init <= 1, got {eps_end} and {eps_init}",
        )
    torso = image_torso(env, encoder, device)
    actor = q_value_actor(env, q_cells, activation_class(activation), device, torso)
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
    return off_policy_parts(
        loss,
        policy=TensorDictSequential(actor, greedy),
        eval_policy=actor,
        updater=updater,
        frames_per_batch=frames_per_batch,
        utd=utd,
        buffer_size=buffer_size,
        batch_size=batch_size,
        init_random_frames=init_random_frames,
        extra_hooks=[(None, ExplorationAnnealingHook(greedy))],
        frame_stack=stacked_frames(env) if torso is not None else None,
    )
