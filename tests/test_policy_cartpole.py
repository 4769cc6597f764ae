"""A trained CartPole policy (``experiment=cartpole_ppo``, trained once per session) used after
training: exported to ONNX and played by onnxruntime alone, evaluated with ``xdrl-eval``
(``--checkpoint best``, ``--json``) and loaded with ``xdrl.load_policy``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import read_summary, run_cli, run_script

ONNX_PLAYER = """
import sys
import gymnasium as gym
import numpy as np
import onnxruntime as ort

assert "torch" not in sys.modules
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
env = gym.make("CartPole-v1")
returns = []
for episode in range(10):
    obs, _ = env.reset(seed=1000 + episode)
    done, total = False, 0.0
    while not done:
        action = session.run(["action"], {"observation": obs[None].astype(np.float32)})[0][0]
        obs, reward, terminated, truncated, _ = env.step(int(action))
        total += reward
        done = terminated or truncated
    returns.append(total)
assert "torch" not in sys.modules
print(float(np.mean(returns)))
"""


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``xdrl-train experiment=cartpole_ppo`` once, checkpointing every 4,096 frames."""
    root = tmp_path_factory.mktemp("cartpole")
    run_dir = root / "run"
    result = run_cli(
        [
            "experiment=cartpole_ppo",
            "num_threads=1",
            "checkpoint.interval_frames=4096",
            "checkpoint.keep_last=1",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=root,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


def _cli(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_script(name, list(args), cwd)


def test_exported_onnx_plays_cartpole_without_torch(cartpole_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "cartpole.onnx"
    result = _cli("xdrl-export", str(cartpole_run), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert out.is_file() and "checked on 1000 env observations" in result.stdout
    play = subprocess.run(
        [sys.executable, "-c", ONNX_PLAYER, str(out)], capture_output=True, text=True, timeout=600
    )
    assert play.returncode == 0, play.stderr
    assert float(play.stdout.strip()) >= 475


def test_eval_best_checkpoint_and_json_shape(cartpole_run: Path, tmp_path: Path) -> None:
    summary = read_summary(cartpole_run)
    best = summary["best_checkpoint"]
    assert (cartpole_run / "checkpoints" / best).is_dir()
    record_file = tmp_path / "eval.json"
    result = _cli(
        "xdrl-eval",
        str(cartpole_run),
        "--checkpoint",
        "best",
        "--episodes",
        "5",
        "--json",
        str(record_file),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(record_file.read_text())
    assert set(record) == {
        "run_dir",
        "checkpoint",
        "frames",
        "episodes",
        "deterministic",
        "mode_from",
        "return_mean",
        "return_std",
        "returns",
        "lengths",
    }
    assert Path(record["checkpoint"]).name == best
    assert record["frames"] == int(best.split("-")[1])
    assert record["episodes"] == 5 and len(record["returns"]) == len(record["lengths"]) == 5
    assert record["deterministic"] is True
    assert record["mode_from"] == "the run's eval.deterministic=true"
    # CartPole pays 1 per step: each return is its episode's length
    assert record["returns"] == [float(n) for n in record["lengths"]]
    assert record["return_mean"] == pytest.approx(np.mean(record["returns"]))
    assert record["return_std"] == pytest.approx(np.std(record["returns"]))
    assert result.stdout.splitlines()[0].startswith("5 deterministic episodes")


def test_load_policy_acts_on_single_and_batched_observations(cartpole_run: Path) -> None:
    import gymnasium as gym

    import xdrl

    policy = xdrl.load_policy(cartpole_run)
    try:
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=7)
        total, done = 0.0, False
        while not done:
            action = policy(obs)
            assert np.shape(action) == ()
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += reward
            done = terminated or truncated
        assert total >= 475
        batch = np.stack([env.observation_space.sample() for _ in range(6)])
        assert policy(batch).shape == (6,)
        assert list(policy(batch)) == [int(policy(o)) for o in batch]
    finally:
        policy.close()
