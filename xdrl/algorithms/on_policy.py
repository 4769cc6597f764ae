"""Pieces shared by the on-policy algorithms (PPO, A2C): actor and critic, GAE, reward scaling,
minibatches drawn without replacement from each batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict.nn import TensorDictSequential
from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
from torchrl.modules import ProbabilisticActor, ValueOperator
from torchrl.objectives.value import GAE
from torchrl.trainers import ReplayBufferTrainer, ValueEstimatorHook

from xdrl.algorithms.common import (
    AlgorithmParts,
    action_nvec,
    action_space_name,
    activation_class,
    check_distribution,
    image_torso,
    state_value,
    stochastic_actor,
)
from xdrl.algorithms.encoders import has_image_encoder
from xdrl.algorithms.recurrent import (
    Cell,
    RecurrentGAE,
    env_rows,
    is_recurrent,
    recurrent_actor,
)
from xdrl.algorithms.recurrent import recurrent_critic as recurrent_critic_module
from xdrl.algorithms.reward_norm import TRAIN_REWARD_KEY, ReturnNormalization
from xdrl.config.errors import ConfigError
from xdrl.lean.gae import advantages
from xdrl.lean.mlp_forward import MLPForward
from xdrl.lean.replay import LeanReplayBuffer


class WholeBatch:
    """The whole flattened batch as every epoch's one minibatch (``minibatch_size ==
    frames_per_batch``).

    Why not TorchRL's buffer here: sampling the full storage without replacement only permutes
    it, and a full-batch gradient does not depend on the order, yet ``TensorDictReplayBuffer``
    spends about 11% of a CartPole PPO step (RL-Zoo settings) on the write, the permutation and the
    indexing. ``extend``/``sample`` keep the ``ReplayBufferTrainer`` hook signatures.
    """

    def __init__(self) -> None:
        self._batch = None

    def extend(self, batch):
        """Keep the flattened batch; returns the batch unchanged (a ``batch_process`` hook)."""
        self._batch = batch.reshape(-1)
        return batch

    def sample(self, _batch=None):
        """The kept batch (a ``process_optim_batch`` hook)."""
        return self._batch


def minibatch_buffer(
    frames_per_batch: int, minibatch_size: int, key: str, *, lean: bool = True
) -> ReplayBufferTrainer | WholeBatch:
    """One batch, sampled in minibatches without replacement (one epoch = one pass); not
    ``lean``: TorchRL's ``TensorDictReplayBuffer``, also for a whole-batch minibatch."""
    if minibatch_size < 1 or frames_per_batch % minibatch_size:
        raise ConfigError(
            key, f"{minibatch_size} must be positive and divide frames_per_batch={frames_per_batch}"
        )
    if lean and minibatch_size == frames_per_batch:
        return WholeBatch()
    buffer = (LeanReplayBuffer if lean else TensorDictReplayBuffer)(
        storage=LazyTensorStorage(frames_per_batch),
        sampler=SamplerWithoutReplacement(drop_last=True),
        batch_size=minibatch_size,
    )
    return ReplayBufferTrainer(buffer, flatten_tensordicts=True)


class SamplerState:
    """The minibatch sampler's state as a checkpointed module: when a permutation runs out the
    sampler draws the next one before the checkpoint, so an exact resume needs it. The storage
    is not saved: every batch overwrites it whole.

    Args:
        buffer: the ``ReplayBufferTrainer`` of :func:`minibatch_buffer`.

    Example:
        >>> trainer.register_module("minibatch_sampler", SamplerState(buffer))
    """

    def __init__(self, buffer: ReplayBufferTrainer) -> None:
        self.sampler = buffer.replay_buffer.sampler

    def state_dict(self) -> dict[str, Any]:
        return dict(self.sampler.state_dict())

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state_dict)


def buffer_modules(buffer: ReplayBufferTrainer | WholeBatch) -> dict[str, SamplerState]:
    """Checkpointed modules of a minibatch buffer (none for :class:`WholeBatch`)."""
    if isinstance(buffer, ReplayBufferTrainer):
        return {"minibatch_sampler": SamplerState(buffer)}
    return {}


class RewardScale:
    """Write ``("next", "train_reward") = scale * ("next", "reward")`` for the value targets.

    The loss learns from the scaled copy while every logged reward stays in the env's units
    (TorchRL's ``RewardScaling`` transform would rescale the logged and evaluated rewards too).
    """

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, batch):
        batch.set(("next", TRAIN_REWARD_KEY), batch.get(("next", "reward")) * self.scale)
        return batch


