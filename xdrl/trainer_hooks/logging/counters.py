"""Frame and iteration counters in the ``counters/`` namespace."""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase
from torchrl.trainers.trainers import Trainer

from ..base import XdrlHook
from ._common import COUNTERS_PREFIX, _collector_mask

TOTAL_FRAMES_KEY = f"{COUNTERS_PREFIX}/total_frames"
CURRENT_FRAMES_KEY = f"{COUNTERS_PREFIX}/current_frames"
ITERATION_KEY = f"{COUNTERS_PREFIX}/iter"


class LoggingCountersHook(XdrlHook):
    """Track frame and iteration counters in the ``counters/`` namespace.

    Frames of a batch are its valid steps (collector mask honoured) times ``frame_skip``, as
    the Trainer counts them. ``total_frames`` and ``iteration`` survive a checkpoint resume.
    Keys: ``counters/total_frames``, ``counters/current_frames``, ``counters/iter``.

    Args:
        frame_skip: environment frames per agent step (action repeat).

    Example:
        >>> counters = LoggingCountersHook(frame_skip=2)
        >>> counters.register(trainer)  # pre_steps_log, name "logging_counters"
        >>> counters(batch_of_100_steps)
        {'counters/total_frames': 200, 'counters/current_frames': 200, 'counters/iter': 1}
    """

    hook_point = "pre_steps_log"

    def __init__(self, frame_skip: int = 1) -> None:
        self.frame_skip = int(frame_skip)
        self.total_frames = 0
        self.iteration = 0
        self.last_current_frames = 0

    def _current_frames(self, batch: TensorDictBase) -> int:
        mask = _collector_mask(batch)
        steps = batch.numel() if mask is None else int(mask.sum().item())
        return steps * self.frame_skip

    def __call__(self, batch: TensorDictBase) -> dict[str, int]:
        current = self._current_frames(batch)
        self.last_current_frames = current
        self.total_frames += current
        self.iteration += 1
        return {
            TOTAL_FRAMES_KEY: self.total_frames,
            CURRENT_FRAMES_KEY: current,
            ITERATION_KEY: self.iteration,
        }

    def register(self, trainer: Trainer, name: str = "logging_counters") -> None:
        super().register(trainer, name)

    def state_dict(self) -> dict[str, Any]:
        return {"total_frames": self.total_frames, "iteration": self.iteration}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.total_frames = int(state_dict["total_frames"])
        self.iteration = int(state_dict["iteration"])
