"""Evaluation hooks: roll the policy out on its own env, log ``eval/<subgroup>/`` metrics."""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.trainers.trainers import Trainer, TrainerHookBase

from . import render as _render
from ._common import (
    DEFAULT_DONE_KEY,
    DEFAULT_EPISODE_REWARD_KEY,
    DEFAULT_REWARD_KEY,
    EPISODE_LEN_NAME,
    EPISODE_REWARD_NAME,
    EVAL_PREFIX,
    REWARD_SUBKEY,
    VIDEO_NAME,
    _per_objective,
    _reduce,
)
from .wandb_hooks import _is_wandb_logger

log = logging.getLogger(__name__)


def close_env(env: Any) -> None:
    """Close ``env`` unless it is None or already closed; a failure is only logged."""
    if env is None or getattr(env, "is_closed", False):
        return
    try:
        env.close()
    except Exception as err:  # noqa: BLE001 - closing is best effort
        log.warning("closing the evaluation env failed: %s", err)


class LoggingEvaluationMetricsHook(TrainerHookBase):
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

    Example:
        >>> hook = LoggingEvaluationMetricsHook(
        ...     policy=actor, environment=eval_env, group="agents",
        ...     metric_subgroup="deterministic", interval_frames=10_000, max_steps=500,
        ...     deterministic=True, render=False, video_fps=30)
        >>> hook.register(trainer)  # post_steps_log, name "logging_evaluation_metrics"
        >>> hook.run(step=0)["eval/deterministic/reward/episode_reward_mean"]
        9.4
    """

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
    ) -> None:
        self.policy = policy
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
        self._pending_eval_time = 0.0
        self._render_target: Any | None = None
        self._base = f"{EVAL_PREFIX}/{metric_subgroup}"

    # Rendering
    @staticmethod
    def _to_frame_array(frame: Any) -> np.ndarray:
        return _render.to_frame_array(frame)

    def _extract_render_frame(self, output: Any) -> np.ndarray:
        return _render.extract_render_frame(output)

    def _renderable_candidates(self) -> list[Any]:
        return _render.renderable_candidates(self.environment)

    def _render_frame(self) -> np.ndarray:
        """A frame of the first sub-env, from the first candidate that renders one."""
        targets = [self._render_target] if self._render_target is not None else []
        errors = []
        for target in targets + self._renderable_candidates():
            try:
                frame = self._extract_render_frame(target.render(**self.render_kwargs))
            except Exception as err:  # noqa: BLE001 - try the next candidate
                errors.append(f"{type(target).__name__}: {err}")
                continue
            self._render_target = target
            return frame
        raise RuntimeError("no renderable environment found (" + "; ".join(errors) + ")")

    # Evaluation
    def _evaluate_once(self, step: int) -> dict[str, float]:
        start = time.perf_counter()
        frames: list[np.ndarray] = []
        exploration = ExplorationType.RANDOM
        if self.deterministic:
            exploration = ExplorationType.DETERMINISTIC
        with torch.no_grad(), set_exploration_type(exploration), self._eval_mode():
            rollout = self._rollout(frames if self.render else None)
        metrics = self._metrics(rollout)
        if self.render:
            self._log_video(frames, step)
        self.last_metrics = dict(metrics)
        self.num_evaluations += 1
        self._last_eval_frames = max(self._last_eval_frames, int(step))
        self._pending_eval_time += time.perf_counter() - start
        return metrics

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

    def _rollout(self, frames: list[np.ndarray] | None) -> TensorDictBase:
        env = self.environment
        batched = len(env.batch_size) > 0
        tensordict = env.reset()
        callback = None
        if frames is not None and self._capture(frames):
            callback = self._capture_callback(frames)
        return env.rollout(
            self.max_steps,
            policy=self.policy,
            auto_reset=False,
            tensordict=tensordict,
            break_when_any_done=not batched,
            break_when_all_done=batched,
            callback=callback,
        )

    def _capture(self, frames: list[np.ndarray]) -> bool:
        """Append a frame; on failure warn once for this evaluation and return False."""
        try:
            frames.append(self._render_frame())
        except Exception as err:  # noqa: BLE001 - rendering never fails training
            warnings.warn(f"{self._base}: rendering failed, no video: {err}", stacklevel=2)
            return False
        return True

    def _capture_callback(self, frames: list[np.ndarray]) -> Any:
        state = {"active": True}

        def callback(_env: Any, tensordict: TensorDictBase) -> None:
            if not state["active"]:
                return
            state["active"] = self._capture(frames)
            done = tensordict.get("done", None)
            if done is not None and bool(done.reshape(-1)[0]):
                state["active"] = False

        return callback

    def _metrics(self, rollout: TensorDictBase) -> dict[str, float]:
        steps = rollout.shape[-1]
        rollout = rollout.reshape(-1, steps)
        n = rollout.shape[0]
        done = rollout.get(DEFAULT_DONE_KEY).reshape(n, steps, -1).any(-1)
        ended = done.any(1)
        last = torch.where(ended, done.float().argmax(1), steps - 1)
        valid = torch.arange(steps, device=last.device).unsqueeze(0) <= last.unsqueeze(1)
        reward = rollout.get(self.reward_key or DEFAULT_REWARD_KEY).reshape(n, steps, -1)
        returns = (reward.double() * valid.unsqueeze(-1)).sum(1)
        base = f"{self._base}/{REWARD_SUBKEY}"
        out: dict[str, float] = {}
        if returns.shape[-1] == 1:
            out.update(_reduce(f"{base}/{EPISODE_REWARD_NAME}", returns, self.reduce_stats))
        objectives = returns if returns.shape[-1] > 1 else None
        episode_reward = rollout.get(DEFAULT_EPISODE_REWARD_KEY, None)
        if episode_reward is not None and episode_reward.shape[-1] > 1:
            rows = torch.arange(n, device=last.device)
            objectives = episode_reward.reshape(n, steps, -1)[rows, last]
        if objectives is not None:
            out.update(_per_objective(base, EPISODE_REWARD_NAME, objectives, self.reduce_stats))
        out[f"{self._base}/{EPISODE_LEN_NAME}"] = float((last + 1).double().mean().item())
        return out

    # Logging
    def _logger(self) -> Any | None:
        if self.logger is not None:
            return self.logger
        return getattr(self.trainer, "logger", None)

    def _log_video(self, frames: list[np.ndarray], step: int) -> None:
        logger = self._logger()
        if logger is None or not frames:
            return
        # On W&B, join the iteration's pending row instead of committing it early: scalars
        # logged after the video at the same step would otherwise be dropped.
        extra = {"commit": False} if _is_wandb_logger(logger) else {}
        try:
            video = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).unsqueeze(0)
            name = f"{self._base}/{VIDEO_NAME}"
            logger.log_video(name, video, step=step, fps=self.video_fps, **extra)
        except Exception as err:  # noqa: BLE001 - a video never fails training
            warnings.warn(f"{self._base}: could not log the video: {err}", stacklevel=2)

    def _log_direct(self, metrics: dict[str, float], step: int) -> None:
        logger = self._logger()
        if logger is None:
            return
        for key, value in metrics.items():
            logger.log_scalar(key, value, step=step)

    def _pop_eval_time(self) -> float:
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

    def _register_ops(self, trainer: Trainer) -> None:
        self.trainer = trainer
        trainer.register_op("post_steps_log", self)

    def register(self, trainer: Trainer, name: str = "logging_evaluation_metrics") -> None:
        self._register_ops(trainer)
        trainer.register_module(name, self)

    def close(self) -> None:
        close_env(self.environment)

    def state_dict(self) -> dict[str, Any]:
        return {
            "last_eval_frames": self._last_eval_frames,
            "num_evaluations": self.num_evaluations,
            "last_metrics": dict(self.last_metrics),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._last_eval_frames = int(state_dict["last_eval_frames"])
        self.num_evaluations = int(state_dict.get("num_evaluations", 0))
        self.last_metrics = dict(state_dict.get("last_metrics", {}))