def use_reward_scale(
    loss_module, reward_scale: float, normalizer: ReturnNormalization | None = None
) -> list:
    """Point the loss and its value estimator at the scaled (or normalized) reward (call after
    ``make_value_estimator``); returns the batch_process hook that writes it."""
    if normalizer is None and reward_scale == 1.0:
        return []
    loss_module.set_keys(reward=TRAIN_REWARD_KEY)
    loss_module.value_estimator.set_keys(reward=TRAIN_REWARD_KEY)
    return [("batch_process", normalizer or RewardScale(reward_scale))]


class OnePassGAE:
    """GAE whose critic runs once per distinct observation: ``V(obs)`` for the whole batch, and
    ``V(next_obs)`` only where an episode ended or the batch ends; elsewhere the next
    observation is the next step's observation, so its value is the next step's value.

    Why: TorchRL's ``GAE`` evaluates the critic on ``observation`` and ``("next",
    "observation")``, two passes over the batch. With a Nature CNN that is the second most
    expensive part of an Atari PPO batch (~2 s of ~9 s per 1,024 frames at 1 thread here);
    this halves it. Same values and advantages as TorchRL's path (tested).

    Args:
        critic: the ``ValueOperator``; its module maps observations to values.
        gae: a TorchRL ``GAE`` without value network (it reads the values written here).

    Example:
        >>> hook = OnePassGAE(critic, GAE(gamma=0.99, lmbda=0.95, value_network=None))
        >>> batch = hook(batch)  # state_value, ("next", "state_value"), advantage, value_target
    """

    chunk = 256  # rows per critic pass (see _values)

    def __init__(self, critic: ValueOperator, gae: GAE) -> None:
        self.net = critic.module
        self.value_key = critic.out_keys[0]
        self.gae = gae

    def __call__(self, batch):
        observation = batch.get("observation")
        next_observation = batch.get(("next", "observation"))
        fresh = batch.get(("next", "done")).squeeze(-1).clone()  # [envs, steps]
        fresh[..., -1] = True
        with torch.no_grad():
            value = self._values(observation, batch.ndim)
            next_value = torch.empty_like(value)
            next_value[..., :-1, :] = value[..., 1:, :]
            next_value[fresh] = self._values(next_observation[fresh], 1).to(value.dtype)
        batch.set(self.value_key, value)
        batch.set(("next", self.value_key), next_value)
        return advantages(self.gae, batch)

    def _values(self, observation: torch.Tensor, lead: int) -> torch.Tensor:
        """The critic on ``observation`` (``lead`` batch dims) in passes of :attr:`chunk` rows.

        Why: one pass over a whole Atari batch allocates float tensors of 100+ MB (1,024 frames
        of 4x84x84 as float32 are 116 MB), which the allocator maps fresh on every call; in
        passes of 256 rows the buffers are reused. A Nature CNN critic on 1,024 frames took 275
        ms in one pass and 135 ms in passes of 256 (64: 170, 128: 143, 512: 202; 2 threads,
        AMD EPYC), with bit-identical values.
        """
        shape = observation.shape
        flat = observation.reshape(-1, *shape[lead:])
        values = torch.cat([self.net(rows) for rows in flat.split(self.chunk)])
        return values.reshape(*shape[:lead], *values.shape[1:])


class StackedValueGAE:
    """TorchRL's ``GAE`` whose critic runs on ``observation`` and ``("next", "observation")``
    stacked into one plain tensor pass, as its vmap over the two does, without the vmap.

    Why: on RL-Zoo's CartPole PPO workload (256 frames, 64x64 critic) ``ValueEstimatorHook``
    took 1.11 ms per batch, 0.46 ms of it the TensorDict stacking, selection and vmap around
    the value network; with the values computed here it took 0.64 ms, and 0.40 ms with the
    recursion in NumPy (:func:`xdrl.lean.gae.advantages`; same process, alternated, 1
    thread). Values, advantages and targets are bit for bit TorchRL's (tested): the critic
    computes the same rows and the recursion does TorchRL's float32 operations in its order.
    Like TorchRL, a NaN next observation (a compact collector's missing final one) is replaced
    by its step's observation.

    Args:
        critic: the ``ValueOperator`` (reads ``observation``); its module maps observations to
            values.
        gae: a TorchRL ``GAE`` without value network (it reads the values written here).

    Example:
        >>> hook = StackedValueGAE(critic, GAE(gamma=0.98, lmbda=0.8, value_network=None))
        >>> batch = hook(batch)  # state_value, ("next", "state_value"), advantage, value_target
    """

    def __init__(self, critic: ValueOperator, gae: GAE) -> None:
        self.net = MLPForward(critic.module)
        self.value_key = critic.out_keys[0]
        self.gae = gae

    def __call__(self, batch):
        observation = batch.get("observation")
        next_observation = batch.get(("next", "observation"))
        if next_observation.is_floating_point() and next_observation.isnan().any():
            next_observation = torch.where(next_observation.isnan(), observation, next_observation)
        with torch.no_grad():
            values = self.net(torch.stack([observation, next_observation]))
        batch.set(self.value_key, values[0])
        batch.set(("next", self.value_key), values[1])
        return advantages(self.gae, batch)


