"""Runs written by an earlier xdrl keep working: a run dir written before the package layout
moved (tests/fixtures/runs/cartpole_ppo_v1, made with ``xdrl-train experiment=cartpole_ppo
total_frames=1024 eval.interval_frames=512 eval.episodes=2 checkpoint.interval_frames=512
checkpoint.keep_last=1 checkpoint.keep_best=false`` at 1df069d) still evaluates, exports and
resumes; the saved state of an Atari env of that time (atari_ppo_v1: the checkpoint's config and
its ``env_state`` component, which pickles xdrl's Atari wrappers by module path) still loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, missing_extra, read_summary, run_cli, run_script

FIXTURES = REPO / "tests" / "fixtures" / "runs"
# the overrides the fixture was written with (a resume must not change them)
CARTPOLE_ARGS = [
    "experiment=cartpole_ppo",
    "seed=0",
    "logging=csv",
    "eval.interval_frames=512",
    "eval.episodes=2",
    "checkpoint.interval_frames=512",
    "checkpoint.keep_last=1",
    "checkpoint.keep_best=false",
]


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A copy of the old CartPole run dir (the fixture itself stays as written)."""
    return Path(shutil.copytree(FIXTURES / "cartpole_ppo_v1", tmp_path / "run"))


def test_an_old_run_dir_evaluates(old_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    result = run_script(
        "xdrl-eval", [str(old_run), "--episodes", "2", "--json", str(out)], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["frames"] == 1024 and record["checkpoint"].endswith("checkpoint-000000001024")
    assert record["episodes"] == 2 and record["returns"] == [float(n) for n in record["lengths"]]
    assert min(record["lengths"]) >= 8  # CartPole lasts at least 8 steps


def test_an_old_run_dir_exports_to_onnx(old_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "policy.onnx"
    result = run_script(
        "xdrl-export", [str(old_run), "--format", "onnx", "--out", str(out)], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.stat().st_size > 0


def test_an_old_run_dir_resumes(old_run: Path, tmp_path: Path) -> None:
    result = run_cli(
        [*CARTPOLE_ARGS, "total_frames=2048", f"hydra.run.dir={old_run}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(old_run)
    assert summary["status"] == "completed" and summary["total_frames"] == 2048
    assert "checkpoint-000000001024" in summary["resumed_from"]


@pytest.mark.skipif(missing_extra("atari") is not None, reason="needs the atari extra")
def test_an_old_atari_env_state_loads() -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from xdrl.policy.run_dir import saved_config
    from xdrl.training.env_state import EnvState, gym_envs

    config = saved_config(FIXTURES / "atari_ppo_v1")
    env = instantiate(OmegaConf.create(config["env"]))(num_envs=1, seed=0, device="cpu")
    try:
        fresh = [e.unwrapped.ale.getFrameNumber() for e in gym_envs(env) or []]
        state = EnvState(env, None)
        blob = torch.load(FIXTURES / "atari_ppo_v1" / "env_state.pt", weights_only=False)
        state.load_state_dict(blob)
        assert state.train_restored and state.approximate is None
        # the emulator of the saved run (4,096 frames trained, plus no-op and fire resets)
        restored = [e.unwrapped.ale.getFrameNumber() for e in gym_envs(env) or []]
        assert fresh[0] < 100 and restored == [4579]
    finally:
        env.close()


def test_every_renamed_module_exists_and_no_old_path_remains() -> None:
    """The rename table points at real modules, and no module is kept at its old path."""
    import importlib.util

    from xdrl.config.renames import RENAMES

    for old, new in RENAMES.items():
        assert importlib.util.find_spec(new) is not None, new
        old_file = REPO / (old.replace(".", "/") + ".py")
        assert not old_file.exists(), old_file


def test_a_saved_config_reads_with_todays_targets() -> None:
    import yaml

    from xdrl.config.renames import renamed_config

    path = FIXTURES / "cartpole_ppo_v1" / ".hydra" / "config.yaml"
    saved = yaml.safe_load(path.read_text())
    renamed = renamed_config(saved)
    assert saved["env"]["_target_"] == "xdrl.envs.make_env"  # as written, left as it was
    assert renamed["env"]["_target_"] == "xdrl.envs.factory.make_env"
    assert renamed["eval"]["_target_"] == "xdrl.config.settings.EvalSettings"
    assert renamed["logging"]["logger"]["_target_"] == "xdrl.training.loggers.CSVLogger"
    assert renamed["algorithm"]["build"]["_target_"] == "xdrl.algorithms.ppo.build"  # unmoved
    assert {
        k: v for k, v in renamed.items() if k not in {"env", "eval", "logging", "checkpoint"}
    } == {k: v for k, v in saved.items() if k not in {"env", "eval", "logging", "checkpoint"}}


def test_the_layout_names_every_file_and_folder_of_a_run_dir() -> None:
    """xdrl.run.layout answers "which files does a run dir hold?": every entry of a real run dir
    (and of its checkpoint) has its name there; Hydra's job log and TorchRL's components aside."""
    from xdrl.run import layout

    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)}
    run = FIXTURES / "cartpole_ppo_v1"
    (checkpoint,) = (run / layout.CHECKPOINT_DIR).iterdir()
    assert layout.CHECKPOINT_NAME.fullmatch(checkpoint.name)
    assert {p.name for p in run.iterdir()} - {"ppo_cartpole.log"} <= names
    assert {p.name for p in (run / layout.HYDRA_DIR).iterdir()} <= names
    assert {p.name for p in checkpoint.iterdir()} - {"components"} <= names
