"""Checkpoints (TorchRL ``Checkpoint`` + ``CheckpointRotation``) and resuming from them.

TorchRL saves the policy, loss, optimizer, collector, replay buffer, logger, trainer counters and
every module registered on the Trainer (xdrl's hook sets included); it writes each checkpoint
into a hidden staging folder and renames it, so a run killed mid-write leaves no half checkpoint
under a real name. What it does not save is the RNG state: ``RngState`` adds it.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchrl.checkpoint import Checkpoint, CheckpointRotation

from xdrl.errors import ConfigError

log = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoints"


class RngState:
    """The python, numpy and torch RNG states as a checkpoint component (tensors only).

    Example:
        >>> Checkpoint(rng=RngState()).save("ckpt")
    """

    def state_dict(self) -> dict[str, Any]:
        """The three RNG states, encoded as tensors."""
        version, py_state, gauss = random.getstate()
        np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
        return {
            "torch": torch.get_rng_state(),
            "python": torch.tensor([version, *py_state], dtype=torch.int64),
            "python_gauss": torch.tensor([gauss is not None, gauss or 0.0], dtype=torch.float64),
            "numpy_keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
            "numpy_rest": torch.tensor([np_pos, np_has_gauss, np_gauss], dtype=torch.float64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the three RNG states."""
        torch.set_rng_state(state["torch"])
        py = [int(v) for v in state["python"].tolist()]
        has_gauss, gauss = state["python_gauss"].tolist()
        random.setstate((py[0], tuple(py[1:]), gauss if has_gauss else None))
        pos, np_has_gauss, np_gauss = state["numpy_rest"].tolist()
        keys = state["numpy_keys"].numpy().astype(np.uint32)
        np.random.set_state(("MT19937", keys, int(pos), int(np_has_gauss), float(np_gauss)))


def make_checkpointing(run_dir: str, keep_last: int) -> tuple[Checkpoint, CheckpointRotation]:
    """A Checkpoint (with RNG states) rotated under ``<run_dir>/checkpoints``."""
    if keep_last < 1:
        raise ConfigError("checkpoint.keep_last", f"must be at least 1, got {keep_last}")
    checkpoint = Checkpoint(rng=RngState())
    rotation = CheckpointRotation(Path(run_dir) / CHECKPOINT_DIR, keep_last=keep_last)
    return checkpoint, rotation


def resume_candidates(resume: str | None, run_dir: str) -> list[Path]:
    """Checkpoints to try, newest first: ``resume`` (a checkpoint, or a run or checkpoints dir),
    else this run dir's own checkpoints (a requeued SLURM job starts in the same dir)."""
    if resume is None:
        target = Path(run_dir) / CHECKPOINT_DIR
        if not target.is_dir():
            return []
    else:
        target = Path(resume).expanduser()
        if not target.exists():
            raise ConfigError("resume", f"{target} does not exist; pass a checkpoint or run dir")
        if Checkpoint.is_checkpoint(target):
            return [target]
        if (target / CHECKPOINT_DIR).is_dir():
            target = target / CHECKPOINT_DIR
    found = list(CheckpointRotation(target, keep_last=1).checkpoints())
    if resume is not None and not found:
        raise ConfigError("resume", f"no checkpoint found under {target}")
    return found[::-1]


def resumed_run_dir(candidate: Path) -> Path:
    """The run dir a checkpoint belongs to (``<run_dir>/checkpoints/checkpoint-N``)."""
    return candidate.parent.parent if candidate.parent.name == CHECKPOINT_DIR else candidate.parent


def restore(trainer: Any, candidates: list[Path]) -> Path | None:
    """Load the newest loadable checkpoint into ``trainer``; a corrupt one falls back to the
    previous. Returns the checkpoint used (None: nothing to resume)."""
    for candidate in candidates:
        try:
            trainer.load_from_file(candidate)
        except Exception as err:  # noqa: BLE001 - any unreadable checkpoint falls back
            log.warning(
                "Checkpoint %s is unreadable (%s); trying the previous one",
                candidate,
                str(err).splitlines()[0] if str(err) else type(err).__name__,
            )
            continue
        log.info("Resumed from %s at %d frames", candidate, trainer.collected_frames)
        return candidate
    if candidates:
        raise ConfigError("resume", f"none of {len(candidates)} checkpoints could be loaded")
    return None
