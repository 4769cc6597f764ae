"""Progress reporting: a one-line bar for terminals, plain lines for logs and batch jobs."""

from __future__ import annotations

import datetime
import logging
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import torch
from tensordict import TensorDictBase
from torchrl.trainers.trainers import Trainer, TrainerHookBase

from ..base import XdrlHook
from ._common import (
    COLLECTION_PREFIX,
    DEFAULT_DONE_KEY,
    DEFAULT_EPISODE_REWARD_KEY,
    _collector_mask,
    _flatten_steps,
    _prepare_episode_reward,
    _scalarize_last_dim,
)
from .counters import TOTAL_FRAMES_KEY, LoggingCountersHook

# Same key as the counters hook: with log_interval=0 the Trainer writes it once per step.
PROGRESS_TOTAL_FRAMES_KEY = TOTAL_FRAMES_KEY


class LoggingProgressMetricsHook(XdrlHook):
    """Emit a compact progress-bar view for reward and frame counters.

    Returns ``collection/<group>/reward/episode_reward_mean`` (mean return of the episodes that
    ended in this batch; absent when none ended, the bar then keeps the previous value) and
    ``counters/total_frames`` with ``"log_pbar": True``, so TorchRL's tqdm bar shows them.
    Both keys are the ones the collection and counters hooks already log: register it after
    them at the same stage and the Trainer writes each key once per step (``log_interval=0``),
    so the progress view adds no namespace of its own.

    Args:
        group: metric group of the reward key.
        counters_hook: the counters hook whose ``total_frames`` is reported.
        reward_key: cumulative episode reward; None means ``("next", "episode_reward")``.
        episode_reward_weights: scalarization weights for a vector episode reward; a vector
            reward without weights is not shown.
        done_key: end-of-episode flag.

    Example:
        >>> counters = LoggingCountersHook()
        >>> progress = LoggingProgressMetricsHook(group="agents", counters_hook=counters)
        >>> counters.register(trainer)
        >>> progress.register(trainer)  # pre_steps_log, name "logging_progress_metrics"
    """

    hook_point = "pre_steps_log"

    def __init__(
        self,
        *,
        group: str,
        counters_hook: LoggingCountersHook,
        reward_key: tuple[str, ...] | None = None,
        episode_reward_weights: Sequence[float] | None = None,
        done_key: tuple[str, ...] = DEFAULT_DONE_KEY,
    ) -> None:
        self.group = group
        self.counters_hook = counters_hook
        self.reward_key = reward_key
        self.episode_reward_weights = episode_reward_weights
        self.done_key = done_key
        self.last_episode_reward: float | None = None
        self.reward_name = f"{COLLECTION_PREFIX}/{group}/reward/episode_reward_mean"

    def __call__(self, batch: TensorDictBase) -> dict[str, float | bool]:
        reward = self._mean_return(batch)
        if reward is not None:
            self.last_episode_reward = reward
        out: dict[str, float | bool] = {
            PROGRESS_TOTAL_FRAMES_KEY: self.counters_hook.total_frames,
            "log_pbar": True,
        }
        if reward is not None:
            out[self.reward_name] = reward
        return out

    def _mean_return(self, batch: TensorDictBase) -> float | None:
        mask = _collector_mask(batch)
        done = _flatten_steps(batch, self.done_key, mask)
        value = _flatten_steps(batch, self.reward_key or DEFAULT_EPISODE_REWARD_KEY, mask)
        if done is None or value is None:
            return None
        returns = _prepare_episode_reward(
            value, done.reshape(done.shape[0], -1).any(-1), weights=None
        )
        if returns.numel() == 0:
            return None
        if returns.ndim > 1:
            if self.episode_reward_weights is None:
                return None
            returns = _scalarize_last_dim(returns, self.episode_reward_weights)
        return float(returns.to(torch.float32).mean().item())

    def register(self, trainer: Trainer, name: str = "logging_progress_metrics") -> None:
        super().register(trainer, name)

    def state_dict(self) -> dict[str, Any]:
        return {"last_episode_reward": self.last_episode_reward}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_episode_reward = state_dict.get("last_episode_reward")


def _clock(seconds: float) -> str:
    """Seconds as H:MM:SS."""
    return str(datetime.timedelta(seconds=int(max(seconds, 0.0))))


