"""DQN: TorchRL's DQNLoss (its tensor-level forward LeanDQNLoss) on a QValueActor,
epsilon-greedy exploration, replay buffer and target network.

Evaluation plays the greedy action under deterministic exploration (``eval/deterministic``,
``xdrl-eval``'s default) and epsilon-greedy with a fixed ``eval_epsilon`` under random exploration
(``eval/stochastic``, ``xdrl-eval --stochastic``): a Q-network has no distribution to sample, so
without an epsilon "stochastic" would be greedy again. 0.05 is the evaluation epsilon of Mnih et
al. 2015 (Nature DQN); Dopamine's Rainbow evaluates at 0.001.

With ``q_cells: []``, ``q_bias: false`` and a one-hot observation
(``env.observation_encoding: one_hot``) the Q-network is a table (one weight per state and
action, nothing shared between states); ``q_init`` starts it optimistic, ``loss_reduction: sum``
with plain SGD gives each sampled transition the step size ``2 * lr`` of a tabular learner (the
l2 loss is ``(Q - target)^2``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.data import TensorSpec
from torchrl.envs import LineariseRewards
from torchrl.modules import EGreedyModule, QValueActor
from torchrl.objectives import DQNLoss

from xdrl.algorithms.common import (
    AlgorithmParts,
    activation_class,
    image_torso,
    q_value_actor,
    require_discrete,
)
from xdrl.algorithms.off_policy import (
    ExplorationAnnealingHook,
    off_policy_parts,
    target_updater,
)
from xdrl.config.errors import ConfigError
from xdrl.config.types import (
    Activation,
    Cells,
    Discount,
    Encoder,
    FiniteFloat,
    Fraction,
    LossFunction,
    NonNegativeInt,
    OpenFraction,
    PositiveFloat,
    PositiveInt,
)
from xdrl.lean.dqn_loss import LeanDQNLoss
from xdrl.lean.egreedy import LeanEGreedyModule
from xdrl.lean.frame_replay import stacked_frames
from xdrl.lean.q_policy import EpsilonGreedyQPolicy

KEY = "algorithm.build"


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    total_frames: int | None = None,
    frame_skip: int = 1,
    q_cells: Cells = (64, 64),
    q_bias: bool = True,
    q_init: FiniteFloat | Literal["auto"] | None = None,
    q_init_bound: Sequence[FiniteFloat] | None = None,
    activation: Activation = "relu",
    encoder: Encoder = "auto",
    gamma: Discount = 0.99,
    double_dqn: bool = False,
    loss_function: LossFunction = "l2",
    loss_reduction: Literal["mean", "sum"] = "mean",
    buffer_size: PositiveInt | Literal["all"] = 100_000,
    batch_size: PositiveInt = 64,
    utd: PositiveFloat = 0.5,
    init_random_frames: NonNegativeInt = 1_000,
    eps_init: Fraction = 1.0,
    eps_end: Fraction = 0.05,
    eps_annealing_frames: NonNegativeInt = 10_000,
    eval_epsilon: Fraction = 0.05,
    target_update: Literal["hard", "soft"] = "hard",
    tau: OpenFraction = 0.005,
    hard_update_interval: PositiveInt = 10,
    lean: bool = True,
) -> AlgorithmParts:
    """Build DQN for ``env`` (discrete actions only); image observations get a Nature CNN
    torso, and frame stacks a replay buffer that stores each frame once.

    ``total_frames`` and ``frame_skip`` (supplied by xdrl) size ``buffer_size: all`` in
    transitions (one per agent step). ``q_init`` sets every
    Q-value at the start (see :func:`initialize_q`); ``auto`` takes ``q_init_bound`` (an upper
    bound of each objective's return, e.g. the env's ideal point) scalarized with the env's
    reward weights, an optimistic start. ``eval_epsilon`` is the exploration of the evaluation
    policy under random exploration (see the module docstring). ``lean`` (supplied by xdrl):
    xdrl's loss, exploration policy, replay buffers and target update, else TorchRL's
    ``DQNLoss``, ``TensorDictSequential(QValueActor, EGreedyModule)``,
    ``TensorDictReplayBuffer`` and ``HardUpdate``/``SoftUpdate``.

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
    actor = q_value_actor(env, q_cells, activation_class(activation), device, torso, bias=q_bias)
    if q_init is not None:
        value = auto_q_init(env, q_init_bound) if q_init == "auto" else float(q_init)
        initialize_q(actor, value, linear=not q_cells)
    greedy = (LeanEGreedyModule if lean else EGreedyModule)(
        env.full_action_spec_unbatched["action"],
        eps_init=float(eps_init),
        eps_end=float(eps_end),
        annealing_num_steps=max(1, eps_annealing_frames),
        device=device,
    )
    loss = (LeanDQNLoss if lean else DQNLoss)(
        actor,
        loss_function=loss_function,
        delay_value=True,
        double_dqn=double_dqn,
        action_space=env.full_action_spec_unbatched["action"],
        reduction=loss_reduction,
    )
    loss.make_value_estimator(gamma=gamma)
    updater = target_updater(
        loss,
        target_update=target_update,
        tau=tau,
        hard_update_interval=hard_update_interval,
        lean=lean,
    )
    policy_class = EpsilonGreedyQPolicy if lean else TensorDictSequential
    return off_policy_parts(
        loss,
        policy=policy_class(actor, greedy),
        eval_policy=evaluation_policy(
            actor, env.full_action_spec_unbatched["action"], float(eval_epsilon)
        ),
        updater=updater,
        frames_per_batch=frames_per_batch,
        utd=utd,
        buffer_size=_capacity(buffer_size, total_frames, frame_skip),
        batch_size=batch_size,
        init_random_frames=init_random_frames,
        extra_hooks=[(None, ExplorationAnnealingHook(greedy))],
        value_gamma=float(gamma),
        frame_stack=stacked_frames(env) if torso is not None else None,
        lean=lean,
    )


