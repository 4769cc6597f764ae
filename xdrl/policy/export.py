"""Export a loaded policy as one self-contained file (ONNX, ``torch.export`` archive, TorchScript)
and check the file right after writing it: the same actions as the torch policy on 1,000
observations of the run's own env (as its gymnasium ``env.step`` returns them: raw integers for
a one-hot run, the preprocessed frame stack for Atari), or the export fails naming the largest
difference. The input keeps the env's observation dtype (int32 for deep-sea-treasure, uint8 for
Atari, float32 for CartPole); the casts, encoding and normalization run inside the file.

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

from xdrl.config.errors import ConfigError, first_line
from xdrl.policy.loading import RECURRENT_CALL, LoadedPolicy

FORMATS = ("onnx", "pt2", "torchscript")
INPUT_NAME = "observation"
OUTPUT_NAME = "action"
CONTINUOUS_TOLERANCE = 1e-5
CHECK_OBSERVATIONS = 1000


class ExportError(Exception):
    """A policy that cannot be exported, or an exported file that does not act as the policy."""


def sample_observations(
    config: dict[str, Any], n: int = CHECK_OBSERVATIONS, seed: int = 0
) -> np.ndarray:
    """``n`` observations of the run's env under random actions, as its gymnasium ``env.step``
    returns them (what the exported policy takes): the env is built the way ``xdrl-eval``
    builds it (:func:`~xdrl.policy.loading.make_env`, Atari's preprocessing and frame stack
    included) and stepped below its one-hot encoding, which the policy applies itself."""
    from xdrl.policy.loading import make_env, policy_input_env

    env = make_env(config, num_envs=1, seed=seed)
    try:
        gym_env, _encoding, owner = policy_input_env(env, config)
        if owner is not env:
            env.close()
            env = owner
        dtype = gym_env.observation_space.dtype
        gym_env.action_space.seed(seed)
        observations: list[np.ndarray] = []
        obs, _ = gym_env.reset(seed=seed)
        while len(observations) < n:
            observations.append(np.asarray(obs, dtype=dtype))
            obs, _, terminated, truncated, _ = gym_env.step(gym_env.action_space.sample())
            if terminated or truncated:
                obs, _ = gym_env.reset()
    finally:
        env.close()
    return np.stack(observations)


def _export_program(policy: LoadedPolicy, example: torch.Tensor) -> Any:
    batch = torch.export.Dim("batch", min=1)
    try:
        with torch.no_grad():  # the inference path (the Nature CNN has a training-only form)
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
        with warnings.catch_warnings():
            # Tracing the exported graph module converts its shape guards to Python booleans;
            # the batch dimension stays dynamic in the graph and the file is checked below.
            warnings.filterwarnings(
                "ignore",
                message="Converting a tensor to a Python boolean",
                category=torch.jit.TracerWarning,
            )
            traced = torch.jit.trace(_batch_generic(program), (example,), check_trace=False)
        torch.jit.save(traced, str(out))
    else:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # progress lines and torchvision-op notices
            _onnx_export(program, example, out)


def _tensor_size(tensor: torch.Tensor, dim: int) -> int:
    """``tensor.size(dim)``: a size ``torch.jit.trace`` records as an op, not as a constant."""
    return tensor.size(dim)


def _batch_generic(program: Any) -> torch.fx.GraphModule:
    """The exported graph as a module whose trace takes any batch size.

    ``torch.jit.trace`` bakes the ints that ``aten.sym_size`` and ATen overloads (``aten.reshape
    .default``) give it: a policy that reshapes by its batch size (the Nature CNN) then only
    takes the example's. ``Tensor.size`` and the public ``torch`` functions
    are recorded with the size as a graph value, so those nodes are swapped for them."""
    module = program.module()
    sizes: set[torch.fx.Node] = set()
    for node in module.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch.ops.aten.sym_size.int:
            node.target = _tensor_size
            sizes.add(node)
            continue
        inputs: list[Any] = []
        torch.fx.node.map_arg((node.args, node.kwargs), inputs.append)
        packet = getattr(node.target, "overloadpacket", None)  # an ATen overload's op
        if packet is not None and sizes.intersection(inputs):
            public = getattr(torch, packet.__name__, None)
            node.target = public if public is not None else node.target
    module.recompile()
    return module


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
    """Write ``policy`` to ``out`` in ``fmt`` and check it on observations of the run's env
    (:func:`sample_observations`).

    Returns what was checked: ``{"format", "file", "observations", "max_abs_diff"}``. The file
    is written beside ``out`` first and renamed only once it passed, so a failed export leaves
    nothing behind.
    """
    if fmt not in FORMATS:
        raise ConfigError("--format", f"unknown format {fmt!r}; pick one of {', '.join(FORMATS)}")
    if policy.recurrent:
        raise ExportError(RECURRENT_CALL)
    out = Path(out)
    observations = sample_observations(policy.config)
    example = torch.from_numpy(observations[:8])
    with torch.no_grad():
        expected = policy.deterministic_module(torch.from_numpy(observations)).numpy()
    program = _export_program(policy, example)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    try:
        _write(program, fmt, tmp, example)
        try:
            actual = _reload(fmt, tmp, observations)
        except Exception as err:  # noqa: BLE001 - a file that does not run is an export failure
            raise ExportError(
                f"the {fmt} file does not run on {len(observations)} env observations "
                f"({type(err).__name__}: {first_line(err)})"
            ) from None
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
