"""A stop asked from outside the run's process: ``<run_dir>/stop-request.json``.

The Optuna sweeper prunes a trial while its jobs train by writing this file into each job's run
dir (:mod:`hydra_plugins.xdrl_optuna.pruning`); a file works through every launcher (a joblib
worker, a SLURM node on a shared file system) where a signal would need the job's process id.
The run reads it after every batch, then stops as a signal would stop it: the Trainer writes a
checkpoint of that batch and ``summary.json`` gets the request's status (``pruned``) and reason.
The file is removed once honoured, so the same command (or ``xdrl-train resume=<dir>``) continues
the run from that checkpoint.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdrl.run.layout import STOP_REQUEST_FILE, write_atomically

if TYPE_CHECKING:  # imported for types only
    from torchrl.trainers.trainers import Trainer

log = logging.getLogger(__name__)

STOP_STATUSES = ("pruned", "stopped")  # what a request may name as the run's status


def write_stop_request(run_dir: str | Path, status: str, reason: str) -> Path:
    """Ask the run in ``run_dir`` to stop after its current batch with ``status`` (one of
    :data:`STOP_STATUSES`) and ``reason``; returns the file's path."""
    if status not in STOP_STATUSES:
        raise ValueError(f"status {status!r}: use one of {', '.join(STOP_STATUSES)}")
    path = Path(run_dir) / STOP_REQUEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    # a reader sees the whole request or none
    return write_atomically(path, json.dumps({"status": status, "reason": reason}) + "\n")


class StopRequestHook:
    """Stop the Trainer after a batch when ``<run_dir>/stop-request.json`` exists.

    Registered at ``post_steps_log`` after the evaluation history, so the batch's evaluation is
    recorded before the run stops; keeps nothing across a resume (not a checkpoint component, so
    checkpoints written before it existed still load). One ``stat`` per batch when no request.

    Args:
        run_dir: the run's output folder.

    Example:
        >>> StopRequestHook(spec.run_dir).register(trainer)
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / STOP_REQUEST_FILE
        self.trainer: Trainer | None = None
        self.request: dict[str, Any] | None = None  # the honoured request, for summary.json

    def __call__(self, _batch: Any) -> None:
        if self.request is not None or self.trainer is None or not self.path.exists():
            return
        try:
            request = json.loads(self.path.read_text())
        except (OSError, ValueError):
            request = {}
        status = request.get("status") if isinstance(request, dict) else None
        self.request = {
            "status": status if status in STOP_STATUSES else "stopped",
            "reason": str(request.get("reason", "")) if isinstance(request, dict) else "",
            "frames": int(self.trainer.collected_frames),
        }
        log.warning(
            "Stop requested (%s: %s): stopping after this batch at %d frames",
            self.request["status"],
            self.request["reason"],
            self.request["frames"],
        )
        self.trainer.request_stop(self.request["status"])
        self.path.unlink(missing_ok=True)

    def register(self, trainer: Trainer, name: str = "stop_request") -> None:
        """Register at ``post_steps_log``."""
        del name  # not a checkpoint component (see the class docstring)
        self.trainer = trainer
        trainer.register_op("post_steps_log", self)
