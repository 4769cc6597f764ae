"""Frame capture for evaluation videos: find the gymnasium env behind TorchRL wrappers.

Why not TorchRL's ``PixelRenderTransform`` and ``VideoRecorder``: the transform calls its
parent's ``render()`` at every step and carries the frame in the rollout TensorDict, and the
recorder takes the frames from there. On xdrl's batched evaluation env (a ``VectorGymEnv`` or a
``SerialEnv`` of N sub-envs) that needs either a batched ``render()`` returning one image, which
neither has, or the transform inside every sub-env: N frames of 400x600x3 per step, in every
evaluation, where a video wants one sub-env's frames and only when one is due. So the evaluation
hook finds the first sub-env's gymnasium env behind the wrappers (:func:`renderable_candidates`)
and calls its ``render()`` itself, only while recording.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv, TransformedEnv


def to_frame_array(frame: Any) -> np.ndarray:
    """An image (H, W, C) / (C, H, W) / (H, W), float or int, as uint8 (H, W, 1 or 3)."""
    if isinstance(frame, torch.Tensor):
        frame = frame.detach().cpu().numpy()
    array = np.asarray(frame)
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3:
        raise ValueError(f"expected an image of shape (H, W, C), got shape {array.shape}")
    if array.shape[-1] not in (1, 3, 4) and array.shape[0] in (1, 3, 4):
        array = array.transpose(1, 2, 0)
    if array.shape[-1] == 4:
        array = array[..., :3]
    if array.shape[-1] not in (1, 3):
        raise ValueError(f"expected 1, 3 or 4 colour channels, got shape {array.shape}")
    if array.dtype != np.uint8:
        if np.issubdtype(array.dtype, np.floating) and array.size and array.max() <= 1.0:
            array = array * 255.0
        array = np.clip(array, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(array)


def extract_render_frame(output: Any) -> np.ndarray:
    """The first frame of a ``render()`` result (an array, or a list/tuple of arrays)."""
    if isinstance(output, (list, tuple)):
        output = next((item for item in output if item is not None), None)
    if output is None:
        raise ValueError("render() returned no frame; is the env's render_mode 'rgb_array'?")
    return to_frame_array(output)


def _children(obj: Any) -> list[Any]:
    """Objects wrapped by ``obj``: only the first sub-env of a batched env is followed."""
    if isinstance(obj, TransformedEnv):
        return [obj.base_env]
    if isinstance(obj, ParallelEnv):
        return []  # sub-envs live in worker processes
    if isinstance(obj, SerialEnv):
        envs = vars(obj).get("_envs") or []
        return list(envs[:1])
    if isinstance(obj, EnvBase):
        return [vars(obj).get("_env")]
    attrs = vars(obj) if hasattr(obj, "__dict__") else {}
    children = [attrs.get("env")]
    envs = attrs.get("envs")
    if isinstance(envs, Sequence) and envs:
        children.append(envs[0])
    try:
        children.append(obj.unwrapped)
    except Exception:  # noqa: BLE001 - unwrapped is optional
        pass
    return children


def renderable_candidates(env: Any) -> list[Any]:
    """Objects with a ``render`` method behind ``env``, outermost first."""
    found: list[Any] = []
    seen: set[int] = set()
    queue = [env]
    while queue:
        obj = queue.pop(0)
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if callable(getattr(type(obj), "render", None)):
            found.append(obj)
        queue.extend(_children(obj))
    return found