class TrainingClock:
    """The one clock of a run's speed: from the start of training (the Trainer's ``setup``, just
    before the first batch is collected) to the end of the latest batch (its collection,
    optimization, logs and any evaluation). The step-0 evaluation, start-up, the final
    checkpoint and stopping worker processes are outside it. The progress line's ``fps`` and
    ``summary.json``'s ``train_time_s`` and ``frames_per_second`` both read it, so they agree
    (``summary.json`` also counted the final checkpoint and the workers' shutdown: 1,162 fps
    against the line's 4,606 with workers).

    Example:
        >>> clock = TrainingClock()
        >>> clock.start(); ...; clock.mark()  # after each batch
        >>> clock.seconds()
        1.82
    """

    def __init__(self) -> None:
        self.started: float | None = None
        self.last_batch_end: float | None = None

    def start(self) -> None:
        """Training starts (once: a second ``setup`` keeps the first start)."""
        if self.started is None:
            self.started = time.perf_counter()

    def mark(self) -> None:
        """A batch ended."""
        self.last_batch_end = time.perf_counter()

    def seconds(self) -> float:
        """Seconds from the start to the latest batch's end (0 before any batch)."""
        if self.started is None or self.last_batch_end is None:
            return 0.0
        return max(self.last_batch_end - self.started, 0.0)


class _ProgressView(TrainerHookBase):
    """What the progress line and the progress bar share: the Trainer's frame count, the
    :class:`TrainingClock` (started at setup, marked after each iteration), and ``_start`` at
    setup, ``__call__`` after each iteration's logs, ``_finish`` at shutdown. No Trainer
    module: a run's checkpoints must not depend on whether it ran in a terminal."""

    trainer: Trainer | None = None
    clock: TrainingClock

    def _frames(self) -> int:
        return int(self.trainer.collected_frames) if self.trainer is not None else 0

    def _start(self) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def register(self, trainer: Trainer, name: str = "logging_progress") -> None:
        self.trainer = trainer
        trainer.register_op("setup", self._start)
        trainer.register_op("post_steps_log", self)
        trainer.register_op("shutdown", self._finish)
        del name  # no state to checkpoint


class ProgressLineHook(_ProgressView):
    """Plain progress lines for logs and batch jobs, where a tqdm bar is unreadable.

    Prints one line every ``interval_s`` seconds (checked after each iteration) and one when
    training ends: frames done/total, percent, frames per second, last episode reward,
    elapsed time and ETA. Register it when stdout is not a terminal and build the Trainer
    with ``progress_bar=False``.

    Args:
        total_frames: frame budget of the run (the Trainer's ``total_frames``).
        interval_s: seconds between lines.
        stream: text stream to print to; None means the current ``sys.stdout``.
        progress_hook: where the last episode reward is read from (optional).
        frame_skip: frames per agent step; above 1 (Atari) the line also gives agent steps.
        clock: the run's :class:`TrainingClock` (None: one of its own); ``fps`` and
            ``elapsed`` are read from it, so they agree with ``summary.json``.

    Example:
        >>> line = ProgressLineHook(total_frames=100_000, progress_hook=hooks.progress_hook)
        >>> line.register(trainer)  # setup, post_steps_log, shutdown
        progress: 12,288/100,000 frames (12.3%) | 2,345 fps | episode_reward 21.50 | ...
    """

    def __init__(
        self,
        total_frames: int,
        interval_s: float = 30.0,
        stream: TextIO | None = None,
        *,
        progress_hook: LoggingProgressMetricsHook | None = None,
        frame_skip: int = 1,
        clock: TrainingClock | None = None,
    ) -> None:
        self.total_frames = int(total_frames)
        self.frame_skip = int(frame_skip)
        self.clock = clock if clock is not None else TrainingClock()
        self.interval_s = float(interval_s)
        self.stream = stream
        self.progress_hook = progress_hook
        self.trainer = None
        self._start_time: float | None = None
        self._start_frames = 0
        self._last_print = 0.0
        self._last_printed_frames = -1

    def _start(self) -> None:
        self.clock.start()
        self._start_time = self._last_print = time.perf_counter()
        self._start_frames = self._frames()

    def __call__(self, *_args: Any) -> None:
        if self._start_time is None:
            self._start()
            return
        self.clock.mark()
        now = time.perf_counter()
        if now - self._last_print >= self.interval_s:
            self._print(now)

    def _finish(self) -> None:
        if self._start_time is None:
            self._start()
        if self._frames() != self._last_printed_frames:
            self._print(time.perf_counter())

    def _print(self, now: float) -> None:
        frames = self._frames()
        self._last_print, self._last_printed_frames = now, frames
        stream = self.stream if self.stream is not None else sys.stdout
        print(self.format_line(frames, self.clock.seconds()), file=stream, flush=True)

    def format_line(self, frames: int, elapsed: float) -> str:
        """The progress line for ``frames`` collected after ``elapsed`` seconds."""
        done = frames - self._start_frames
        fps = done / elapsed if elapsed > 0 else 0.0
        total = max(self.total_frames, 1)
        remaining = max(self.total_frames - frames, 0)
        eta = _clock(remaining / fps) if fps > 0 else "?"
        parts = [
            f"progress: {frames:,}/{self.total_frames:,} frames ({100.0 * frames / total:.1f}%)",
            f"{fps:,.0f} fps",
        ]
        if self.frame_skip > 1:
            parts.append(f"{frames // self.frame_skip:,} agent steps")
        reward = self._last_reward()
        if reward is not None:
            parts.append(f"episode_reward {reward:.2f}")
        parts += [f"elapsed {_clock(elapsed)}", f"eta {eta}"]
        return " | ".join(parts)

    def _last_reward(self) -> float | None:
        if self.progress_hook is not None:
            return self.progress_hook.last_episode_reward
        history = getattr(self.trainer, "_log_dict", {})
        for key, values in history.items():
            fresh = key.startswith(COLLECTION_PREFIX) and key.endswith("/episode_reward_mean")
            if fresh and values:
                return float(values[-1])
        return None


