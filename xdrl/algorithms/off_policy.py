"""Pieces shared by the off-policy algorithms (DQN, SAC, TD3): replay buffer, target networks,
update-to-data ratio and exploration annealing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey
from torchrl.data import TensorDictReplayBuffer
from torchrl.objectives import HardUpdate, SoftUpdate
from torchrl.trainers import ReplayBufferTrainer, TargetNetUpdaterHook, Trainer, TrainerHookBase

from xdrl.algorithms.common import AlgorithmParts
from xdrl.config.errors import ConfigError
from xdrl.lean.frame_replay import FrameReplayBuffer
from xdrl.lean.replay import FilledTensorStorage, GrowingRoundRobinWriter, LeanReplayBuffer

KEY = "algorithm.build"


def replay_buffer(
    buffer_size: int,
    batch_size: int,
    keys: Sequence[NestedKey] | None = None,
    *,
    lean: bool = True,
) -> ReplayBufferTrainer:
    """A uniform replay buffer of ``buffer_size`` transitions, sampled ``batch_size`` at a time,
    storing only ``keys`` when given (the loss's ``in_keys``); a checkpoint holds its filled
    rows, not its capacity (:class:`FilledTensorStorage`). Not ``lean``: TorchRL's
    ``TensorDictReplayBuffer`` storing whole transitions (on the same storage: checkpoint
    size is not speed)."""
    if batch_size > buffer_size:
        raise ConfigError(
            f"{KEY}.batch_size", f"must be in [1, buffer_size={buffer_size}], got {batch_size}"
        )
    storage = FilledTensorStorage(buffer_size)
    writer = GrowingRoundRobinWriter()  # a buffer_size: all buffer grows with a raised budget
    if not lean:
        return ReplayBufferTrainer(
            TensorDictReplayBuffer(storage=storage, batch_size=batch_size, writer=writer),
            flatten_tensordicts=True,
        )
    buffer = LeanReplayBuffer(storage=storage, batch_size=batch_size, keys=keys, writer=writer)
    return ReplayBufferTrainer(buffer, flatten_tensordicts=True)


def optim_steps(utd: float, frames_per_batch: int) -> int:
    """Optimizer steps per collected batch for an update-to-data ratio (at least one)."""
    return max(1, round(utd * frames_per_batch))


class LeanSoftUpdate(SoftUpdate):
    """TorchRL's ``SoftUpdate`` whose ``step`` is one ``torch._foreach_lerp_`` over the target
    and source tensors, looked up once.

    Why: ``SoftUpdate.step`` walks the loss's target and source TensorDicts and lerps them
    TensorDict-wise every optimizer step; on the SAC Pendulum workload that was ~0.8 ms of a
    step in cProfile (1 thread) for ~50 us of arithmetic. The tensors are updated in place
    (optimizer steps, ``load_state_dict``), so the lists stay valid. Same update (tested
    against ``SoftUpdate``).

    Example:
        >>> LeanSoftUpdate(loss, tau=0.005).step()
    """

    def init_(self) -> None:
        super().init_()
        self._pairs = target_source_lists(self)

    def step(self) -> None:
        targets, sources = self._pairs
        with torch.no_grad():
            torch._foreach_lerp_(targets, sources, 1 - self.eps)


class LeanHardUpdate(HardUpdate):
    """TorchRL's ``HardUpdate`` (copy every ``value_network_update_interval`` steps, counted
    the same way) with one ``torch._foreach_copy_`` over tensor lists looked up once, and no
    TensorDict walk on the steps that copy nothing (DQN calls it after each of its 128 gradient
    steps per batch). Same update (tested against ``HardUpdate``).

    Example:
        >>> LeanHardUpdate(loss, value_network_update_interval=128).step()
    """

    def init_(self) -> None:
        super().init_()
        self._pairs = target_source_lists(self)

    counter: int  # set by HardUpdate.__init__

    def step(self) -> None:
        if self.counter == self.value_network_update_interval:
            targets, sources = self._pairs
            with torch.no_grad():
                torch._foreach_copy_(targets, sources)
            self.counter = 0
        else:
            self.counter += 1


def target_source_lists(updater: SoftUpdate | HardUpdate) -> tuple[list, list]:
    """The updater's target tensors and their sources, as two aligned lists."""
    pairs = []
    for key, source in updater._sources.items(True, True):
        key = key if isinstance(key, tuple) else (key,)
        pairs.append((updater._targets.get(("target_" + key[0], *key[1:])), source))
    return [t for t, _ in pairs], [s for _, s in pairs]


def target_updater(
    loss_module, *, target_update: str, tau: float, hard_update_interval: int, lean: bool = True
):
    """SoftUpdate (Polyak ``tau`` per update) or HardUpdate (copy every
    ``hard_update_interval`` updates), xdrl's lean ones or (not ``lean``) TorchRL's;
    :class:`TargetUpdateHook` calls it."""
    if target_update == "soft":
        return (LeanSoftUpdate if lean else SoftUpdate)(loss_module, tau=tau)
    hard = LeanHardUpdate if lean else HardUpdate
    return hard(loss_module, value_network_update_interval=hard_update_interval)


