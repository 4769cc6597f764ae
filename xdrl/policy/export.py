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

A recurrent policy (``algorithm.build.recurrent``) exports one step of
:class:`~xdrl.policy.module.RecurrentPolicy`: inputs ``observation``, ``is_init`` (``[batch]``
bool, true at each episode's first step: the state is zeroed there) and the hidden states
(``actor_h``, and ``actor_c`` for an LSTM, ``[batch, layers, hidden]``), outputs ``action`` and
the next states (``next_actor_h``, ...). Its check runs the file on the same 1,000 observations
cut into 8 sequences of 125 steps, its own states carried from step to step and reset at the
episode starts the sampling crossed, against the TorchRL policy stepped the same way (actions
equal, or within 1e-5 for continuous ones; states within 1e-5).
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xdrl.config.errors import ConfigError, first_line
from xdrl.policy.loading import LoadedPolicy
from xdrl.policy.module import RecurrentPolicy, with_step_cells

FORMATS = ("onnx", "pt2", "torchscript")
INPUT_NAME = "observation"
OUTPUT_NAME = "action"
CONTINUOUS_TOLERANCE = 1e-5
CHECK_OBSERVATIONS = 1000
CHECK_SEQUENCES = 8  # a recurrent policy's check: 1,000 observations as 8 sequences of 125 steps
IS_INIT = "is_init"


class ExportError(Exception):
    """A policy that cannot be exported, or an exported file that does not act as the policy."""


def sample_observations(
    config: dict[str, Any], n: int = CHECK_OBSERVATIONS, seed: int = 0
) -> np.ndarray:
    """``n`` observations of the run's env under random actions (:func:`sample_episodes`)."""
    return sample_episodes(config, n, seed)[0]


def sample_episodes(
    config: dict[str, Any], n: int = CHECK_OBSERVATIONS, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(observations, starts)``: ``n`` observations of the run's env under random actions, as
    its gymnasium ``env.step`` returns them (what the exported policy takes): the env is built
    the way ``xdrl-eval`` builds it (:func:`~xdrl.policy.run_env.make_env`, Atari's
    preprocessing and frame stack included) and stepped below its one-hot encoding and
    observation mask, which the policy applies itself; ``starts`` marks each episode's first
    observation."""
    from xdrl.policy.run_env import make_env, policy_input_env

    env = make_env(config, num_envs=1, seed=seed)
    try:
        taken = policy_input_env(env, config)
        gym_env = taken.env
        if taken.owner is not env:
            env.close()
            env = taken.owner
        dtype = gym_env.observation_space.dtype
        gym_env.action_space.seed(seed)
        observations: list[np.ndarray] = []
        starts: list[bool] = []
        obs, _ = gym_env.reset(seed=seed)
        start = True
        while len(observations) < n:
            observations.append(np.asarray(obs, dtype=dtype))
            starts.append(start)
            obs, _, terminated, truncated, _ = gym_env.step(gym_env.action_space.sample())
            start = bool(terminated or truncated)
            if start:
                obs, _ = gym_env.reset()
    finally:
        env.close()
    return np.stack(observations), np.asarray(starts)


def _export_program(policy: LoadedPolicy, module: torch.nn.Module, example: tuple) -> Any:
    batch = torch.export.Dim("batch", min=1)
    dynamic: tuple[Any, ...] = ({0: batch},)
    if len(example) > 1:  # RecurrentPolicy(observation, is_init, *states)
        dynamic = ({0: batch}, {0: batch}, tuple({0: batch} for _ in example[2:]))
    try:
        with torch.no_grad(), warnings.catch_warnings():  # the inference path (the Nature CNN
            # has a training-only form); nn.LSTM/GRU re-assign their flat weight list on call
            warnings.filterwarnings("ignore", message=".*were assigned during export")
            return torch.export.export(module, example, dynamic_shapes=dynamic)
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


def _write(program: Any, fmt: str, out: Path, example: tuple, names: tuple[list, list]) -> None:
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
            traced = torch.jit.trace(_batch_generic(program), example, check_trace=False)
        torch.jit.save(traced, str(out))
    else:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # progress lines and torchvision-op notices
            _onnx_export(program, example, out, names)


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


def _onnx_export(program: Any, example: tuple, out: Path, names: tuple[list, list]) -> None:
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed"
    for name in ("onnx_ir", "onnxscript"):  # a line per optimization pass
        logging.getLogger(name).setLevel(logging.WARNING)
    torch.onnx.export(
        program,
        example,
        str(out),
        dynamo=True,
        input_names=names[0],
        output_names=names[1],
        external_data=False,  # one self-contained file (weights inside)
        verbose=False,
    )


Runner = Callable[..., list[np.ndarray]]


def _runner(fmt: str, out: Path, input_names: list[str]) -> Runner:
    """The written file as a function of numpy inputs returning its outputs."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        return lambda *arrays: session.run(None, dict(zip(input_names, arrays, strict=True)))
    module = torch.export.load(str(out)).module() if fmt == "pt2" else torch.jit.load(str(out))

    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        with torch.no_grad():
            out = module(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays))
        return [t.numpy() for t in (out if isinstance(out, tuple | list) else (out,))]

    return run


def _names(policy: LoadedPolicy) -> tuple[list[str], list[str]]:
    """The file's input and output names."""
    if not policy.recurrent:
        return [INPUT_NAME], [OUTPUT_NAME]
    keys = policy.state_keys
    return [INPUT_NAME, IS_INIT, *keys], [OUTPUT_NAME, *(f"next_{key}" for key in keys)]


def _dims(shape: Any) -> str:
    return "[" + ", ".join(["batch", *(str(int(n)) for n in shape)]) + "]"


def describe_inputs(policy: LoadedPolicy) -> str:
    """The file's inputs in one phrase, each with its dtype and shape, and what the observation
    is (the env's raw observation; the mask, one-hot encoding or Atari preprocessing the policy
    applies or expects), e.g. ``observation float32 [batch, 4] (CartPole-v1 as env.step returns
    it; env.mask_observations=[1, 3] zeroed inside), is_init bool [batch], ...``."""
    det = policy.deterministic_module
    notes = [f"{policy.spec.env_id} as env.step returns it"]
    if str(policy.config["env"]["_target_"]).endswith("make_atari_env"):
        notes.append("after xdrl's Atari preprocessing and frame stack, see docs/policy.md")
    if det.mask is not None:
        notes.append(f"env.mask_observations={list(det.mask.indices)} zeroed inside")
    if det.one_hot is not None:
        notes.append("one-hot encoded inside")
    parts = [f"{INPUT_NAME} {policy.obs_dtype.name} {_dims(policy.obs_shape)} ({'; '.join(notes)})"]
    if policy.recurrent:
        parts.append(f"{IS_INIT} bool [batch]")
        for key, state in zip(policy.state_keys, policy.initial_states(1), strict=True):
            parts.append(f"{key} float32 {_dims(state.shape[1:])}")
    return ", ".join(parts)


def _sequences(observations: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[n, ...]`` as ``[steps, CHECK_SEQUENCES, ...]``: each sequence a contiguous piece of
    the sampled episodes, its first step an episode start."""
    steps = len(observations) // CHECK_SEQUENCES
    obs = observations[: steps * CHECK_SEQUENCES]
    obs = obs.reshape(CHECK_SEQUENCES, steps, *observations.shape[1:]).swapaxes(0, 1)
    init = starts[: steps * CHECK_SEQUENCES].reshape(CHECK_SEQUENCES, steps).T.copy()
    init[0] = True
    return np.ascontiguousarray(obs), init


def _check_sequences(
    policy: LoadedPolicy, run: Runner, observations: np.ndarray, starts: np.ndarray, what: str
) -> float:
    """Step the TorchRL policy and the file over the sequences, each carrying its own states;
    raise on a differing action or a state off by more than 1e-5; return the largest difference."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 8-row steps: 0.6 ms each at 1 thread, 13-41 ms at 2 under load
    try:
        return _step_sequences(policy, run, *_sequences(observations, starts), what)
    finally:
        torch.set_num_threads(threads)


def _step_sequences(
    policy: LoadedPolicy, run: Runner, obs: np.ndarray, init: np.ndarray, what: str
) -> float:
    """:func:`_check_sequences` on ``[steps, sequences, ...]`` observations and starts."""
    states = policy.initial_states(CHECK_SEQUENCES)
    file_states = [s.numpy() for s in states]
    expected, actual, largest = [], [], 0.0
    for t in range(len(obs)):
        action, states = policy.step(torch.from_numpy(obs[t]), torch.from_numpy(init[t]), states)
        got = run(obs[t], init[t], *file_states)
        expected.append(action.numpy())
        actual.append(got[0])
        file_states = got[1:]
        for mine, theirs in zip(states, file_states, strict=True):
            diff = float(np.abs(mine.numpy() - theirs).max())
            largest = max(largest, diff)
            if diff > CONTINUOUS_TOLERANCE:
                raise ExportError(
                    f"{what}: hidden state differs by {diff:.3g} (> {CONTINUOUS_TOLERANCE:g}) "
                    f"at step {t} of the sequences"
                )
    want, have = np.concatenate(expected), np.concatenate(actual)
    _compare(want, have, not np.issubdtype(want.dtype, np.floating), what)
    return max(largest, float(np.abs(want.astype(np.float64) - have.astype(np.float64)).max()))


def _module_and_example(policy: LoadedPolicy, observations: np.ndarray) -> tuple[Any, tuple]:
    """What is exported and an example input: the deterministic policy on 8 observations, or
    one step of the recurrent policy (its cells as :class:`StepCell`) with zero states."""
    example = torch.from_numpy(observations[:CHECK_SEQUENCES])
    if not policy.recurrent:
        return policy.deterministic_module, (example,)
    det = copy.deepcopy(policy.deterministic_module)
    det.actor = with_step_cells(det.actor)
    is_init = torch.ones(len(example), dtype=torch.bool)
    states = policy.initial_states(len(example))
    return RecurrentPolicy(det, policy.state_keys).eval(), (example, is_init, *states)


def export_policy(policy: LoadedPolicy, fmt: str, out: str | Path) -> dict[str, Any]:
    """Write ``policy`` to ``out`` in ``fmt`` and check it on observations of the run's env
    (:func:`sample_episodes`; a recurrent policy on sequences with its state carried).

    Returns what was checked: ``{"format", "file", "inputs", "observations", "max_abs_diff"}``
    (and ``"sequences"`` for a recurrent policy); ``"inputs"`` is :func:`describe_inputs`. The
    file is written beside ``out`` first and renamed only once it passed, so a failed export
    leaves nothing behind.
    """
    if fmt not in FORMATS:
        raise ConfigError("--format", f"unknown format {fmt!r}; pick one of {', '.join(FORMATS)}")
    out = Path(out)
    observations, starts = sample_episodes(policy.config)
    module, example = _module_and_example(policy, observations)
    program = _export_program(policy, module, example)
    names = _names(policy)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    try:
        _write(program, fmt, tmp, example, names)
        try:
            run = _runner(fmt, tmp, names[0])
            if policy.recurrent:
                diff = _check_sequences(policy, run, observations, starts, f"{fmt} file")
            else:
                diff = _check_batch(policy, run, observations, f"{fmt} file")
        except ExportError:
            raise
        except Exception as err:  # noqa: BLE001 - a file that does not run is an export failure
            raise ExportError(
                f"the {fmt} file does not run on {len(observations)} env observations "
                f"({type(err).__name__}: {first_line(err)})"
            ) from None
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        for extra in tmp.parent.glob(f"{tmp.name}.*"):  # ONNX external data, if any
            extra.unlink(missing_ok=True)
    checked: dict[str, Any] = {
        "format": fmt,
        "file": str(out),
        "inputs": describe_inputs(policy),
        "observations": len(observations),
    }
    if policy.recurrent:
        checked["sequences"] = CHECK_SEQUENCES
    return {**checked, "max_abs_diff": diff}


def _check_batch(policy: LoadedPolicy, run: Runner, observations: np.ndarray, what: str) -> float:
    """The file's actions on all observations at once against the torch policy's."""
    with torch.no_grad():
        expected = policy.deterministic_module(torch.from_numpy(observations)).numpy()
    actual = run(observations)[0]
    _compare(expected, actual, not np.issubdtype(expected.dtype, np.floating), what)
    return float(np.abs(expected.astype(np.float64) - actual.astype(np.float64)).max())