def _stateless_gae(loss_module) -> GAE:
    """A ``GAE`` with the loss's discount, lambda and keys that reads precomputed values."""
    estimator = loss_module.value_estimator
    gae = GAE(
        gamma=float(estimator.gamma),
        lmbda=float(estimator.lmbda),
        value_network=None,
        average_gae=False,
    )
    gae.set_keys(reward=estimator.tensor_keys.reward, value=loss_module.tensor_keys.value)
    return gae


def on_policy_hooks(
    loss_module,
    buffer: ReplayBufferTrainer | WholeBatch,
    *,
    advantage_every_epoch: bool,
    scale_hooks: list | None = None,
    lean: bool = True,
):
    """Reward scaling, GAE then buffer extend (per batch, or per epoch), minibatch sampling;
    one critic pass per observation (:class:`OnePassGAE`) for image critics, one stacked pass
    (:class:`StackedValueGAE`) for the others; not ``lean``: TorchRL's ``GAE`` through its
    ``ValueEstimatorHook``."""
    critic = loss_module.critic_network
    value_hook: Any
    if not lean:
        value_hook = ValueEstimatorHook(loss_module.value_estimator)
    elif has_image_encoder(critic):
        value_hook = OnePassGAE(critic, _stateless_gae(loss_module))
    elif list(critic.in_keys) == ["observation"]:
        value_hook = StackedValueGAE(critic, _stateless_gae(loss_module))
    else:
        value_hook = ValueEstimatorHook(loss_module.value_estimator)
    stage = "pre_epoch" if advantage_every_epoch else "batch_process"
    return [
        *(scale_hooks or []),
        (stage, value_hook),
        (stage, buffer.extend),
        ("process_optim_batch", buffer.sample),
    ]


def actor_critic(
    env,
    actor_cells: Sequence[int],
    critic_cells: Sequence[int],
    activation: str,
    device: str,
    encoder: str = "auto",
    recurrent: Cell | None = None,
    recurrent_hidden: int = 64,
    recurrent_critic: bool = False,
    recurrent_head_cells: Sequence[int] = (),
    distribution: str = "tanh_normal",
    log_std_init: float = 0.0,
    ortho_init: bool = True,
) -> tuple[ProbabilisticActor, Any]:
    """A stochastic actor and a state-value critic for ``env`` (built in that order: seeds);
    for images, both heads on one shared Nature CNN (CleanRL's and RL-Zoo's Atari PPO).
    ``recurrent`` (lstm | gru): a cell of ``recurrent_hidden`` units after the actor's encoder,
    and after the critic's with ``recurrent_critic``, followed by ``recurrent_head_cells`` hidden
    layers before each linear output (:mod:`xdrl.algorithms.recurrent`). ``distribution``,
    ``log_std_init`` and ``ortho_init``: the continuous actor and the MLPs' initialization
    (:func:`~xdrl.algorithms.common.stochastic_actor`)."""
    act = activation_class(activation)
    check_distribution(env, distribution, log_std_init, recurrent)
    if recurrent is not None and not ortho_init:
        raise ConfigError(
            "algorithm.build.ortho_init",
            "false is not available with a recurrent actor yet; set "
            "algorithm.build.ortho_init=true or algorithm.build.recurrent=null",
        )
    torso = image_torso(env, encoder, device)
    if recurrent is None:
        if recurrent_critic:
            raise ConfigError(
                "algorithm.build.recurrent_critic",
                "needs a recurrent actor; set algorithm.build.recurrent=lstm (or gru) or "
                "recurrent_critic=false",
            )
        actor = stochastic_actor(
            env,
            actor_cells,
            act,
            device,
            torso,
            distribution=distribution,
            log_std_init=log_std_init,
            ortho_init=ortho_init,
        )
        critic = state_value(env, critic_cells, act, device, torso, ortho_init=ortho_init)
        return actor, critic
    if action_nvec(env) is not None:
        raise ConfigError(
            "algorithm.build.recurrent",
            f"recurrent policies take one Discrete or a Box action, not {action_space_name(env)}; "
            "set algorithm.build.recurrent=null (independent categoricals per dimension)",
        )
    hidden, head = recurrent_hidden, recurrent_head_cells
    actor = recurrent_actor(
        env, actor_cells, act, device, cell=recurrent, hidden=hidden, head_cells=head, torso=torso
    )
    if not recurrent_critic:
        return actor, state_value(env, critic_cells, act, device, torso)
    critic = recurrent_critic_module(
        env, critic_cells, act, device, cell=recurrent, hidden=hidden, head_cells=head, torso=torso
    )
    return actor, critic


