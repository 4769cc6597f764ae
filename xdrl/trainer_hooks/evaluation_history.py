"""Every evaluation of a run, one JSON line each, in ``<run_dir>/evaluations.jsonl``.

Written whatever the logger (``logging=none`` included): ``xdrl-report`` reads it back to draw
learning curves. A record holds the collected frames, the time, and every ``eval/...`` metric of
that evaluation (per-objective keys included)::

    {"frames": 2048, "time": 1795000000.0, "wall_time_s": 12.3,
     "eval/deterministic/reward/episode_reward_mean": 41.2, ...}

``time`` is the Unix time of the record, ``wall_time_s`` the seconds since this process built the
run (a resumed process starts again from 0).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdrl.run.layout import EVALUATIONS_FILE, write_atomically

if TYPE_CHECKING:  # imported for types only: xdrl-report reads the file without torch
    from torchrl.trainers.trainers import Trainer

    from xdrl.trainer_hooks.logging import LoggingEvaluationHookSet

log = logging.getLogger(__name__)


def read_evaluations(path: str | Path) -> list[dict[str, Any]]:
    """The records of an ``evaluations.jsonl``; a torn last line (a killed run) is skipped."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "frames" in record:
            records.append(record)
    return records


class EvaluationHistory:
    """Append one record per evaluation of ``evaluation`` to ``<run_dir>/evaluations.jsonl``.

    Registered after the evaluation hooks: at ``setup`` it starts the file (a fresh run
    truncates it; a resumed run keeps only the records at or before the frames it resumed from,
    so nothing after the checkpoint is written twice) and records the evaluation taken at the
    frames training starts from (the step-0 evaluation run before ``trainer.train()``, or one a
    stop interrupted before the resume, redone at ``setup``); at ``post_steps_log`` it records
    each new evaluation. An evaluation a stop interrupted in any subgroup is never recorded: a
    record is a complete evaluation. The file
    itself is the state: nothing goes into checkpoints, so checkpoints written before this hook
    existed still load (TorchRL refuses a checkpoint that lacks a registered component).

    Args:
        run_dir: the run's output folder.
        evaluation: the evaluation hooks whose results are recorded.

    Example:
        >>> EvaluationHistory(cfg.run_dir, eval_set).register(trainer)
    """

    def __init__(self, run_dir: str | Path, evaluation: LoggingEvaluationHookSet) -> None:
        self.path = Path(run_dir) / EVALUATIONS_FILE
        self.evaluation = evaluation
        self.trainer: Trainer | None = None
        self._start = time.perf_counter()
        self._seen = 0
        self._last_frames: int | None = None

    def _num_evaluations(self) -> int:
        return sum(hook.num_evaluations for hook in self.evaluation.hooks)

    def _start_file(self, frames: int) -> None:
        """Keep the records up to ``frames`` (the checkpoint resumed from), drop the rest."""
        kept: list[dict[str, Any]] = []
        if frames > 0 and self.path.is_file():
            kept = [r for r in read_evaluations(self.path) if int(r["frames"]) <= frames]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        self._last_frames = max((int(r["frames"]) for r in kept), default=None)

    def _record(self, frames: int) -> None:
        if self._last_frames is not None and frames <= self._last_frames:
            return  # already recorded (before a resume)
        metrics = self.evaluation.last_metrics
        record = {"frames": frames, "time": round(time.time(), 3)}
        record["wall_time_s"] = round(time.perf_counter() - self._start, 3)
        record.update({k: float(v) for k, v in metrics.items() if isinstance(v, int | float)})
        with self.path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        self._last_frames = frames

    def _complete_at(self, frames: int) -> bool:
        """Whether every subgroup has a complete evaluation at ``frames`` (none interrupted)."""
        evaluation = self.evaluation
        return evaluation.interrupted_at is None and evaluation.last_eval_frames == frames

    def setup(self) -> None:
        """Start the file; record the evaluation at the starting frames (run before training,
        or redone after a resume), if any."""
        trainer = self.trainer
        frames = int(trainer.collected_frames) if trainer is not None else 0
        self._start_file(frames)
        count = self._num_evaluations()
        if count > 0 and self._complete_at(frames):
            self._record(frames)
        self._seen = count

    def __call__(self, _batch: Any) -> None:
        count = self._num_evaluations()
        if count == self._seen or self.trainer is None:
            return
        self._seen = count
        if self.evaluation.interrupted_at is not None:
            return  # a subgroup's evaluation was interrupted: no complete evaluation to record
        try:
            self._record(int(self.trainer.collected_frames))
        except OSError as err:  # a full disk must not stop training
            log.warning("could not append to %s: %s", self.path, err)

    def register(self, trainer: Trainer, name: str = "evaluation_history") -> None:
        """Register at ``setup`` and ``post_steps_log`` (after the evaluation hooks)."""
        del name  # not a checkpoint component (see the class docstring)
        self.trainer = trainer
        trainer.register_op("setup", self.setup)
        trainer.register_op("post_steps_log", self)
