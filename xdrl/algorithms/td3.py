"""TD3: TorchRL's TD3Loss (twin Q-networks, target policy smoothing; its tensor-level version
LeanTD3Loss) with delayed actor updates, Gaussian exploration noise, replay buffer and Polyak
targets that move with the actor (every ``policy_delay`` optimizer steps, as in the TD3 paper
and SB3)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential
from torchrl.modules import AdditiveGaussianModule
from torchrl.objectives import TD3Loss
from torchrl.trainers import Trainer

from xdrl.algorithms.common import (
    AlgorithmParts,
    action_bounds,
    action_value,
    activation_class,
    deterministic_actor,
    require_continuous,
)
from xdrl.algorithms.off_policy import off_policy_parts, target_updater
from xdrl.algorithms.stepper import DetachedOptimizationStepper
from xdrl.config.types import (
    Activation,
    Cells,
    Discount,
    LossFunction,
    NonNegativeFloat,
    NonNegativeInt,
    OpenFraction,
    PositiveFloat,
    PositiveInt,
)
from xdrl.lean.td3_actor import NoisyTanhActor
from xdrl.lean.td3_loss import LeanTD3Loss


class DelayedActorStepper(DetachedOptimizationStepper):
    """TD3's step with one optimizer: the critic loss every step, the actor loss every ``delay``.

    Parameters without a gradient (the actor's, on critic-only steps) are skipped by the optimizer,
    so one optimizer (and xdrl's LR schedule and gradient clipping) serves both networks.

    Args:
        policy_delay: optimizer steps per actor update.
        lean: see :class:`~xdrl.algorithms.stepper.DetachedOptimizationStepper`.

    Example:
        >>> Trainer(..., optimizer=adam, optimization_stepper=DelayedActorStepper(policy_delay=2))
    """

    def __init__(self, policy_delay: int = 2, *, lean: bool = True) -> None:
        super().__init__(lean=lean)
        self.policy_delay = int(policy_delay)
        self.count = 0
        self._last_actor_loss = torch.zeros(())

    def actor_step(self) -> bool:
        """Whether the optimizer step counted last updates the actor (every ``policy_delay``-th);
        TD3's targets move on the same steps (the clock of
        :class:`~xdrl.algorithms.off_policy.TargetUpdateHook`)."""
        return self.count % self.policy_delay == 0

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        """Critic (and every ``policy_delay`` steps actor) update on ``sub_batch``."""
        self.count += 1
        loss_qvalue, _ = trainer.compute_loss(sub_batch, method="value_loss")
        total = loss_qvalue
        if self.actor_step():
            if hasattr(trainer.loss_module, "actor_only_loss"):  # no unused metadata
                loss_actor = trainer.compute_loss(sub_batch, method="actor_only_loss")
            else:
                loss_actor, _ = trainer.compute_loss(sub_batch, method="actor_loss")
            total = total + loss_actor
            self._last_actor_loss = loss_actor.detach()
        total.backward()
        grad_norm = self.grad_norm(trainer)
        self.optimizer_step(trainer.optimizer)
        return TensorDict(
            loss_qvalue=loss_qvalue.detach(),
            loss_actor=self._last_actor_loss,
            grad_norm=grad_norm.detach(),
        )

    def state_dict(self) -> dict[str, Any]:
        # the last actor loss is logged again on critic-only steps: an exact resume keeps it
        return {"count": self.count, "last_actor_loss": self._last_actor_loss.clone()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.count = int(state_dict["count"])
        if "last_actor_loss" in state_dict:
            self._last_actor_loss = torch.as_tensor(state_dict["last_actor_loss"]).clone()


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    actor_cells: Cells = (256, 256),
    critic_cells: Cells = (256, 256),
    activation: Activation = "relu",
    gamma: Discount = 0.99,
    policy_delay: PositiveInt = 2,
    exploration_noise: NonNegativeFloat = 0.1,
    policy_noise: NonNegativeFloat = 0.2,
    noise_clip: NonNegativeFloat = 0.5,
    loss_function: LossFunction = "l2",
    buffer_size: PositiveInt = 1_000_000,
    batch_size: PositiveInt = 256,
    utd: PositiveFloat = 1.0,
    init_random_frames: NonNegativeInt = 5_000,
    tau: OpenFraction = 0.005,
    lean: bool = True,
) -> AlgorithmParts:
    """Build TD3 for ``env`` (continuous actions only). Noise scales are fractions of the action
    half-range, as in the TD3 paper's [-1, 1] actions. ``lean`` (supplied by xdrl): xdrl's loss,
    exploration policy, replay buffer, target update and optimizer step, else TorchRL's
    ``TD3Loss``, ``TensorDictSequential(actor, noise)``, ``TensorDictReplayBuffer``,
    ``SoftUpdate`` and ``optimizer.step()``.

    Example:
        >>> parts = build(make_env("Pendulum-v1", num_envs=8), frames_per_batch=64)
    """
    require_continuous(env, "td3")
    low, high = action_bounds(env)
    scale = float(((high - low) / 2).max())
    act = activation_class(activation)
    actor = deterministic_actor(env, actor_cells, act, device)
    qvalue = action_value(env, critic_cells, act, device)
    loss = (LeanTD3Loss if lean else TD3Loss)(
        actor,
        qvalue,
        action_spec=env.full_action_spec_unbatched["action"],
        num_qvalue_nets=2,
        policy_noise=policy_noise * scale,
        noise_clip=noise_clip * scale,
        loss_function=loss_function,
        delay_actor=True,
        delay_qvalue=True,
        deactivate_vmap=True,  # a loop over the two Q-nets is faster on CPU than vmap (see sac)
    )
    loss.make_value_estimator(gamma=gamma)
    noise = AdditiveGaussianModule(
        env.full_action_spec_unbatched["action"],
        sigma_init=float(exploration_noise * scale),
        sigma_end=float(exploration_noise * scale),
        device=device,
    )
    updater = target_updater(loss, target_update="soft", tau=tau, hard_update_interval=1, lean=lean)
    stepper = DelayedActorStepper(policy_delay, lean=lean)
    return off_policy_parts(
        loss,
        policy=NoisyTanhActor(actor, noise) if lean else TensorDictSequential(actor, noise),
        eval_policy=actor,
        updater=updater,
        frames_per_batch=frames_per_batch,
        utd=utd,
        buffer_size=buffer_size,
        batch_size=batch_size,
        init_random_frames=init_random_frames,
        optimization_stepper=stepper,
        target_clock=stepper,  # targets move with the actor (TD3 paper, SB3)
        lean=lean,
    )
