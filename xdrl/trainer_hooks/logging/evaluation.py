"""Evaluation hooks: roll the policy out on its own env, log ``eval/<subgroup>/`` metrics."""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.checkpoint import GlobalRNGState
from torchrl.envs import EnvBase
from torchrl.trainers.trainers import Trainer

from xdrl.trainer_hooks.base import XdrlHook
from xdrl.training.env_state import gym_envs

from . import render as _render
from ._common import EVAL_PREFIX, VIDEO_NAME
from .evaluation_metrics import (
    EvaluationInterrupted,
    evaluation_rollout,
    rollout_metrics,
    unfinished_episodes,
)
from .video import FrameRecorder, log_video

log = logging.getLogger(__name__)


def close_env(env: Any) -> None:
    """Close ``env`` unless it is None or already closed; a failure is only logged."""
    if env is None or getattr(env, "is_closed", False):
        return
    try:
        env.close()
    except Exception as err:  # noqa: BLE001 - closing is best effort
        log.warning("closing the evaluation env failed: %s", err)


class LoggingEvaluationMetricsHook(XdrlHook):
    """Run periodic evaluation and log metrics under ``eval/<subgroup>/``.

    Every ``interval_frames`` collected frames, after the last batch, and when :meth:`run` is
    called (e.g. before training), the policy plays one episode per sub-environment of
    ``environment`` (only each sub-env's first episode counts; the rollout stops once all
    finished, or after ``max_steps``; an unfinished episode counts with its partial return)
    under ``torch.no_grad()`` and deterministic or random exploration. Keys:
    ``eval/<subgroup>/reward/episode_reward_{min,mean,max}`` (sum of the scalar reward at
    ``reward_key``), ``eval/<subgroup>/episode_len_mean``, per-objective
    ``eval/<subgroup>/reward/objective_<i>/episode_reward_*`` (from a vector
    ``("next", "episode_reward")``) and, with ``render``, ``eval/<subgroup>/video`` (first
    sub-env, logged with ``logger.log_video``; a render failure only warns).

    A stop asked of the Trainer (``trainer.request_stop``: SIGINT, SIGTERM, SLURM's USR2) ends a
    running evaluation between two env steps, and one that is due does not start: the evaluation
    is dropped (no metrics, no video, no record; the RNGs and evaluation envs are put back as
    they were before it) and :attr:`interrupted_at` holds its frames, saved with the hook, so a
    run resumed from the checkpoint at those frames evaluates them first
    (:meth:`redo_interrupted`).

    Args:
        policy: Policy module used during rollout.
        environment: TorchRL environment with a rollout method.
        group: Agent/group namespace (kept for the caller; eval keys are per subgroup).
        metric_subgroup: Evaluation label such as ``"deterministic"``.
        interval_frames: Collected-frame interval between evaluations (<= 0: only at the end).
        max_steps: Maximum rollout length.
        deterministic: Whether to force deterministic exploration (else random).
        render: Whether to capture rendered frames and log a video.
        video_fps: Video frame rate passed to the logger.
        render_kwargs: Optional keyword arguments passed to the gymnasium ``render``.
        reward_key: TensorDict key for rollout rewards; None means ``("next", "reward")``.
        reduce_stats: False logs only ``_mean`` keys; None/True min, mean, max.
        logger: Optional logger used before the hook is registered on a trainer.
        value_gamma: a value-based policy's discount: adds ``start_q_mean`` and
            ``value_gap_mean`` (see :func:`rollout_metrics`); None: not value-based.

    Example:
        >>> hook = LoggingEvaluationMetricsHook(
        ...     policy=actor, environment=eval_env, group="agents",
        ...     metric_subgroup="deterministic", interval_frames=10_000, max_steps=500,
        ...     deterministic=True, render=False, video_fps=30)
        >>> hook.register(trainer)  # post_steps_log, name "logging_evaluation_metrics"
        >>> hook.run(step=0)["eval/deterministic/reward/episode_reward_mean"]
        9.4
    """

    hook_point = "post_steps_log"

    def __init__(
        self,
        *,
        policy: torch.nn.Module,
        environment: Any,
        group: str,
        metric_subgroup: str,
        interval_frames: int,
        max_steps: int,
        deterministic: bool,
        render: bool,
        video_fps: int,
        render_kwargs: dict[str, Any] | None = None,
        reward_key: tuple[str, ...] | None = None,
        reduce_stats: bool | None = None,
        logger: Any | None = None,
        value_gamma: float | None = None,
    ) -> None:
        self.policy = policy
        self.value_gamma = value_gamma
        self.environment = environment
        self.group = group
        self.reward_key = reward_key
        self.reduce_stats = reduce_stats
        self.metric_subgroup = metric_subgroup
        self.interval_frames = int(interval_frames)
        self.max_steps = int(max_steps)
        self.deterministic = bool(deterministic)
        self.render = bool(render)
        self.render_kwargs = dict(render_kwargs or {})
        self.video_fps = int(video_fps)
        self.logger = logger
        self.trainer: Trainer | None = None
        self.last_metrics: dict[str, float] = {}
        self.num_evaluations = 0
        self._last_eval_frames = 0
        self.interrupted_at: int | None = None
        self._pending_eval_time = 0.0
        self._warned_cut = False  # max_steps cut episodes: said once per run
        self._base = f"{EVAL_PREFIX}/{metric_subgroup}"
        self._recorder = FrameRecorder(environment, self.render_kwargs, label=self._base)

    @property
    def last_eval_frames(self) -> int:
        """Collected frames at the latest evaluation (0 before any)."""
        return self._last_eval_frames

    # Rendering (tests and callers reach the frame helpers through the hook)
    _to_frame_array = staticmethod(_render.to_frame_array)

    def _renderable_candidates(self) -> list[Any]:
        return _render.renderable_candidates(self.environment)

    # Evaluation
    def stop_requested(self) -> bool:
        """Whether the Trainer was asked to stop (the flag ``Trainer.request_stop`` sets, which
        TorchRL's own ``EarlyStopping`` reads too): read between evaluation steps."""
        return bool(getattr(self.trainer, "_stop_training", False))

    def _evaluate_once(self, step: int) -> dict[str, float]:
        start = time.perf_counter()
        recorder = self._recorder
        saved = _RandomState(self.environment)
        try:
            with self._eval_mode():
                rollout = evaluation_rollout(
                    self.environment,
                    self.policy,
                    self.max_steps,
                    deterministic=self.deterministic,
                    after_reset=recorder.start if self.render else None,
                    stop_requested=self.stop_requested,
                )
        except EvaluationInterrupted as stopped:
            saved.restore()
            recorder.frames = []
            self.interrupted_at = int(step)
            self._pending_eval_time += time.perf_counter() - start
            log.warning(
                "%s at %d frames: stopped after %d env steps and dropped (no metrics, no record); "
                "the same command evaluates it again",
                self._base,
                step,
                stopped.steps,
            )
            return {}
        self.interrupted_at = None
        self._flag_cut_episodes(rollout)
        metrics = self._metrics(rollout)
        if self.render:
            recorder.finish()
            log_video(
                self._logger(), f"{self._base}/{VIDEO_NAME}", recorder.frames, step, self.video_fps
            )
        self.last_metrics = dict(metrics)
        self.num_evaluations += 1
        self._last_eval_frames = max(self._last_eval_frames, int(step))
        self._pending_eval_time += time.perf_counter() - start
        return metrics

    def _flag_cut_episodes(self, rollout: TensorDictBase) -> None:
        """Warn (once per run) when ``max_steps`` cut episodes short: their returns are partial
        (``eval.max_steps=1`` reported CartPole's return as 1.0). A warning, not a refusal: how
        long an episode lasts depends on the env and the policy, so no value is wrong before
        the rollout shows it."""
        cut, n = unfinished_episodes(rollout)
        if cut and not self._warned_cut:
            self._warned_cut = True
            log.warning(
                "%s: %d of %d episodes had not ended after eval.max_steps=%d steps: their "
                "returns are partial; raise eval.max_steps to the env's time limit",
                self._base,
                cut,
                n,
                self.max_steps,
            )

    @contextlib.contextmanager
    def _eval_mode(self) -> Iterator[None]:
        modules = [m for m in (self.policy, self.environment) if isinstance(m, torch.nn.Module)]
        modes = [m.training for m in modules]
        for module in modules:
            module.eval()
        try:
            yield
        finally:
            for module, mode in zip(modules, modes, strict=True):
                module.train(mode)

    def _metrics(self, rollout: TensorDictBase) -> dict[str, float]:
        return rollout_metrics(
            rollout,
            self.metric_subgroup,
            reward_key=self.reward_key,
            reduce_stats=self.reduce_stats,
            value_gamma=self.value_gamma,
        )

    # Logging
    def _logger(self) -> Any | None:
        if self.logger is not None:
            return self.logger
        return getattr(self.trainer, "logger", None)

    def _log_direct(self, metrics: dict[str, float], step: int) -> None:
        logger = self._logger()
        if logger is None:
            return
        for key, value in metrics.items():
            logger.log_scalar(key, value, step=step)

    def pop_eval_time(self) -> float:
        """Seconds spent evaluating since the last call."""
        elapsed, self._pending_eval_time = self._pending_eval_time, 0.0
        return elapsed

    def _due(self, frames: int, total_frames: int) -> bool:
        if frames <= self._last_eval_frames and self.num_evaluations:
            return False
        if frames >= total_frames:
            return True
        if self.interval_frames <= 0:
            return False
        return frames // self.interval_frames > self._last_eval_frames // self.interval_frames

    def run(self, *, step: int) -> dict[str, float]:
        """Evaluate now and log the metrics directly to the logger at ``step``."""
        metrics = self._evaluate_once(step)
        self._log_direct(metrics, step)
        return metrics

    def __call__(self, _batch: TensorDictBase) -> dict[str, float]:
        trainer = self.trainer
        if trainer is None:
            return {}
        frames = int(trainer.collected_frames)
        if not self._due(frames, int(trainer.total_frames)):
            return {}
        return self._evaluate_once(frames)

    def redo_interrupted(self) -> dict[str, float]:
        """Before a resumed run trains: evaluate now (logged directly) if it resumed from the
        checkpoint written when an evaluation at its frames was interrupted, and return the
        metrics; an interruption at other frames is forgotten."""
        pending, self.interrupted_at = self.interrupted_at, None
        trainer = self.trainer
        if pending is None or trainer is None or pending != int(trainer.collected_frames):
            return {}
        log.info("%s: evaluating %d frames, interrupted before the resume", self._base, pending)
        return self.run(step=pending)

    def register_ops(self, trainer: Trainer) -> None:
        """Register at ``post_steps_log`` and remember ``trainer`` (its frames, logger and stop
        flag)."""
        self.trainer = trainer
        super().register_ops(trainer)

    def register(self, trainer: Trainer, name: str = "logging_evaluation_metrics") -> None:
        super().register(trainer, name)

    def close(self) -> None:
        close_env(self.environment)

    def state_dict(self) -> dict[str, Any]:
        return {
            "last_eval_frames": self._last_eval_frames,
            "num_evaluations": self.num_evaluations,
            "last_metrics": dict(self.last_metrics),
            "interrupted_at": self.interrupted_at,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._last_eval_frames = int(state_dict["last_eval_frames"])
        self.num_evaluations = int(state_dict.get("num_evaluations", 0))
        self.last_metrics = dict(state_dict.get("last_metrics", {}))
        interrupted = state_dict.get("interrupted_at")
        self.interrupted_at = int(interrupted) if interrupted is not None else None


class _RandomState:
    """The global RNGs (python, numpy, torch) and the evaluation envs' generators, taken before an
    evaluation and put back when it is interrupted: the checkpoint then holds what it would hold
    had the evaluation never started, and the resume that redoes it draws what it would have."""

    def __init__(self, environment: Any) -> None:
        self.rng = GlobalRNGState().state_dict()
        envs = gym_envs(environment) if isinstance(environment, EnvBase) else None
        self.envs = envs or []
        self.generators = [copy.deepcopy(e.unwrapped.np_random) for e in self.envs]

    def restore(self) -> None:
        GlobalRNGState().load_state_dict(self.rng)
        for env, generator in zip(self.envs, self.generators, strict=True):
            env.unwrapped.np_random = generator