def off_policy_hooks(
    buffer: ReplayBufferTrainer | FrameReplayBuffer, updater, target_clock: Any = None
) -> list[tuple[str | None, Any]]:
    """Extend the buffer per batch, sample a minibatch per optimizer step, then update targets
    (every step, or on ``target_clock``'s, see :class:`TargetUpdateHook`)."""
    return [
        ("batch_process", buffer.extend),
        ("process_optim_batch", buffer.sample),
        (None, TargetUpdateHook(updater, clock=target_clock)),
    ]


class TargetUpdateHook(TargetNetUpdaterHook):
    """TorchRL's ``TargetNetUpdaterHook`` after every optimizer step, or only where ``clock``
    says so (TD3 moves its targets with the actor, every ``policy_delay`` steps), checkpointed:
    a ``HardUpdate`` counts steps since its last copy, which an exact resume must keep.

    Args:
        target_params_updater: a ``SoftUpdate`` or ``HardUpdate``.
        clock: an object whose ``actor_step()`` says whether the optimizer step just taken
            updated the actor, and so moves the targets (TD3's ``DelayedActorStepper``, which
            checkpoints its step count: the phase survives a resume); None: every step.

    Example:
        >>> TargetUpdateHook(HardUpdate(loss, value_network_update_interval=10)).register(trainer)
    """

    def __init__(self, target_params_updater, clock: Any = None) -> None:
        super().__init__(target_params_updater)
        self.clock = clock

    def __call__(self, tensordict=None):
        if self.clock is None or self.clock.actor_step():
            self.target_params_updater.step()
        return tensordict

    def register(self, trainer: Trainer, name: str = "target_updater") -> None:
        trainer.register_op("post_optim", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"counter": int(getattr(self.target_params_updater, "counter", 0))}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if hasattr(self.target_params_updater, "counter"):
            self.target_params_updater.counter = int(state_dict["counter"])


def off_policy_parts(
    loss_module,
    *,
    policy,
    eval_policy,
    updater,
    frames_per_batch: int,
    utd: float,
    buffer_size: int,
    batch_size: int,
    init_random_frames: int,
    extra_hooks: Sequence[tuple[str | None, Any]] = (),
    optimization_stepper: Any = None,
    value_gamma: float | None = None,
    frame_stack: int | None = None,
    target_clock: Any = None,
    lean: bool = True,
) -> AlgorithmParts:
    """The parts of an off-policy method: a replay buffer (checkpointed), ``utd`` optimizer steps
    per collected frame, target updates by ``updater`` (after every optimizer step, or where
    ``target_clock`` says, see :class:`TargetUpdateHook`), then ``extra_hooks``.
    ``frame_stack``: observations are stacks of that many frames, kept once each
    (:class:`FrameReplayBuffer`) unless not ``lean``: TorchRL's buffer keeps whole stacks."""
    keys = getattr(loss_module, "in_keys", None)
    buffer: Any = replay_buffer(buffer_size, batch_size, keys, lean=lean)
    if lean and frame_stack is not None:
        buffer = FrameReplayBuffer(buffer_size, batch_size, stack=frame_stack)
    return AlgorithmParts(
        policy=policy,
        eval_policy=eval_policy,
        loss_module=loss_module,
        optim_steps_per_batch=optim_steps(utd, frames_per_batch),
        hooks=[*off_policy_hooks(buffer, updater, target_clock), *extra_hooks],
        modules={"replay_buffer": buffer},
        init_random_frames=init_random_frames,
        optimization_stepper=optimization_stepper,
        value_gamma=value_gamma,
    )


class ExplorationAnnealingHook(TrainerHookBase):
    """Anneal an exploration module (``EGreedyModule``, ``AdditiveGaussianModule``) by frames.

    TorchRL's modules anneal through ``module.step(frames)``; ``DQNTrainer`` does it in a private
    method, so this hook does the same for a plain Trainer: at ``post_steps`` it steps the module
    by the frames collected since its last call.

    Args:
        module: the exploration module; its ``step(frames)`` advances the schedule.

    Example:
        >>> greedy = EGreedyModule(spec, annealing_num_steps=10_000)
        >>> ExplorationAnnealingHook(greedy).register(trainer)
    """

    def __init__(self, module) -> None:
        self.module = module
        self.last_frames = 0
        self._trainer: Trainer | None = None

    def __call__(self) -> None:
        frames = int(self._trainer.collected_frames) if self._trainer is not None else 0
        if frames > self.last_frames:
            self.module.step(frames - self.last_frames)
            self.last_frames = frames

    def register(self, trainer: Trainer, name: str = "exploration_annealing") -> None:
        self._trainer = trainer
        trainer.register_op("post_steps", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"last_frames": self.last_frames, "module": self.module.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_frames = int(state_dict["last_frames"])
        self.module.load_state_dict(state_dict["module"])
