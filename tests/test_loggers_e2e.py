"""What `xdrl-train` logs, read back from each backend with the backend's own reader."""

from __future__ import annotations

import socket
from pathlib import Path

import imageio.v3 as iio
import pytest

from tests.conftest import SMALL, read_scalars, read_summary, run_cli
from tests.wandb_reader import offline_runs, read_config, read_history

NAMESPACES = ("collection/agents/", "train/agents/", "counters/", "timers/", "eval/deterministic/")
EVERY_ITERATION = (
    "collection/agents/reward/reward_mean",
    "train/agents/loss_objective",
    "counters/total_frames",
    "timers/fps",
)
MO = ["env=gym", "env.id=deep-sea-treasure-v0", "env.reward_weights=[0.3,0.7]"]
MO_KEYS = (
    "collection/agents/reward/episode_reward_mean",
    "collection/agents/reward/objective_0/episode_reward_mean",
    "collection/agents/reward/objective_1/episode_reward_mean",
    "eval/deterministic/reward/episode_reward_mean",
    "eval/deterministic/reward/objective_0/episode_reward_mean",
    "eval/deterministic/reward/objective_1/episode_reward_mean",
)


def _train(tmp_path: Path, *overrides: str) -> Path:
    run_dir = tmp_path / "run"
    result = run_cli([*SMALL, *overrides, f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def _user_keys(keys) -> set[str]:
    return {k for k in keys if not k.startswith("_")}


def _tensorboard_scalars(log_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = log_dir.rglob("events.out.tfevents.*")
    acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_wandb_offline_history_has_one_row_per_iteration(tmp_path: Path) -> None:
    run_dir = _train(tmp_path, "logging=wandb")
    (run,) = offline_runs(run_dir)
    rows = read_history(run)
    assert [row["_step"] for row in rows] == [0, 256, 512]  # pre-training eval + 2 iterations
    for row in rows:
        assert "counters/total_frames" in row and row["counters/total_frames"] == row["_step"]
        assert all(k.startswith(NAMESPACES) for k in _user_keys(row)), sorted(_user_keys(row))
    for key in EVERY_ITERATION:
        assert all(key in row for row in rows[1:]), key
    assert "eval/deterministic/reward/episode_reward_mean" in rows[-1]
    config = read_config(run)
    assert config["env"]["id"] == "CartPole-v1"  # TorchRL must not overwrite "env"


def test_csv_keys_are_namespaced_and_logged_at_collected_frames(tmp_path: Path) -> None:
    scalars = read_scalars(_train(tmp_path, "logging=csv") / "logs")
    assert all(name.startswith(NAMESPACES) for name in scalars), sorted(scalars)
    for key in EVERY_ITERATION:
        assert [s for s, _ in scalars[key]][-2:] == [256, 512], key


def test_tensorboard_event_files_hold_the_same_keys(tmp_path: Path) -> None:
    tags = _tensorboard_scalars(_train(tmp_path, "logging=tensorboard") / "logs")
    assert all(tag.startswith(NAMESPACES) for tag in tags), sorted(tags)
    for key in EVERY_ITERATION:
        assert tags[key][-2:] == [256, 512], key


@pytest.mark.parametrize("logging", ["csv", "wandb", "tensorboard"])
def test_multi_objective_keys_reach_every_logger(tmp_path: Path, logging: str) -> None:
    run_dir = _train(tmp_path, *MO, f"logging={logging}", "eval.max_steps=100")
    if logging == "csv":
        keys = set(read_scalars(run_dir / "logs"))
    elif logging == "tensorboard":
        keys = set(_tensorboard_scalars(run_dir / "logs"))
    else:
        keys = {k for row in read_history(offline_runs(run_dir)[0]) for k in row}
    missing = [k for k in MO_KEYS if k not in keys]
    assert not missing, (missing, sorted(keys))


@pytest.mark.parametrize("logging", ["csv", "wandb"])
def test_eval_video_is_a_playable_file(tmp_path: Path, logging: str) -> None:
    run_dir = _train(tmp_path, "eval=video", f"logging={logging}")
    videos = sorted(run_dir.rglob("*.mp4")) + sorted(run_dir.rglob("*.gif"))
    assert videos, "no video written"
    frames = iio.imread(videos[-1])
    assert frames.ndim == 4 and frames.shape[0] > 1 and frames.shape[-1] == 3
    assert frames.std() > 0  # not a blank clip


def test_wandb_without_a_server_falls_back_to_offline(tmp_path: Path) -> None:
    """No network (a closed port): the run trains to the end, logging offline; one warning
    names `wandb sync` (issue 11, problem 4)."""
    with socket.socket() as sock:  # a port nothing listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run_dir = tmp_path / "run"
    result = run_cli(
        [*SMALL, "logging=wandb", "logging.logger.init_timeout_s=3", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
        env={
            "WANDB_MODE": "online",
            "WANDB_BASE_URL": f"http://127.0.0.1:{port}",
            "WANDB_API_KEY": "x" * 40,
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = Path(read_summary(run_dir)["wandb_offline"])  # the folder the run logged to
    assert run in offline_runs(run_dir)  # (a slow service can leave one empty attempt beside it)
    output = result.stdout + result.stderr
    assert "W&B could not start online" in output
    assert f"wandb sync {run}" in output
    assert [row["_step"] for row in read_history(run)] == [0, 256, 512]
