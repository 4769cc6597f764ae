"""Export a loaded policy as one self-contained file (ONNX, ``torch.export`` archive, TorchScript)
and check the file right after writing it: the same actions as the torch policy on a batch of
raw env observations, or the export fails naming the largest difference.

All three start from one ``torch.export.export`` of :class:`~xdrl.policy.module.DeterministicPolicy`
with a dynamic batch dimension: ONNX through ``torch.onnx.export(..., dynamo=True)``, ``pt2`` as
``torch.export.save``'s archive, TorchScript as ``torch.jit.trace`` of the exported graph
(``torch.jit.script`` fails on TorchRL's ``MLP`` and actor modules).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xdrl.errors import ConfigError, first_line
from xdrl.policy.loading import LoadedPolicy

FORMATS = ("onnx", "pt2", "torchscript")
INPUT_NAME = "observation"
OUTPUT_NAME = "action"
CONTINUOUS_TOLERANCE = 1e-5
CHECK_OBSERVATIONS = 1000


class ExportError(Exception):
    """A policy that cannot be exported, or an exported file that does not act as the policy."""


def sample_observations(config: dict[str, Any], n: int = CHECK_OBSERVATIONS, seed: int = 0):
    """``n`` raw observations (float32) of the run's gymnasium env under random actions."""
    import gymnasium

    from xdrl.envs import _registry

    _registry()  # registers MO-Gymnasium's ids
    env_cfg = config["env"]
    kwargs = dict(env_cfg.get("make_kwargs") or {})
    if env_cfg.get("max_episode_steps") is not None:
        kwargs["max_episode_steps"] = env_cfg["max_episode_steps"]
    env = gymnasium.make(env_cfg["id"], **kwargs)
    env.action_space.seed(seed)
    observations: list[np.ndarray] = []
    obs, _ = env.reset(seed=seed)
    while len(observations) < n:
        observations.append(np.asarray(obs, dtype=np.float32))
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.stack(observations)


def _export_program(policy: LoadedPolicy, example: torch.Tensor) -> Any:
    batch = torch.export.Dim("batch", min=1)
    try:
        return torch.export.export(
            policy.deterministic_module, (example,), dynamic_shapes={INPUT_NAME: {0: batch}}
        )
    except Exception as err:  # noqa: BLE001 - say which part does not trace, in one line
        first = first_line(err)
        raise ExportError(
            f"the policy {type(policy.module).__name__} does not trace with torch.export "
            f"({type(err).__name__}: {first})"
        ) from None


def _compare(expected: np.ndarray, actual: np.ndarray, discrete: bool, what: str) -> None:
    if expected.shape != actual.shape:
        raise ExportError(f"{what}: action shape {actual.shape}, the policy gives {expected.shape}")
    if discrete:
        wrong = int((expected != actual).sum())
        if wrong:
            raise ExportError(f"{what}: {wrong} of {len(expected)} actions differ from the policy")
        return
    diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
    if diff.max() > CONTINUOUS_TOLERANCE:
        raise ExportError(
            f"{what}: largest action difference {diff.max():.3g} (> {CONTINUOUS_TOLERANCE:g}) "
            f"at observation {int(diff.reshape(len(diff), -1).max(1).argmax())}"
        )


def _run_onnx(path: Path, observations: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run([OUTPUT_NAME], {INPUT_NAME: observations})[0]


def _write(program: Any, fmt: str, out: Path, example: torch.Tensor) -> None:
    if fmt == "pt2":
        torch.export.save(program, str(out))
    elif fmt == "torchscript":
        traced = torch.jit.trace(program.module(), (example,), check_trace=False)
        torch.jit.save(traced, str(out))
    else:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # progress lines and torchvision-op notices
            _onnx_export(program, example, out)


def _onnx_export(program: Any, example: torch.Tensor, out: Path) -> None:
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed"
    for name in ("onnx_ir", "onnxscript"):  # a line per optimization pass
        logging.getLogger(name).setLevel(logging.WARNING)
    torch.onnx.export(
        program,
        (example,),
        str(out),
        dynamo=True,
        input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME],
        external_data=False,  # one self-contained file (weights inside)
        verbose=False,
    )


def _reload(fmt: str, out: Path, observations: np.ndarray) -> np.ndarray:
    if fmt == "onnx":
        return _run_onnx(out, observations)
    module = torch.export.load(str(out)).module() if fmt == "pt2" else torch.jit.load(str(out))
    with torch.no_grad():
        return module(torch.from_numpy(observations)).numpy()


def export_policy(policy: LoadedPolicy, fmt: str, out: str | Path) -> dict[str, Any]:
    """Write ``policy`` to ``out`` in ``fmt`` and check it on raw env observations.

    Returns what was checked: ``{"format", "file", "observations", "max_abs_diff"}``. The file
    is written beside ``out`` first and renamed only once it passed, so a failed export leaves
    nothing behind.
    """
    if fmt not in FORMATS:
        raise ConfigError("--format", f"unknown format {fmt!r}; pick one of {', '.join(FORMATS)}")
    out = Path(out)
    observations = sample_observations(policy.config)
    example = torch.from_numpy(observations[:8])
    with torch.no_grad():
        expected = policy.deterministic_module(torch.from_numpy(observations)).numpy()
    program = _export_program(policy, example)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    try:
        _write(program, fmt, tmp, example)
        actual = _reload(fmt, tmp, observations)
        discrete = not np.issubdtype(expected.dtype, np.floating)
        _compare(expected, actual, discrete, f"{fmt} file")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        for extra in tmp.parent.glob(f"{tmp.name}.*"):  # ONNX external data, if any
            extra.unlink(missing_ok=True)
    diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64)).max()
    return {
        "format": fmt,
        "file": str(out),
        "observations": len(observations),
        "max_abs_diff": float(diff),
    }
