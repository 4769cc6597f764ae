"""SAC: TorchRL's SACLoss (twin Q-networks, learned temperature; its tensor-level forward
LeanSACLoss), replay buffer, Polyak targets."""

from __future__ import annotations

from typing import Literal

from torchrl.objectives import SACLoss

from xdrl.algorithms.common import (
    AlgorithmParts,
    action_value,
    activation_class,
    require_continuous,
    stochastic_actor,
)
from xdrl.algorithms.off_policy import off_policy_parts, target_updater
from xdrl.config.types import (
    Activation,
    Cells,
    Discount,
    FiniteFloat,
    LossFunction,
    NonNegativeInt,
    OpenFraction,
    PositiveFloat,
    PositiveInt,
)
from xdrl.lean.sac_loss import LeanSACLoss


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    actor_cells: Cells = (256, 256),
    critic_cells: Cells = (256, 256),
    activation: Activation = "relu",
    gamma: Discount = 0.99,
    alpha_init: PositiveFloat = 1.0,
    fixed_alpha: bool = False,
    target_entropy: Literal["auto"] | FiniteFloat = "auto",
    loss_function: LossFunction = "l2",
    buffer_size: PositiveInt = 1_000_000,
    batch_size: PositiveInt = 256,
    utd: PositiveFloat = 1.0,
    init_random_frames: NonNegativeInt = 5_000,
    tau: OpenFraction = 0.005,
    lean: bool = True,
) -> AlgorithmParts:
    """Build SAC for ``env`` (continuous actions only); ``lean`` (supplied by xdrl): xdrl's loss,
    replay buffer and target update, else TorchRL's ``SACLoss``, ``TensorDictReplayBuffer`` and
    ``SoftUpdate``.

    Example:
        >>> parts = build(make_env("Pendulum-v1", num_envs=8), frames_per_batch=64)
    """
    require_continuous(env, "sac")
    act = activation_class(activation)
    actor = stochastic_actor(env, actor_cells, act, device)
    qvalue = action_value(env, critic_cells, act, device)
    loss = (LeanSACLoss if lean else SACLoss)(
        actor,
        qvalue,
        num_qvalue_nets=2,
        loss_function=loss_function,
        alpha_init=alpha_init,
        fixed_alpha=fixed_alpha,
        target_entropy=target_entropy,
        action_spec=env.full_action_spec_unbatched["action"],
        delay_qvalue=True,
        deactivate_vmap=True,  # a loop over the two Q-nets: ~8% faster per step on CPU than vmap
    )
    loss.make_value_estimator(gamma=gamma)
    updater = target_updater(loss, target_update="soft", tau=tau, hard_update_interval=1, lean=lean)
    return off_policy_parts(
        loss,
        policy=actor,
        eval_policy=actor,
        updater=updater,
        frames_per_batch=frames_per_batch,
        utd=utd,
        buffer_size=buffer_size,
        batch_size=batch_size,
        init_random_frames=init_random_frames,
        lean=lean,
    )
