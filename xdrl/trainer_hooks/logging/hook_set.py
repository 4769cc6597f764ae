"""The default xdrl logging hooks as one object, with iteration timers."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tensordict import TensorDictBase
from torchrl.trainers.trainers import Trainer, TrainerHookBase

from ._common import DEFAULT_DONE_KEY, TIMERS_PREFIX
from .collection import LoggingCollectionMetricsHook
from .counters import TOTAL_FRAMES_KEY, LoggingCountersHook
from .evaluation_set import LoggingEvaluationHookSet
from .progress import LoggingProgressMetricsHook
from .training import LoggingTrainingMetricsHook

COLLECTION_TIME_KEY = f"{TIMERS_PREFIX}/collection_time"
TRAINING_TIME_KEY = f"{TIMERS_PREFIX}/training_time"
ITERATION_TIME_KEY = f"{TIMERS_PREFIX}/iteration_time"
EVAL_TIME_KEY = f"{TIMERS_PREFIX}/eval_time"
TOTAL_TIME_KEY = f"{TIMERS_PREFIX}/total_time"
FPS_KEY = f"{TIMERS_PREFIX}/fps"


class LoggingHookSet(TrainerHookBase):
    """Compose the default xdrl logging hooks.

    Registers, in this order: the timer start (``batch_process``); counters, collection
    metrics and progress metrics (``pre_steps_log``); training metrics
    (``post_optim_complete_log``); the evaluation hooks, then the timer end
    (``post_steps_log``). The set itself is registered as a trainer module, so its
    ``state_dict`` (children included) goes into TorchRL checkpoints. Timer keys (seconds):
    ``timers/collection_time`` (previous iteration end to batch arrival),
    ``timers/training_time`` (batch arrival to the end of ``post_steps_log``, evaluation
    excluded), ``timers/iteration_time`` (their sum), ``timers/eval_time`` (only when an
    evaluation ran), ``timers/total_time`` (wall time since training started, evaluation
    included, kept across resumes) and ``timers/fps`` (frames of the iteration / iteration
    time).

    Args:
        group: metric group (``collection/<group>``, ``train/<group>``).
        frame_skip: action repeat, for the frame counters.
        reward_key: per-step reward key; None means ``("next", "reward")``.
        done_key: end-of-episode flag.
        episode_reward_key: cumulative episode reward; None means ``("next", "episode_reward")``.
        episode_reward_weights: scalarization weights of a vector reward.
        reduce_stats: False logs only ``_mean`` keys of vector metrics.
        eval_hook_set: evaluation hooks, or None for no evaluation.

    Example:
        >>> hooks = LoggingHookSet(group="agents", frame_skip=1, eval_hook_set=evals)
        >>> hooks.register(trainer)
        >>> hooks.run_pre_eval()  # step 0, before trainer.train()
        >>> trainer.train()
        >>> hooks.close()
    """

    def __init__(
        self,
        *,
        group: str,
        frame_skip: int,
        reward_key: tuple[str, ...] | None = None,
        done_key: tuple[str, ...] = DEFAULT_DONE_KEY,
        episode_reward_key: tuple[str, ...] | None = None,
        episode_reward_weights: Sequence[float] | None = None,
        reduce_stats: bool | None = None,
        eval_hook_set: LoggingEvaluationHookSet | None = None,
    ) -> None:
        self.group = group
        self.collection_hook = LoggingCollectionMetricsHook(
            group=group,
            reward_key=reward_key,
            done_key=done_key,
            episode_reward_key=episode_reward_key,
            episode_reward_weights=episode_reward_weights,
            reduce_stats=reduce_stats,
        )
        self.training_hook = LoggingTrainingMetricsHook(group=group, reduce_stats=reduce_stats)
        self.counters_hook = LoggingCountersHook(frame_skip=frame_skip)
        self.progress_hook = LoggingProgressMetricsHook(
            group=group,
            counters_hook=self.counters_hook,
            reward_key=episode_reward_key,
            episode_reward_weights=episode_reward_weights,
            done_key=done_key,
        )
        self.eval_hook_set = eval_hook_set
        self.trainer: Trainer | None = None
        self._iteration_start: float | None = None
        self._previous_iteration_end: float | None = None
        self._collection_time = 0.0
        self._total_time = 0.0

    # Timers
    def _timers_setup(self) -> None:
        self._previous_iteration_end = time.perf_counter()
        if self.eval_hook_set is not None:
            self.eval_hook_set.pop_eval_time()  # the pre-training evaluation is not timed

    def _timers_start(self, batch: TensorDictBase) -> TensorDictBase:
        now = time.perf_counter()
        previous = self._previous_iteration_end
        self._collection_time = 0.0 if previous is None else now - previous
        self._iteration_start = now
        return batch

    def _timers_end(self, _batch: TensorDictBase) -> dict[str, float]:
        now = time.perf_counter()
        start = self._iteration_start if self._iteration_start is not None else now
        eval_time = self.eval_hook_set.pop_eval_time() if self.eval_hook_set else 0.0
        training = max(now - start - eval_time, 0.0)
        iteration = self._collection_time + training
        self._total_time += self._collection_time + (now - start)
        self._previous_iteration_end = now
        frames = self.counters_hook.last_current_frames
        out = {
            COLLECTION_TIME_KEY: self._collection_time,
            TRAINING_TIME_KEY: training,
            ITERATION_TIME_KEY: iteration,
            TOTAL_TIME_KEY: self._total_time,
            FPS_KEY: frames / iteration if iteration > 0 else 0.0,
        }
        if eval_time > 0:
            out[EVAL_TIME_KEY] = eval_time
        return out

    # Registration
    def register(self, trainer: Trainer, name: str = "logging_hooks") -> None:
        self.trainer = trainer
        trainer.register_op("setup", self._timers_setup)
        trainer.register_op("batch_process", self._timers_start)
        self.counters_hook.register_ops(trainer)
        self.collection_hook.register_ops(trainer)
        self.progress_hook.register_ops(trainer)
        self.training_hook.register_ops(trainer)
        if self.eval_hook_set is not None:
            self.eval_hook_set.register_ops(trainer)
        trainer.register_op("post_steps_log", self._timers_end)
        trainer.register_module(name, self)

    def run_pre_eval(self) -> dict[str, float]:
        """Evaluate the untrained policy, log at step 0 and return the metrics.

        Returns ``{}`` without evaluating when there is no evaluation or when the registered
        trainer has already collected frames (a resumed run).
        """
        if self.eval_hook_set is None:
            return {}
        if self.trainer is not None and self.trainer.collected_frames > 0:
            return {}
        metrics = self.eval_hook_set.run(step=0)
        logger = self.eval_hook_set.logger
        if logger is not None:  # the step-0 row carries the frame counter like every other row
            logger.log_scalar(TOTAL_FRAMES_KEY, 0, step=0)
        return metrics

    def close(self) -> None:
        if self.eval_hook_set is not None:
            self.eval_hook_set.close()

    def state_dict(self) -> dict[str, Any]:
        return {
            "counters": self.counters_hook.state_dict(),
            "collection": self.collection_hook.state_dict(),
            "training": self.training_hook.state_dict(),
            "progress": self.progress_hook.state_dict(),
            "timers": {"total_time": self._total_time},
            "eval": {} if self.eval_hook_set is None else self.eval_hook_set.state_dict(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.counters_hook.load_state_dict(state_dict["counters"])
        self.collection_hook.load_state_dict(state_dict.get("collection", {}))
        self.training_hook.load_state_dict(state_dict.get("training", {}))
        self.progress_hook.load_state_dict(state_dict.get("progress", {}))
        self._total_time = float(state_dict["timers"]["total_time"])
        if self.eval_hook_set is not None:
            self.eval_hook_set.load_state_dict(state_dict.get("eval", {}))
