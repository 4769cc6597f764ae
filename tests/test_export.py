"""xdrl-export: ONNX / pt2 / TorchScript files act as the torch policy on 1,000 env observations
(discrete equal, continuous within 1e-5 and inside the action bounds, normalization inside)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from tensordict import TensorDict
from torchrl.checkpoint import Checkpoint
from torchrl.envs.utils import ExplorationType, set_exploration_type

from tests.conftest import run_cli, run_script
from xdrl.policy import export_cli
from xdrl.policy.export import sample_observations
from xdrl.policy.loading import load_run
from xdrl.trainer_hooks.observation_norm import observation_norm

TINY = [
    "total_frames=512",
    "frames_per_batch=256",
    "env.num_envs=2",
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=50",
    "num_threads=1",
]


def _train(tmp_path: Path, name: str, *overrides: str) -> Path:
    run_dir = tmp_path / name
    result = run_cli([*TINY, *overrides, f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny PPO CartPole run (two batches)."""
    return _train(tmp_path_factory.mktemp("ppo"), "ppo")


def _export(run_dir: Path, fmt: str, out: Path) -> subprocess.CompletedProcess:
    return run_script("xdrl-export", [str(run_dir), "--format", fmt, "--out", str(out)])


def _torch_actions(run_dir: Path, observations: np.ndarray) -> np.ndarray:
    """The TorchRL policy's deterministic actions, normalization applied by the env's VecNorm."""
    policy = load_run(run_dir)
    try:
        obs = torch.from_numpy(observations)
        data = TensorDict({"observation": obs}, batch_size=[len(obs)])
        vecnorm = observation_norm(policy.env)
        if vecnorm is not None:  # TorchRL's own normalization with the frozen statistics
            data = vecnorm.to_observation_norm()(data)
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            return policy.module(data)["action"].numpy()
    finally:
        policy.close()


class _Capture:
    """Receives one checkpoint component's state dict as saved."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        self.state = state


def _assert_weights_loaded(run_dir: Path) -> None:
    """The rebuilt evaluation policy holds the checkpoint's saved policy tensors."""
    policy = load_run(run_dir)
    saved = _Capture()
    Checkpoint(policy=saved).load(policy.checkpoint, components=["policy"])
    weights = policy.module.state_dict()
    assert saved.state and set(saved.state) == set(weights)
    assert all(torch.equal(saved.state[k], weights[k]) for k in weights)
    policy.close()


def _onnx_actions(path: Path, observations: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, out.name) == ("observation", "action")
    assert not isinstance(inp.shape[0], int)  # dynamic batch dimension
    return session.run(["action"], {"observation": observations})[0]


def test_discrete_onnx_equals_torch_and_other_formats(ppo_run: Path, tmp_path: Path) -> None:
    run_dir = ppo_run
    observations = sample_observations({"env": {"id": "CartPole-v1"}}, 1000, seed=3)
    expected = _torch_actions(run_dir, observations)
    for fmt in ("onnx", "pt2", "torchscript"):
        out = tmp_path / f"policy.{fmt}"
        result = _export(run_dir, fmt, out)
        assert result.returncode == 0, result.stderr
        assert out.is_file() and not list(tmp_path.glob(".policy*"))  # no temporary left
    actions = _onnx_actions(tmp_path / "policy.onnx", observations)
    assert actions.dtype == np.int64 and actions.shape == (1000,)
    assert (actions == expected).all()
    _assert_weights_loaded(run_dir)
    assert len(set(expected.tolist())) == 2  # both actions occur: the check can fail
    loaded = torch.export.load(str(tmp_path / "policy.pt2")).module()
    assert (loaded(torch.from_numpy(observations)).numpy() == expected).all()
    scripted = torch.jit.load(str(tmp_path / "policy.torchscript"))
    assert (scripted(torch.from_numpy(observations[:5])).numpy() == expected[:5]).all()


