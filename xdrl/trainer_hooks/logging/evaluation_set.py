"""Deterministic and stochastic evaluation on one schedule, sharing one environment."""

from __future__ import annotations

from typing import Any

import torch
from torchrl.trainers.trainers import Trainer

from .evaluation import LoggingEvaluationMetricsHook, close_env

DETERMINISTIC_SUBGROUP = "deterministic"
STOCHASTIC_SUBGROUP = "stochastic"


class LoggingEvaluationHookSet:
    """Compose deterministic and non-deterministic evaluation hooks.

    One :class:`LoggingEvaluationMetricsHook` per enabled mode (``eval/deterministic/...``
    and ``eval/stochastic/...``), on the same schedule and sharing ``environment``.
    ``register`` registers only the children (named ``<name>_<subgroup>``).

    Args:
        policy: policy module evaluated.
        environment: TorchRL evaluation env (batched: one episode per sub-env).
        group: agent/group namespace.
        interval_frames: collected frames between evaluations.
        max_steps: step cap of an evaluation rollout.
        deterministic: evaluate with deterministic exploration (``eval/deterministic``).
        non_deterministic: evaluate with random exploration (``eval/stochastic``).
        render: log a video of the first sub-env for each subgroup.
        video_fps: frame rate of the videos.
        render_kwargs: keyword arguments of the gymnasium ``render`` call.
        reward_key: reward key of the rollout; None means ``("next", "reward")``.
        reduce_stats: False logs only ``_mean`` keys.
        logger: logger used before the hooks are registered on a trainer.
        value_gamma: a value-based policy's discount (the start-state value check).

    Example:
        >>> evals = LoggingEvaluationHookSet(
        ...     policy=actor, environment=eval_env, group="agents", interval_frames=10_000,
        ...     max_steps=500, deterministic=True, non_deterministic=True, render=False,
        ...     video_fps=30)
        >>> evals.run(step=0)  # before training, logged at step 0
        >>> evals.register(trainer)  # post_steps_log
    """

    def __init__(
        self,
        *,
        policy: torch.nn.Module,
        environment: Any,
        group: str,
        interval_frames: int,
        max_steps: int,
        deterministic: bool,
        non_deterministic: bool,
        render: bool,
        video_fps: int,
        render_kwargs: dict[str, Any] | None = None,
        reward_key: tuple[str, ...] | None = None,
        reduce_stats: bool | None = None,
        logger: Any | None = None,
        value_gamma: float | None = None,
    ) -> None:
        self.environment = environment
        self.hooks: list[LoggingEvaluationMetricsHook] = []
        modes = [(DETERMINISTIC_SUBGROUP, True, deterministic)]
        modes.append((STOCHASTIC_SUBGROUP, False, non_deterministic))
        for subgroup, is_deterministic, enabled in modes:
            if not enabled:
                continue
            self.hooks.append(
                LoggingEvaluationMetricsHook(
                    policy=policy,
                    environment=environment,
                    group=group,
                    metric_subgroup=subgroup,
                    interval_frames=interval_frames,
                    max_steps=max_steps,
                    deterministic=is_deterministic,
                    render=render,
                    video_fps=video_fps,
                    render_kwargs=render_kwargs,
                    reward_key=reward_key,
                    reduce_stats=reduce_stats,
                    logger=logger,
                    value_gamma=value_gamma,
                )
            )

    @property
    def last_metrics(self) -> dict[str, float]:
        """Metrics of the latest evaluation of every subgroup."""
        merged: dict[str, float] = {}
        for hook in self.hooks:
            merged.update(hook.last_metrics)
        return merged

    @property
    def last_eval_frames(self) -> int:
        """Collected frames at the latest evaluation every subgroup took part in."""
        return min((hook.last_eval_frames for hook in self.hooks), default=0)

    @property
    def interrupted_at(self) -> int | None:
        """Frames of an evaluation a stop interrupted (or kept from starting) in some subgroup
        and not yet redone; None when every evaluation due was complete."""
        return next((h.interrupted_at for h in self.hooks if h.interrupted_at is not None), None)

    @property
    def logger(self) -> Any | None:
        """The logger the evaluations write to (their own, else the trainer's); None if none."""
        for hook in self.hooks:
            return hook.logger if hook.logger is not None else getattr(hook.trainer, "logger", None)
        return None

    def register_ops(self, trainer: Trainer) -> None:
        """Register every child at its hook point, without registering modules."""
        for hook in self.hooks:
            hook.register_ops(trainer)

    def register(self, trainer: Trainer, name: str = "logging_evaluation_metrics") -> None:
        for hook in self.hooks:
            hook.register(trainer, name=f"{name}_{hook.metric_subgroup}")

    def run(self, *, step: int) -> dict[str, float]:
        """Evaluate every subgroup now, log directly at ``step`` and return the metrics."""
        merged: dict[str, float] = {}
        for hook in self.hooks:
            merged.update(hook.run(step=step))
        return merged

    def redo_interrupted(self) -> dict[str, float]:
        """Before a resumed run trains: redo the evaluation a stop interrupted at the frames it
        resumed from, in the subgroups it interrupted (see the hook's method); their metrics."""
        merged: dict[str, float] = {}
        for hook in self.hooks:
            merged.update(hook.redo_interrupted())
        return merged

    def pop_eval_time(self) -> float:
        """Seconds spent evaluating since the last call."""
        return sum(hook.pop_eval_time() for hook in self.hooks)

    def close(self) -> None:
        close_env(self.environment)

    def state_dict(self) -> dict[str, Any]:
        return {hook.metric_subgroup: hook.state_dict() for hook in self.hooks}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for hook in self.hooks:
            if hook.metric_subgroup in state_dict:
                hook.load_state_dict(state_dict[hook.metric_subgroup])
