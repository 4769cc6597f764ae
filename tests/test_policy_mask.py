"""What a run learned on is what its policy takes (issue 47, item 2): a run with
``env.mask_observations`` (CartPole without its velocities) gives a ``load_policy`` callable and
ONNX / pt2 / TorchScript files that take gymnasium's RAW observation and zero the hidden entries
themselves.

Expected values come from outside the code under test: observations of a plain
``gymnasium.make("CartPole-v1")``, masked here by hand, normalized by TorchRL's own
``ObservationNorm`` with the run's frozen statistics, and fed to the trained TorchRL actor step by
step (its hidden state carried, zero at each episode start).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import onnxruntime
import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

import xdrl
import xdrl.run.lifecycle
from tests.conftest import read_summary, run_script, train_each
from xdrl.policy.export import export_policy
from xdrl.policy.loading import LoadedPolicy
from xdrl.trainer_hooks.observation_norm import observation_norm

HIDDEN = [1, 3]  # the preset's env.mask_observations: the cart velocity, the pole's angular one
SMALL = [
    "total_frames=256",
    "frames_per_batch=128",
    "env.num_envs=4",
    "algorithm.build.minibatch_size=64",
    "algorithm.build.epochs=2",
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=20",
    "checkpoint.interval_frames=256",
    "num_threads=1",
]
RUNS = {
    "lstm": ["experiment=cartpole_novel_lstm"],  # masked, normalized, LSTM actor
    "mlp": ["env.mask_observations=[1,3]", "env.normalize_observations=true"],  # feed-forward
}
STEPS = 200


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each run of ``RUNS``, trained once (256 frames) in process: name -> run dir."""
    out = train_each(tmp_path_factory, RUNS, SMALL)
    for run_dir in out.values():
        assert read_summary(run_dir)["status"] == "completed"
    return out


@pytest.fixture(scope="module")
def policies(trained: dict[str, Path]) -> Iterator[dict[str, LoadedPolicy]]:
    """Each run's last checkpoint through the public ``xdrl.load_policy``."""
    loaded = {name: xdrl.load_policy(run_dir) for name, run_dir in trained.items()}
    yield loaded
    for policy in loaded.values():
        policy.close()


def _raw_episodes(seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """``STEPS`` observations of plain gymnasium CartPole under random actions, as its
    ``env.step`` returns them (velocities included), and each episode's first step."""
    env = gymnasium.make("CartPole-v1")
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    observations, starts, start = [], [], True
    while len(observations) < STEPS:
        observations.append(obs)
        starts.append(start)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        start = terminated or truncated
        if start:
            obs, _ = env.reset()
    env.close()
    raw, first = np.stack(observations).astype(np.float32), np.asarray(starts)
    assert np.abs(raw[:, HIDDEN]).min(axis=0).max() > 0  # the hidden entries move
    assert first[1:].any(), "no second episode: the state reset would not be tested"
    return raw, first


def _by_hand(observations: np.ndarray) -> np.ndarray:
    masked = observations.copy()
    masked[:, HIDDEN] = 0.0
    return masked


def _network(policy: LoadedPolicy, observations: np.ndarray, starts: np.ndarray) -> dict:
    """The trained TorchRL actor on ``observations`` as given (normalized by TorchRL's
    ``ObservationNorm`` from the frozen statistics), one step at a time, its hidden state carried
    and zero at each episode start: ``{"action", "logits", "states"}`` per step."""
    vecnorm = observation_norm(policy.env)
    assert vecnorm is not None, "both runs normalize observations"
    norm = vecnorm.to_observation_norm()
    states = {key: torch.zeros_like(s) for key, s in zip(
        policy.state_keys, policy.initial_states(1), strict=True
    )}  # fmt: skip
    actions, logits, carried = [], [], []
    for obs, start in zip(observations, starts, strict=True):
        data = TensorDict({"observation": torch.from_numpy(obs[None])}, [1])
        data = norm(data)
        if policy.recurrent:
            data.update({"is_init": torch.tensor([[bool(start)]]), **states})
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            out = policy.module(data)
        actions.append(out["action"][0].numpy())
        logits.append(out["logits"][0].numpy())
        states = {key: out["next", key] for key in states}
        carried.append([states[key][0].numpy() for key in policy.state_keys])
    return {"action": np.stack(actions), "logits": np.stack(logits), "states": carried}


def _stepped(run: Any, policy: LoadedPolicy, raw: np.ndarray, starts: np.ndarray) -> dict:
    """``run(observation[None], is_init, *states) -> (action, *next states)`` (a file, or
    load_policy's ``step``) stepped over the raw observations with its own states fed back."""
    states = [np.zeros(s.shape, np.float32) for s in policy.initial_states(1)]
    actions, carried = [], []
    for obs, start in zip(raw, starts, strict=True):
        if policy.recurrent:
            action, *states = run(obs[None], np.array([bool(start)]), *states)
        else:
            (action,) = run(obs[None])
        actions.append(np.asarray(action)[0])
        carried.append([np.asarray(s)[0] for s in states])
    return {"action": np.stack(actions), "states": carried}


def _assert_matches(got: dict, expected: dict, what: str) -> None:
    """Equal actions; hidden states within 1e-6 (two normalization formulas, same numbers)."""
    assert (got["action"] == expected["action"]).all(), what
    for mine, theirs in zip(got["states"], expected["states"], strict=True):
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6, err_msg=what)