# Fits 80 columns with a bar of ~20 cells:
# " 45%|████▌     | 18.4k/41.0k [00:05<00:07, 3.21k frames/s, R 212.5]"
_BAR_FORMAT = (
    "{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)


class ProgressBarHook(_ProgressView):
    """A one-line progress bar for terminals: frames, percent, elapsed, ETA, frames per second
    and the latest episode return, at most ``max_width`` columns wide.

    Replaces TorchRL's bar (``Trainer(progress_bar=True)``), whose description lists every
    ``log_pbar`` key by its full name (wider than a terminal, so each update wraps onto a new
    line) and which log lines print through. Here the run's log lines go above the bar (tqdm's
    ``logging_redirect_tqdm``), a resumed run's bar starts at its resumed frames, and the bar
    is closed once at the end, leaving one final line.

    Args:
        total_frames: frame budget of the run.
        progress_hook: where the latest episode return is read from (optional).
        stream: where the bar is drawn; None means the current ``sys.stdout``.
        max_width: the widest the bar gets, whatever the terminal's width.
        clock: the run's :class:`TrainingClock` (None: one of its own), marked after each
            iteration.

    Example:
        >>> ProgressBarHook(100_000, progress_hook=hooks.progress_hook).register(trainer)
    """

    def __init__(
        self,
        total_frames: int,
        *,
        progress_hook: LoggingProgressMetricsHook | None = None,
        stream: TextIO | None = None,
        max_width: int = 80,
        clock: TrainingClock | None = None,
    ) -> None:
        self.total_frames = int(total_frames)
        self.clock = clock if clock is not None else TrainingClock()
        self.progress_hook = progress_hook
        self.stream = stream
        self.max_width = int(max_width)
        self.trainer = None
        self.bar: Any = None
        self._redirect: Any = None

    def _start(self) -> None:
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self.clock.start()
        if self.bar is not None:
            return
        stream = self.stream if self.stream is not None else sys.stdout
        self.bar = tqdm(
            total=self.total_frames,
            initial=self._frames(),
            unit=" frames",
            unit_scale=True,
            ncols=min(shutil.get_terminal_size().columns, self.max_width),
            bar_format=_BAR_FORMAT,
            file=stream,
            mininterval=0.5,
        )
        self._redirect = logging_redirect_tqdm(loggers=[logging.getLogger()])
        self._redirect.__enter__()

    def __call__(self, *_args: Any) -> None:
        if self.bar is None:
            self._start()
        self.clock.mark()
        self._set_return()
        self.bar.update(self._frames() - self.bar.n)

    def _set_return(self) -> None:
        reward = self.progress_hook.last_episode_reward if self.progress_hook else None
        if reward is not None:
            self.bar.set_postfix_str(f"R {reward:.1f}", refresh=False)

    def _finish(self) -> None:
        if self.bar is None:
            return
        self._set_return()
        self.bar.n = self._frames()
        self.bar.close()  # draws the final bar once
        self._redirect.__exit__(None, None, None)
        self.bar = self._redirect = None