def on_policy_parts(
    loss,
    actor,
    critic,
    *,
    frames_per_batch: int,
    minibatch_size: int,
    epochs: int,
    gamma: float,
    lmbda: float,
    device: str,
    advantage_every_epoch: bool = False,
    reward_scale: float = 1.0,
    normalize_rewards: bool = False,
    num_envs: int = 1,
    lean: bool = True,
) -> AlgorithmParts:
    """GAE on ``critic``, the reward scale (or normalization: :class:`ReturnNormalization`,
    saved with checkpoints), the minibatch buffer and the parts around ``loss`` (whole env rows
    and recurrent-mode values for a recurrent actor: :func:`recurrent_parts`; ``lean``: xdrl's
    GAE and buffer, else TorchRL's)."""
    loss.make_value_estimator(
        GAE, gamma=gamma, lmbda=lmbda, value_network=critic, average_gae=False, device=device
    )
    normalizer = ReturnNormalization(gamma, scale=reward_scale) if normalize_rewards else None
    scale_hooks = use_reward_scale(loss, reward_scale, normalizer)
    if is_recurrent(actor):
        parts = recurrent_parts(
            loss,
            actor,
            critic,
            scale_hooks,
            frames_per_batch=frames_per_batch,
            minibatch_size=minibatch_size,
            epochs=epochs,
            num_envs=num_envs,
            advantage_every_epoch=advantage_every_epoch,
        )
    else:
        buffer = minibatch_buffer(
            frames_per_batch, minibatch_size, "algorithm.build.minibatch_size", lean=lean
        )
        parts = AlgorithmParts(
            policy=actor,
            eval_policy=actor,
            loss_module=loss,
            optim_steps_per_batch=frames_per_batch // minibatch_size,
            num_epochs=epochs,
            hooks=on_policy_hooks(
                loss,
                buffer,
                advantage_every_epoch=advantage_every_epoch,
                scale_hooks=scale_hooks,
                lean=lean,
            ),
            modules=buffer_modules(buffer),
        )
    if normalizer is not None:
        parts.modules["reward_normalizer"] = normalizer
    return parts


def recurrent_parts(
    loss,
    actor,
    critic,
    scale_hooks: list,
    *,
    frames_per_batch: int,
    minibatch_size: int,
    epochs: int,
    num_envs: int,
    advantage_every_epoch: bool,
) -> AlgorithmParts:
    """The parts of a recurrent actor: minibatches of whole env rows (:class:`EnvRows`), GAE
    with the critic run over sequences when it is recurrent (:class:`RecurrentGAE`), and a
    collection policy that runs a recurrent critic beside the actor, so the env carries and the
    batch stores its state too."""
    rows = env_rows(frames_per_batch, num_envs, minibatch_size)
    gae = _stateless_gae(loss)
    value_hook: Any
    if is_recurrent(critic):
        value_hook = RecurrentGAE(critic, gae, loss.tensor_keys.value)
        policy: Any = TensorDictSequential(actor, critic)
    else:
        value_hook = (OnePassGAE if has_image_encoder(critic) else StackedValueGAE)(critic, gae)
        policy = actor
    stage = "pre_epoch" if advantage_every_epoch else "batch_process"
    return AlgorithmParts(
        policy=policy,
        eval_policy=actor,
        loss_module=loss,
        optim_steps_per_batch=frames_per_batch // minibatch_size,
        num_epochs=epochs,
        hooks=[
            *scale_hooks,
            (stage, value_hook),
            (stage, rows.extend),
            ("process_optim_batch", rows.sample),
        ],
    )