def _torch_step(policy: LoadedPolicy) -> Any:
    """load_policy's stateless step as a numpy function."""

    def run(obs: np.ndarray, *rest: np.ndarray) -> list[np.ndarray]:
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in (obs, *rest)]
        if not policy.recurrent:
            return [np.asarray(policy(obs))]
        action, states = policy.step(tensors[0], tensors[1], list(tensors[2:]))
        return [action.numpy(), *(s.numpy() for s in states)]

    return run


@pytest.mark.parametrize("name", RUNS)
def test_load_policy_on_raw_observations_is_the_network_on_masked_ones(
    name: str, policies: dict[str, LoadedPolicy]
) -> None:
    policy = policies[name]
    raw, starts = _raw_episodes()
    expected = _network(policy, _by_hand(raw), starts)
    unmasked = _network(policy, raw, starts)  # what a policy without the mask inside would do
    differs = (unmasked["action"] != expected["action"]).any() or not np.allclose(
        unmasked["logits"], expected["logits"], rtol=0, atol=1e-3
    )
    assert differs, "the hidden entries change nothing: the test could not fail"

    # the stateful call, reset at each episode start, as a user plays episodes
    policy.reset()
    actions = []
    for obs, start in zip(raw, starts, strict=True):
        if start:
            policy.reset()
        actions.append(policy(obs))
    assert (np.stack(actions) == expected["action"]).all()
    assert (policy(raw) == _network(policy, _by_hand(raw), np.ones(STEPS, bool))["action"]).all()
    _assert_matches(_stepped(_torch_step(policy), policy, raw, starts), expected, "step")
    assert policy.obs_shape == (4,) and policy.obs_dtype == np.float32


def _onnx(path: Path) -> Any:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *arrays: session.run(None, dict(zip(names, arrays, strict=True)))


def _torch_file(module: Any) -> Any:
    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        with torch.no_grad():
            out = module(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays))
        return [t.numpy() for t in (out if isinstance(out, tuple | list) else (out,))]

    return run


@pytest.mark.parametrize("name", RUNS)
def test_exported_files_take_raw_observations_and_the_line_names_the_inputs(
    name: str, trained: dict[str, Path], policies: dict[str, LoadedPolicy], tmp_path: Path
) -> None:
    policy = policies[name]
    raw, starts = _raw_episodes(seed=9)
    expected = _network(policy, _by_hand(raw), starts)

    out = tmp_path / "policy.onnx"
    result = run_script("xdrl-export", [str(trained[name]), "--out", str(out)])
    assert result.returncode == 0, result.stderr[-2000:]
    line = result.stdout.strip().splitlines()[-1]
    assert "inputs: observation float32 [batch, 4] (CartPole-v1 as env.step returns it; " in line
    assert "env.mask_observations=[1, 3] zeroed inside)" in line
    if policy.recurrent:
        assert ", is_init bool [batch], actor_h float32 [batch, 1, 64], actor_c float32 " in line
    else:
        assert "is_init" not in line
    _assert_matches(_stepped(_onnx(out), policy, raw, starts), expected, "onnxruntime")

    files = {"pt2": tmp_path / "policy.pt2", "torchscript": tmp_path / "policy.pt"}
    for fmt, path in files.items():
        checked = export_policy(policy, fmt, path)
        assert checked["inputs"] in line
        module = torch.export.load(str(path)).module() if fmt == "pt2" else torch.jit.load(path)
        _assert_matches(_stepped(_torch_file(module), policy, raw, starts), expected, fmt)