def evaluation_policy(
    actor: QValueActor, action_spec: TensorSpec, epsilon: float
) -> TensorDictSequential:
    """``actor`` then TorchRL's ``EGreedyModule`` at a fixed ``epsilon``: greedy under
    deterministic exploration, epsilon-greedy under random exploration."""
    fixed = EGreedyModule(action_spec, eps_init=epsilon, eps_end=epsilon, annealing_num_steps=1)
    return TensorDictSequential(actor, fixed)


def _capacity(buffer_size: int | str, total_frames: int | None, frame_skip: int = 1) -> int:
    """The replay capacity in transitions: ``all`` keeps every agent step of the run
    (``total_frames`` counts emulator frames, ``frame_skip`` of them per step)."""
    if buffer_size != "all":
        return int(buffer_size)
    if total_frames is None:
        raise ConfigError(f"{KEY}.buffer_size", "all needs total_frames; set a number")
    return -(-int(total_frames) // frame_skip)


def scalarization_weights(env) -> list[float] | None:
    """The weights ``env``'s ``LineariseRewards`` transform scalarizes with (None: none)."""
    for transform in getattr(env, "transform", []):
        if isinstance(transform, LineariseRewards):
            return [float(w) for w in transform.weights.flatten().tolist()]
    return None


def auto_q_init(env, bound: Sequence[float] | None) -> float:
    """``q_init: auto``: ``bound`` (an upper bound of each objective's return) scalarized with
    the env's reward weights (a scalar reward: the bound's one number)."""
    weights = scalarization_weights(env) or [1.0]
    if bound is None or len(bound) != len(weights):
        raise ConfigError(
            f"{KEY}.q_init_bound",
            f"q_init: auto needs an upper bound of each of the {len(weights)} objectives' "
            f"returns, got {None if bound is None else list(bound)}; set e.g. "
            f"{KEY}.q_init_bound=[{','.join(['1.0'] * len(weights))}] or a number for q_init",
        )
    return float(sum(w * b for w, b in zip(weights, bound, strict=True)))


def initialize_q(actor: QValueActor, value: float, *, linear: bool) -> None:
    """Start every Q-value at ``value``: the output layer's weights 0 and its bias ``value``;
    a linear network without bias gets every weight ``value`` (``Q = value * sum(obs)``:
    ``value`` on a one-hot observation)."""
    layers = [m for m in actor.modules() if isinstance(m, nn.Linear)]
    last = layers[-1]
    with torch.no_grad():
        if last.bias is not None:
            last.weight.zero_()
            last.bias.fill_(value)
        elif linear:
            last.weight.fill_(value)
        else:
            raise ConfigError(
                f"{KEY}.q_init",
                "needs q_bias: true unless the network is linear (q_cells: []); set "
                f"{KEY}.q_bias=true",
            )