@pytest.mark.parametrize(
    ("algorithm", "normalize"), [("sac", True), ("td3", False)], ids=["sac-vecnorm", "td3"]
)
def test_continuous_onnx_within_1e5_and_bounds(tmp_path: Path, algorithm: str, normalize: bool):
    run_dir = _train(
        tmp_path,
        algorithm,
        f"algorithm={algorithm}",
        "env=pendulum",
        "algorithm.build.init_random_frames=256",
        f"env.normalize_observations={str(normalize).lower()}",
    )
    out = tmp_path / "policy.onnx"
    result = _export(run_dir, "onnx", out)
    assert result.returncode == 0, result.stderr
    observations = sample_observations({"env": {"id": "Pendulum-v1"}}, 1000, seed=5)
    expected = _torch_actions(run_dir, observations)
    actions = _onnx_actions(out, observations)
    assert actions.dtype == np.float32 and actions.shape == (1000, 1)
    assert np.abs(actions - expected).max() <= 1e-5
    assert actions.min() >= -2.0 and actions.max() <= 2.0
    assert np.ptp(actions) > 1e-3  # the actions depend on the observation
    _assert_weights_loaded(run_dir)
    if normalize:  # the statistics are inside: raw observations without them act differently
        policy = load_run(run_dir)
        stats = observation_norm(policy.env)
        assert stats is not None and not torch.allclose(stats.loc["observation"], torch.zeros(3))
        policy.close()


def test_bad_export_input_one_line_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "x.onnx"
    assert export_cli.main([str(tmp_path), "--format", "tflite", "--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert export_cli.main([str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is not a run dir" in err and err.count("\n") == 1
    real = export_cli.importlib.util.find_spec
    monkeypatch.setattr(
        export_cli.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real(name, *a),
    )
    assert export_cli.main([str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'xdrl[export]'" in err and "onnxruntime" in err and err.count("\n") == 1
    assert not out.exists()


def test_wandb_log_model_records_onnx_and_summary_artifact(tmp_path: Path) -> None:
    import base64
    import hashlib

    from tests.wandb_reader import offline_runs, read_records

    run_dir = _train(tmp_path, "wb", "logging=wandb", "logging.log_model=true")
    onnx_file, summary = run_dir / "policy.onnx", run_dir / "summary.json"
    assert onnx_file.is_file() and summary.is_file()
    (run,) = offline_runs(run_dir)
    (artifact,) = [r["artifact"] for r in read_records(run) if r.get("type") == "artifact"]
    assert artifact["type"] == "model"
    contents = {c["path"]: c["digest"] for c in artifact["manifest"]["contents"]}
    for path in (onnx_file, summary):  # W&B's digest: base64 of the file's md5
        digest = base64.b64encode(hashlib.md5(path.read_bytes()).digest()).decode()
        assert contents[path.name] == digest
        assert (run / "files" / path.name).read_bytes() == path.read_bytes()
    assert (_onnx_actions(onnx_file, np.zeros((3, 4), np.float32)).shape) == (3,)


class _Untraceable(torch.nn.Module):
    """A policy piece with Python control flow on a tensor value (as a future recurrent or pixel
    policy might have): torch.export cannot trace it."""

    def forward(self, data: TensorDict) -> TensorDict:
        if float(data["observation"].sum()) > 0:
            data["action"] = torch.zeros(data.batch_size, dtype=torch.int64)
        else:
            data["action"] = torch.ones(data.batch_size, dtype=torch.int64)
        return data


def test_untraceable_policy_fails_naming_the_part(ppo_run: Path, tmp_path: Path) -> None:
    from xdrl.policy.export import ExportError, export_policy

    policy = load_run(ppo_run)
    policy.deterministic_module.actor = _Untraceable()
    policy.module = policy.deterministic_module.actor
    out = tmp_path / "x.onnx"
    with pytest.raises(ExportError, match="_Untraceable does not trace with torch.export"):
        export_policy(policy, "onnx", out)
    policy.close()
    assert not out.exists() and not list(tmp_path.glob(".x*"))
