"""Evaluation videos: record the first sub-env's frames during a rollout, hand them to a logger
or write them as an mp4. Rendering never fails an evaluation: a failure warns and stops the
recording."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from . import render as _render


class FrameRecorder:
    """Collects RGB frames of the first sub-env of ``env`` while an episode runs.

    Args:
        env: the TorchRL evaluation env (created with ``render=True``).
        render_kwargs: keyword arguments for gymnasium's ``render``.
        label: names the recording in warnings.

    Example:
        >>> recorder = FrameRecorder(eval_env)
        >>> rollout = evaluation_rollout(eval_env, policy, 500, deterministic=True,
        ...                              after_reset=recorder.start)
        >>> recorder.finish()
        >>> recorder.frames[0].shape
        (400, 600, 3)
    """

    def __init__(
        self,
        env: Any,
        render_kwargs: dict[str, Any] | None = None,
        label: str = "eval",
    ) -> None:
        self.env = env
        self.render_kwargs = dict(render_kwargs or {})
        self.label = label
        self.frames: list[np.ndarray] = []
        self._target: Any | None = None
        self._active = False

    def render_frame(self) -> np.ndarray:
        """A frame of the first sub-env, from the first candidate that renders one."""
        targets = [self._target] if self._target is not None else []
        errors = []
        for target in targets + _render.renderable_candidates(self.env):
            try:
                frame = _render.extract_render_frame(target.render(**self.render_kwargs))
            except Exception as err:  # noqa: BLE001 - try the next candidate
                errors.append(f"{type(target).__name__}: {err}")
                continue
            self._target = target
            return frame
        raise RuntimeError("no renderable environment found (" + "; ".join(errors) + ")")

    def capture(self) -> bool:
        """Append a frame; on failure warn once and return False."""
        try:
            self.frames.append(self.render_frame())
        except Exception as err:  # noqa: BLE001 - rendering never fails an evaluation
            warnings.warn(f"{self.label}: rendering failed, no video: {err}", stacklevel=2)
            return False
        return True

    def start(self) -> Any | None:
        """Clear the frames, capture the first one and return the rollout callback (None when
        rendering fails at once)."""
        self.frames = []
        self._active = self.capture()
        return self._callback if self._active else None

    def finish(self) -> None:
        """After the rollout: the last frame when the recorded episode was still running as the
        rollout stopped (TorchRL's rollout calls no callback after its last step)."""
        if self._active:
            self.capture()
        self._active = False

    def _callback(self, _env: Any, tensordict: TensorDictBase) -> None:
        if not self._active:
            return
        self._active = self.capture()
        done = tensordict.get("done", None)
        if done is not None and bool(done.reshape(-1)[0]):
            self._active = False


class EpisodesRecorder:
    """RGB frames of every sub-env's episode, one episode after another (``xdrl-eval --video``).

    Each sub-env plays one episode; its frames run from its reset to the step that ends it. The
    training hooks keep :class:`FrameRecorder` (the first sub-env only: one render per step).

    Args:
        renderers: the sub-envs' gymnasium envs in batch order (``render_mode="rgb_array"``).
        label: names the recording in warnings.

    Example:
        >>> recorder = EpisodesRecorder(gym_envs(eval_env))
        >>> evaluation_rollout(eval_env, policy, 500, deterministic=True,
        ...                    after_reset=recorder.start)
        >>> recorder.finish()
        >>> len(recorder.frames)  # sum over episodes of (length + 1)
    """

    def __init__(self, renderers: Sequence[Any], label: str = "xdrl-eval") -> None:
        self.renderers = list(renderers)
        self.label = label
        self.per_env: list[list[np.ndarray]] = [[] for _ in self.renderers]
        self._ended = [False] * len(self.renderers)
        self._active = False

    @property
    def frames(self) -> list[np.ndarray]:
        """Every episode's frames, sub-env 0's first."""
        return [frame for frames in self.per_env for frame in frames]

    def start(self) -> Any | None:
        """Clear, capture every sub-env's first frame and return the rollout callback (None when
        rendering fails at once)."""
        self.per_env = [[] for _ in self.renderers]
        self._ended = [False] * len(self.renderers)
        self._active = self._capture(range(len(self.renderers)))
        return self._callback if self._active else None

    def finish(self) -> None:
        """After the rollout: the last frame of every episode still running when it stopped
        (TorchRL's rollout calls no callback after its last step)."""
        if self._active:
            self._capture([i for i, ended in enumerate(self._ended) if not ended])
        self._ended = [True] * len(self.renderers)
        self._active = False

    def _capture(self, indices: Iterable[int]) -> bool:
        try:
            for i in indices:
                self.per_env[i].append(_render.extract_render_frame(self.renderers[i].render()))
        except Exception as err:  # noqa: BLE001 - rendering never fails an evaluation
            warnings.warn(f"{self.label}: rendering failed, no video: {err}", stacklevel=2)
            return False
        return True

    def _callback(self, _env: Any, tensordict: TensorDictBase) -> None:
        if not self._active:
            return
        running = [i for i, ended in enumerate(self._ended) if not ended]
        self._active = self._capture(running)
        done = tensordict.get("done", None)
        if done is not None:
            flags = done.reshape(len(self.renderers), -1).any(-1).tolist()
            for i in running:
                self._ended[i] = self._ended[i] or bool(flags[i])


def log_video(logger: Any, name: str, frames: list[np.ndarray], step: int, fps: int) -> None:
    """Log ``frames`` as one video ``[1, T, C, H, W]`` through a TorchRL logger; a failure warns.

    On W&B the video joins the iteration's pending row (``commit=False``): scalars logged after
    it at the same step would otherwise be dropped.
    """
    from .wandb_hooks import _is_wandb_logger

    if logger is None or not frames:
        return
    extra = {"commit": False} if _is_wandb_logger(logger) else {}
    try:
        video = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).unsqueeze(0)
        logger.log_video(name, video, step=step, fps=fps, **extra)
    except Exception as err:  # noqa: BLE001 - a video never fails training
        warnings.warn(f"{name}: could not log the video: {err}", stacklevel=2)


def write_mp4(frames: list[np.ndarray], path: str | Path, fps: int) -> Path:
    """Write ``frames`` (H, W, 3 uint8) as an mp4 with imageio's ffmpeg (the ``video`` extra)."""
    import imageio.v2 as imageio

    path = Path(path)
    writer: Any
    with imageio.get_writer(str(path), fps=fps, codec="libx264", macro_block_size=1) as writer:
        for frame in frames:
            writer.append_data(frame if frame.shape[-1] == 3 else np.repeat(frame, 3, -1))
    return path
