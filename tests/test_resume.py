"""Checkpoints and resume: SIGKILL and restart, SIGTERM and Ctrl-C, corrupt checkpoints, the run-dir
lock, config changes, a full disk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.conftest import (
    SMALL,
    WANDB_OFFLINE,
    WarmProcess,
    compose_config,
    read_scalars,
    read_summary,
    run_cli,
    start_script,
    wait_for,
)
from tests.wandb_reader import offline_runs, read_history
from xdrl.training.checkpointing import verify

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


def _checkpoints(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "checkpoints").glob("checkpoint-*"))


def _start(args: list[str], cwd: Path) -> subprocess.Popen | WarmProcess:
    return start_script("xdrl-train", args, cwd, WANDB_OFFLINE, stderr=subprocess.PIPE)


def _last_logged_step(run_dir: Path) -> int:
    """The highest step the run has logged so far (CSV or W&B), -1 before any."""
    step_file = run_dir / "wandb-last-step.txt"
    if step_file.exists():
        text = step_file.read_text().strip()
        return int(text) if text else -1
    try:
        rows = read_scalars(run_dir / "logs").get("counters/total_frames", [])
    except (ValueError, IndexError):  # a row caught mid-write
        return -1
    return rows[-1][0] if rows else -1


def _kill_after_logging_past_a_checkpoint(
    args: list[str], cwd: Path, run_dir: Path, budget: int = BUDGET
) -> None:
    """SIGKILL once the run has logged steps past its latest checkpoint: the restart must neither
    write those steps twice nor anything else in their place (the old race: killed at a
    checkpoint on a quiet machine, a little later on a busy one). The killed run has a budget
    it cannot finish before the kill, however busy the machine; the restart finishes the small
    one."""
    big = [a for a in args if not a.startswith("total_frames=")] + ["total_frames=1000000"]
    proc = _start(big, cwd)

    def logged_past_a_checkpoint() -> bool:
        found = _checkpoints(run_dir)
        return bool(found) and _last_logged_step(run_dir) > _frames(found[-1])

    wait_for(logged_past_a_checkpoint, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    frames = _frames(_checkpoints(run_dir)[-1])
    assert frames < budget, "killed too late to test a resume"


def _frames(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def _strictly_increasing(steps: list[int]) -> bool:
    return all(b > a for a, b in zip(steps, steps[1:], strict=False))


@pytest.mark.parametrize("logging", ["csv", "wandb"])
def test_sigkill_then_restart_resumes_without_duplicate_steps(tmp_path: Path, logging: str) -> None:
    run_dir = tmp_path / "run"
    # checkpoints at 1024, 2048, ...: three logged iterations between two for the kill to land
    # in; the restart's budget leaves 27 batches after the first for a slow poll to notice it
    budget = 4 * BUDGET
    args = [
        *[a for a in ARGS if not a.startswith("total_frames=")],
        f"total_frames={budget}",
        "checkpoint.interval_frames=1000",
        f"logging={logging}",
        f"hydra.run.dir={run_dir}",
    ]
    _kill_after_logging_past_a_checkpoint(args, tmp_path, run_dir, budget)

    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["total_frames"] == budget
    assert "resumed_from" in summary

    if logging == "csv":
        scalars = read_scalars(run_dir / "logs")
        assert scalars["counters/total_frames"][-1] == (budget, budget)
        for name, rows in scalars.items():
            assert _strictly_increasing([s for s, _ in rows]), name
        # counters continue from the checkpoint: one row per 256-frame batch, no gap but the lost
        steps = [s for s, _ in scalars["counters/total_frames"]]
        assert steps[0] == 0 and steps[-1] == budget
    else:
        runs = offline_runs(run_dir)
        assert len(runs) == 2, runs
        rows = [row for run in runs for row in read_history(run)]
        assert _strictly_increasing([row["_step"] for row in rows])
        assert rows[-1]["counters/total_frames"] == budget
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
    wait_for(lambda: any((run_dir / "logs").rglob("total_frames.csv")), proc)
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


# Corruption: two checkpoints (512 and 1024 frames), the latest damaged in one way each time.
CORRUPT_ARGS = [*ARGS, "total_frames=1024", "logging=none", "eval.enabled=false"]


def _truncate_a_tensor(checkpoint: Path) -> Path:
    target = next((checkpoint / "components").glob("*-policy/state.pt"))
    os.truncate(target, 10)
    return target


def _delete_a_file(checkpoint: Path) -> Path:
    target = next((checkpoint / "components").glob("*-optimizer/state.pt"))
    target.unlink()
    return target


def _alter_a_json(checkpoint: Path) -> Path:
    target = checkpoint / "manifest.json"
    target.write_text(target.read_text().replace("{", '{"altered": 1, ', 1))
    return target


def _flip_a_byte(checkpoint: Path) -> Path:
    """Same size, one byte changed: only the checksum can tell."""
    target = next((checkpoint / "components").glob("*-collector/state.pt"))
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    return target


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("corrupt") / "run"
    result = run_cli([*CORRUPT_ARGS, f"hydra.run.dir={run_dir}"], cwd=run_dir.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [_frames(c) for c in _checkpoints(run_dir)] == [512, 1024]
    return run_dir


@pytest.mark.parametrize(
    "damage", [_truncate_a_tensor, _delete_a_file, _alter_a_json, _flip_a_byte]
)
def test_a_damaged_checkpoint_is_skipped_with_one_warning_and_the_previous_loads(
    two_checkpoints: Path, tmp_path: Path, damage, caplog: pytest.LogCaptureFixture
) -> None:
    from xdrl.training.build import build_trainer

    run_dir = tmp_path / "run"
    shutil.copytree(two_checkpoints, run_dir)
    previous, latest = _checkpoints(run_dir)
    damaged = damage(latest)

    caplog.set_level("WARNING", logger="xdrl")
    resumed = build_trainer(compose_config(CORRUPT_ARGS, run_dir))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    reference = build_trainer(
        compose_config([*CORRUPT_ARGS, f"resume={previous}"], tmp_path / "ref")
    )
    try:
        assert resumed.resumed_from == str(previous)
        assert len(warnings) == 1 and str(damaged) in warnings[0], warnings
        weights = resumed.trainer.loss_module.state_dict()
        expected = reference.trainer.loss_module.state_dict()
        assert weights.keys() == expected.keys()
        assert all(torch.equal(weights[k], expected[k]) for k in expected)
    finally:
        resumed.close()
        reference.close()


def test_ctrl_c_checkpoints_and_the_restart_loses_no_frames(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*ARGS, "total_frames=100000", "checkpoint.interval_frames=100000", "logging=csv"]
    proc = _start([*args, f"hydra.run.dir={run_dir}"], tmp_path)
    wait_for(lambda: _last_logged_step(run_dir) > 0, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xdrl-train: interrupted at"), stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "interrupted"
    stopped_at = summary["total_frames"]
    assert 0 < stopped_at < 100000
    assert _frames(_checkpoints(run_dir)[-1]) == stopped_at

    result = run_cli(
        [*args, f"total_frames={stopped_at + 512}", f"hydra.run.dir={run_dir}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["total_frames"] == stopped_at + 512
    assert summary["resumed_from"].endswith(f"{stopped_at:012d}")
    steps = [s for s, _ in read_scalars(run_dir / "logs")["counters/total_frames"]]
    assert _strictly_increasing(steps)
    assert set(range(256, stopped_at + 512 + 1, 256)) <= set(steps)  # every iteration, once


def test_a_second_run_in_a_live_run_dir_stops_with_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*ARGS, "total_frames=100000", "checkpoint.interval_frames=100000", "logging=csv"]
    args += ["eval.enabled=false", f"hydra.run.dir={run_dir}"]
    first = _start(args, tmp_path)
    try:
        wait_for(lambda: _last_logged_step(run_dir) > 0, first)
        second = run_cli([*args, "seed=1"], cwd=tmp_path)
        assert first.poll() is None, "the first run ended before the second tried its dir"
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert second.returncode == 2, second.stderr[-2000:]
    line = second.stderr.strip()
    assert "\n" not in line, line
    assert line.startswith(
        f"xdrl-train: config error: run_dir: {run_dir} is in use by pid {first.pid} on host "
    )
    assert read_summary(run_dir)["status"] == "interrupted"  # the first run's, not the second's
    assert "seed: 0" in (run_dir / ".hydra" / "config.yaml").read_text()  # not rewritten


def test_a_lock_left_by_a_dead_run_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = {"pid": pid, "host": socket.gethostname(), "since": "2026-01-01T00:00:00Z"}
    (run_dir / ".xdrl-run.lock").write_text(json.dumps(record))
    result = run_cli(
        [*SMALL, "logging=none", "eval.enabled=false", f"hydra.run.dir={run_dir}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Took over the lock of {run_dir} left by pid {pid}" in result.stdout
    assert read_summary(run_dir)["status"] == "completed"


CHANGE_ARGS = [*ARGS, "total_frames=512", "logging=csv", "eval.enabled=false"]


def test_resume_after_config_changes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*CHANGE_ARGS, f"hydra.run.dir={run_dir}"]
    assert run_cli(args, cwd=tmp_path).returncode == 0
    changed = [*args, "algorithm.build.actor_cells=[32,32]", "frames_per_batch=128"]

    # what shapes the model or the data: one line naming each key, and how to start afresh
    refused = run_cli(changed, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-2000:]
    line = refused.stderr.strip()
    assert "\n" not in line and line.startswith("xdrl-train: config error: resume:"), line
    assert "algorithm.build.actor_cells [64, 64] -> [32, 32]" in line
    assert "frames_per_batch 256 -> 128" in line and "resume=never" in line

    # anything else resumes, says what changed and keeps the previous config
    longer = run_cli([*args, "total_frames=1024"], cwd=tmp_path)
    assert longer.returncode == 0, longer.stderr[-2000:]
    assert "Resuming with a changed config (total_frames: 512 -> 1024)" in longer.stdout
    summary = read_summary(run_dir)
    assert summary["total_frames"] == 1024 and summary["resumed_from"].endswith("000000000512")
    kept = yaml.safe_load((run_dir / ".hydra" / "history" / "1-config.yaml").read_text())
    assert kept["total_frames"] == 512

    # resume=never starts afresh in the same dir, the earlier output set aside
    fresh = run_cli([*changed, "resume=never"], cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    summary = read_summary(run_dir)
    assert "resumed_from" not in summary and summary["total_frames"] == 512
    assert (run_dir / "superseded" / "1" / "checkpoints").is_dir()
    steps = [s for s, _ in read_scalars(run_dir / "logs")["counters/total_frames"]]
    assert _strictly_increasing(steps) and steps[-1] == 512


def test_a_full_disk_fails_with_one_line_and_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    # 512 KiB holds the run's logs (~0.1 MiB: a page per CSV file) and one checkpoint (~0.23
    # MiB), not a second one beside it: the next save fills the disk
    mount = ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        run_dir = disk / "run"
        args = [*ARGS, "total_frames=100000", "checkpoint.interval_frames=200"]
        args += ["checkpoint.keep_last=1", "eval.enabled=false", f"hydra.run.dir={run_dir}"]
        result = run_cli(args, cwd=tmp_path)
        assert result.returncode == 1, result.stderr[-2000:]
        line = result.stderr.strip()
        assert "\n" not in line, line
        assert line.startswith(f"xdrl-train: error: No space left on device: {run_dir}"), line
        summary = read_summary(run_dir)
        assert summary["status"] == "failed" and "No space left" in summary["error"]
        (survivor,) = _checkpoints(run_dir)
        verify(survivor)
        assert "Traceback" in next(run_dir.glob("*.log")).read_text()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


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
