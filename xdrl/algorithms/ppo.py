"""PPO: a lean copy of TorchRL's ClipPPOLoss with GAE, minibatches drawn without replacement from
each batch (the on-policy plumbing is in ``on_policy.py``)."""

from __future__ import annotations

from typing import Any, Literal

from torchrl.objectives import ClipPPOLoss
from torchrl.trainers import Trainer, TrainerHookBase

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
    PositiveFloat,
    PositiveInt,
    RecurrentCell,
)
from xdrl.lean.ppo_loss import LeanClipPPOLoss
from xdrl.lean.recurrent_ppo_loss import LeanRecurrentPPOLoss


def build(
    env,
    *,
    frames_per_batch: int,
    device: str = "cpu",
    actor_cells: Cells = (64, 64),
    critic_cells: Cells = (64, 64),
    activation: Activation = "tanh",
    encoder: Encoder = "auto",
    clip_epsilon: PositiveFloat = 0.2,
    entropy_coef: NonNegativeFloat = 0.0,
    critic_coef: NonNegativeFloat = 0.5,
    normalize_advantage: bool = True,
    gamma: Discount = 0.99,
    lmbda: Fraction = 0.95,
    epochs: PositiveInt = 10,
    minibatch_size: PositiveInt = 64,
    advantage_every_epoch: bool = False,
    reward_scale: PositiveFloat = 1.0,
    normalize_rewards: bool = False,
    clip_schedule: Literal["constant", "linear"] = "constant",
    recurrent: RecurrentCell | None = None,
    recurrent_hidden: PositiveInt = 64,
    recurrent_critic: bool = False,
    recurrent_head_cells: Cells = (),
    distribution: Literal["tanh_normal", "normal"] = "tanh_normal",
    log_std_init: FiniteFloat = 0.0,
    ortho_init: bool = True,
    lean: bool = True,
) -> AlgorithmParts:
    """Build PPO for ``env`` (discrete or continuous actions); image observations get a Nature
    CNN shared by actor and critic (``encoder``), ``clip_schedule: linear`` anneals the clip;
    ``recurrent`` (lstm | gru) puts a cell after the actor's encoder (and the critic's with
    ``recurrent_critic``) and trains on whole env rows (:mod:`xdrl.algorithms.recurrent`).
    ``distribution: normal``: continuous actions from a diagonal Gaussian with a learned
    state-independent log-std (from ``log_std_init``), the env clipping them (SB3's and
    RL-Zoo's MuJoCo PPO); ``ortho_init: false``: PyTorch's default initialization of the MLPs.
    ``lean`` (supplied by xdrl, the run's ``lean``): xdrl's loss, GAE and minibatch buffer, else
    TorchRL's ``ClipPPOLoss``, ``GAE`` and ``TensorDictReplayBuffer``.

    Example:
        >>> parts = build(make_env("CartPole-v1", num_envs=8), frames_per_batch=256)
    """
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
    # LeanClipPPOLoss: ClipPPOLoss's maths, 3x less time per call (see ppo_loss.py); with a cell,
    # the cells on padded pieces (recurrent_ppo_loss.py), or TorchRL's loss in recurrent mode
    loss_class: type[ClipPPOLoss]
    if recurrent:
        loss_class = LeanRecurrentClipPPOLoss if lean else RecurrentClipPPOLoss
    else:
        loss_class = LeanClipPPOLoss if lean else ClipPPOLoss
    loss = loss_class(
        actor,
        critic,
        clip_epsilon=clip_epsilon,
        entropy_bonus=entropy_coef > 0,
        entropy_coeff=entropy_coef if entropy_coef > 0 else None,
        critic_coeff=critic_coef,
        loss_critic_type="l2",
        normalize_advantage=normalize_advantage,
        functional=False,  # no per-call parameter swapping: 9% of a PPO step; xdrl needs no vmap
    )
    parts = on_policy_parts(
        loss,
        actor,
        critic,
        frames_per_batch=frames_per_batch,
        minibatch_size=minibatch_size,
        epochs=epochs,
        gamma=gamma,
        lmbda=lmbda,
        device=device,
        advantage_every_epoch=advantage_every_epoch,
        reward_scale=reward_scale,
        normalize_rewards=normalize_rewards,
        num_envs=int(env.batch_size[0]) if env.batch_size else 1,
        lean=lean,
    )
    if clip_schedule == "linear":
        parts.hooks.append((None, ClipAnnealingHook(loss)))
    return parts


class RecurrentClipPPOLoss(RecurrentLoss, ClipPPOLoss):
    """TorchRL's ``ClipPPOLoss`` run in recurrent mode (a recurrent actor or critic)."""


class LeanRecurrentClipPPOLoss(LeanRecurrentPPOLoss, RecurrentClipPPOLoss):
    """:class:`RecurrentClipPPOLoss` with the cells run on padded pieces where the networks fit
    (:mod:`xdrl.lean.recurrent_ppo_loss`); TorchRL's recurrent-mode forward otherwise."""


class ClipAnnealingHook(TrainerHookBase):
    """Anneal PPO's ``clip_epsilon`` linearly to 0 over the run, as SB3/RL-Zoo's ``lin_0.1``:
    before each batch's optimization, ``clip = clip0 * (1 - collected_frames / total_frames)``.
    Stateless (the value follows the trainer's frame counter; the loss's buffer is saved with
    the loss), so a resume that changed ``total_frames`` follows the new budget from the frames
    reached: the Trainer's ``total_frames`` is always the running command's.

    Args:
        loss: a ``ClipPPOLoss`` whose ``clip_epsilon`` buffer is updated in place.

    Example:
        >>> ClipAnnealingHook(loss).register(trainer)
    """

    schedule_name = "clip"  # a schedule over the budget: named when a resume changes it

    def __init__(self, loss) -> None:
        self.loss = loss
        self.initial = float(loss.clip_epsilon)
        self._trainer: Trainer | None = None

    def value(self, frames: int, total_frames: int) -> float:
        """The clip a batch trains with once ``frames`` of ``total_frames`` are collected."""
        return self.initial * max(0.0, 1.0 - frames / total_frames)

    def __call__(self) -> None:
        trainer = self._trainer
        if trainer is None:
            return
        self.loss.clip_epsilon.fill_(self.value(trainer.collected_frames, trainer.total_frames))

    def register(self, trainer: Trainer, name: str = "clip_annealing") -> None:
        self._trainer = trainer
        trainer.register_op("pre_optim_steps", self)

    def state_dict(self) -> dict[str, Any]:
        return {"initial": self.initial}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.initial = float(state_dict["initial"])
