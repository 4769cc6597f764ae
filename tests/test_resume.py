"""Checkpoints and resume: SIGKILL and restart, SIGTERM, corrupt checkpoints."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import XDRL_TRAIN, read_scalars, read_summary, run_cli
from tests.wandb_reader import offline_runs, read_history

BUDGET = 3072
ARGS = [
    f"total_frames={BUDGET}",
    "frames_per_batch=256",
    "env.num_envs=4",
    "algorithm.build.epochs=2",
    "eval.interval_frames=1024",
    "eval.episodes=2",
    "eval.max_steps=50",
    "checkpoint.interval_frames=500",
    "checkpoint.keep_last=5",
]
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def _checkpoints(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "checkpoints").glob("checkpoint-*"))


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [XDRL_TRAIN, *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"run ended early: {proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _kill_after_second_checkpoint(args: list[str], cwd: Path, run_dir: Path) -> None:
    proc = _start(args, cwd)
    _wait_for(lambda: len(_checkpoints(run_dir)) >= 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    frames = int(_checkpoints(run_dir)[-1].name.split("-")[-1])
    assert frames < BUDGET, "killed too late to test a resume"


def _strictly_increasing(steps: list[int]) -> bool:
    return all(b > a for a, b in zip(steps, steps[1:], strict=False))


@pytest.mark.parametrize("logging", ["csv", "wandb"])
def test_sigkill_then_restart_resumes_without_duplicate_steps(tmp_path: Path, logging: str) -> None:
    run_dir = tmp_path / "run"
    args = [*ARGS, f"logging={logging}", f"hydra.run.dir={run_dir}"]
    _kill_after_second_checkpoint(args, tmp_path, run_dir)

    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["total_frames"] == BUDGET
    assert "resumed_from" in summary

    if logging == "csv":
        scalars = read_scalars(run_dir / "logs")
        assert scalars["counters/total_frames"][-1] == (BUDGET, BUDGET)
        for name, rows in scalars.items():
            assert _strictly_increasing([s for s, _ in rows]), name
        # counters continue from the checkpoint: one row per 256-frame batch, no gap but the lost
        steps = [s for s, _ in scalars["counters/total_frames"]]
        assert steps[0] == 0 and steps[-1] == BUDGET
    else:
        runs = offline_runs(run_dir)
        assert len(runs) == 2, runs
        rows = [row for run in runs for row in read_history(run)]
        assert _strictly_increasing([row["_step"] for row in rows])
        assert rows[-1]["counters/total_frames"] == BUDGET
        assert {read_history(r)[0]["_step"] for r in runs[1:]} != {0}


def test_sigterm_checkpoints_then_restart_continues(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [
        *ARGS,
        "total_frames=100000",
        "checkpoint.interval_frames=100000",
        "logging=csv",
        f"hydra.run.dir={run_dir}",
    ]
    proc = _start(args, tmp_path)
    _wait_for(lambda: any((run_dir / "logs").rglob("total_frames.csv")), proc)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    summary = read_summary(run_dir)
    assert summary["status"] == "stopped"
    stopped_at = summary["total_frames"]
    assert 0 < stopped_at < 100000
    assert _checkpoints(run_dir)[-1].name.endswith(f"{stopped_at:012d}")

    result = run_cli(
        [*args[:-4], f"total_frames={stopped_at + 512}", "logging=csv", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["total_frames"] == stopped_at + 512
    assert summary["resumed_from"].endswith(f"{stopped_at:012d}")


def test_corrupt_latest_checkpoint_falls_back_to_the_previous(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*ARGS, "total_frames=1024", "logging=none", f"hydra.run.dir={run_dir}"]
    assert run_cli(args, cwd=tmp_path).returncode == 0
    latest, previous = _checkpoints(run_dir)[-1], _checkpoints(run_dir)[-2]
    for payload in (latest / "components").rglob("*.memmap"):
        payload.write_bytes(b"\0")  # truncated mid-write
    shutil.rmtree(latest / "components" / next(iter(os.listdir(latest / "components"))))
    result = run_cli(
        [*args[:-3], "total_frames=1536", "logging=none", f"hydra.run.dir={run_dir}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["resumed_from"] == str(previous)
    assert summary["total_frames"] == 1536


def test_resume_from_another_run_dir(tmp_path: Path) -> None:
    first = tmp_path / "first"
    args = [*ARGS, "total_frames=512", "logging=none"]
    assert run_cli([*args, f"hydra.run.dir={first}"], cwd=tmp_path).returncode == 0
    second = tmp_path / "second"
    result = run_cli(
        [
            *args[:-2],
            "total_frames=1024",
            "logging=none",
            f"resume={first}",
            f"hydra.run.dir={second}",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(second)
    assert summary["total_frames"] == 1024 and str(first) in summary["resumed_from"]


def test_resume_from_a_missing_path_is_a_config_error(tmp_path: Path) -> None:
    result = run_cli(["resume=/nonexistent/run"], cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("xdrl-train: config error: resume:")
