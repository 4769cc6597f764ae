"""Stops say what happened (issue 47, item 5): every way a run stops early ends in one stderr line
that names the signal and says which checkpoint is on disk, with resume advice only where a
checkpoint exists and running the command again continues it; a stop while collector workers
start gives that line alone (no worker traceback, no leaked semaphores, no worker left).

The end-to-end runs wait for what the run writes (a checkpoint, a log line, a marker file of the
env in ``tests/stop_envs.py``) before sending a signal; none waits a fixed time.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import (
    ENV,
    WANDB_OFFLINE,
    XDRL_TRAIN,
    compose_config,
    read_summary,
    run_cli,
    start_script,
    wait_for,
)
from tests.test_workers import RUN as WORKER_RUN
from xdrl.run.layout import STOP_REQUEST_FILE
from xdrl.trainer_hooks.stop_request import write_stop_request

RUN = [*(o for o in WORKER_RUN if not o.startswith("logging=")), "logging=none"]
WORKERS = ["collector=multiprocess", "collector.workers=2"]
CONTINUE = "run the same command again to continue"


def _checkpoints(run_dir: Path) -> list[int]:
    """The frames of every whole checkpoint (its checksums written last) in ``run_dir``."""
    return sorted(
        int(p.name.split("-")[1])
        for p in (run_dir / "checkpoints").glob("checkpoint-*")
        if (p / "checksums.json").is_file()
    )


def _run_log(run_dir: Path) -> str:
    return "".join(p.read_text() for p in run_dir.glob("*.log"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR2])
def test_sigterm_prints_its_line_naming_the_checkpoint_it_wrote(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM stopped the run as Ctrl-C does but printed nothing on stderr."""
    run_dir = tmp_path / "run"
    args = [*RUN, "total_frames=1000000", f"run_dir={run_dir}"]
    proc = start_script("xdrl-train", args, tmp_path, WANDB_OFFLINE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: bool(_checkpoints(run_dir)), proc)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, stderr[-2000:]
    summary = read_summary(run_dir)
    frames = summary["total_frames"]
    assert summary["status"] == "stopped" and frames in _checkpoints(run_dir)
    assert stderr.splitlines() == [
        f"xdrl-train: stopped by {signum.name} at {frames:,} frames in {run_dir}; checkpoint at "
        f"{frames:,} frames; {CONTINUE}"
    ]


def test_a_second_ctrl_c_after_the_checkpoint_says_it_was_written(tmp_path: Path) -> None:
    """The first Ctrl-C stops the run, which writes its checkpoint, then closes its envs (the
    Trainer stops its collector); a second Ctrl-C there said "no checkpoint written at that
    point". ``env.batching=serial``: TorchRL's SerialEnv closes each gymnasium env."""
    run_dir, hold = tmp_path / "run", tmp_path / "hold"
    args = [*RUN, "env=gym", "env.id=tests.stop_envs:XdrlSlowClosingCorridor-v0",
            "env.batching=serial", f"+env.make_kwargs.hold={hold}", "total_frames=1000000",
            f"run_dir={run_dir}"]  # fmt: skip
    proc = start_script("xdrl-train", args, tmp_path, WANDB_OFFLINE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: bool(_checkpoints(run_dir)), proc)
        hold.touch()  # from here an env's close waits
        proc.send_signal(signal.SIGINT)
        wait_for(hold.with_name("hold.closing").exists, proc)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=300)
    finally:
        hold.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    summary = read_summary(run_dir)
    frames = summary["total_frames"]
    assert summary["status"] == "interrupted" and frames in _checkpoints(run_dir)
    assert summary["error"] == f"aborted by Ctrl-C; checkpoint at {frames:,} frames"
    assert stderr.splitlines() == [
        f"xdrl-train: aborted by Ctrl-C at {frames:,} frames in {run_dir}; checkpoint at "
        f"{frames:,} frames; {CONTINUE}"
    ]


# Worker 1's first env (seeded 2) raises at its first step: a worker failing at 0 frames.
CRASH_AT_FIRST_STEP = [
    "env.id=xdrl.envs.testing:SleepyCartPole-v1",
    "+env.make_kwargs.fail_seed=2",
    "+env.make_kwargs.fail_after_steps=0",
]


@pytest.mark.parametrize(
    ("env", "cause"),
    [
        (
            ["env.id=tests.stop_envs:XdrlWorkerResetFails-v0"],
            "RuntimeError: the simulator license server refused this worker",
        ),
        (CRASH_AT_FIRST_STEP, "simulated crash of the sub-env seeded 2"),
    ],
    ids=["reset-raises-as-the-worker-starts", "first-step-raises"],
)
def test_a_worker_failing_before_any_checkpoint_gets_no_resume_advice(
    tmp_path: Path, env: list[str], cause: str
) -> None:
    run_dir = tmp_path / "run"
    args = [*RUN, *WORKERS, "env=gym", *env, "total_frames=1024", f"run_dir={run_dir}"]
    result = run_cli(args, tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert re.match(r"xdrl-train: error: collector worker [01] failed: ", line), line
    assert cause in line
    assert line.endswith("; no checkpoint yet: the same command starts afresh"), line
    assert _checkpoints(run_dir) == []


def test_a_pruned_run_names_its_checkpoint_without_resume_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep does not run a pruned job again, so "run the same command again" was wrong."""
    import xdrl.run.lifecycle

    run_dir = tmp_path / "run"
    write_stop_request(run_dir, "pruned", "Optuna pruner: trial 3 at 256 frames")
    xdrl.run.lifecycle.run(compose_config([*RUN, "total_frames=512"], run_dir))
    assert _checkpoints(run_dir) == [256] and not (run_dir / STOP_REQUEST_FILE).exists()
    assert capsys.readouterr().err.splitlines() == [
        f"xdrl-train: pruned at 256 frames in {run_dir} (Optuna pruner: trial 3 at 256 frames); "
        "checkpoint at 256 frames"
    ]


def _spec(run_dir: Path, resume: str | None = None, enabled: bool = True) -> Any:
    """What the stop lines read of a run's spec (its run dir, resume and checkpoint.enabled)."""
    return SimpleNamespace(
        run_dir=str(run_dir), resume=resume, checkpoint=SimpleNamespace(enabled=enabled)
    )


def _save(run_dir: Path, frames: int, *, whole: bool = True) -> None:
    """A checkpoint folder at ``frames``; ``whole=False``: a save cut before its checksums."""
    folder = run_dir / "checkpoints" / f"checkpoint-{frames:012d}"
    folder.mkdir(parents=True)
    if whole:
        (folder / "checksums.json").write_text("{}")


NO_CHECKPOINT = "no checkpoint yet: the same command starts"
WITHOUT = "checkpoint at 512 frames; run the same command without resume={} to continue"


@pytest.mark.parametrize(
    ("saved", "resume", "frames", "line"),
    [
        ([], None, 512, f"{NO_CHECKPOINT} afresh"),
        ([256, 512], None, 512, f"checkpoint at 512 frames; {CONTINUE}"),
        ([256], None, 512, f"no checkpoint at 512 frames, the last is at 256; {CONTINUE}"),
        ([256], None, None, f"checkpoint at 256 frames; {CONTINUE}"),  # stopped before training
        ([], "/elsewhere", 512, f"{NO_CHECKPOINT} again from resume=/elsewhere"),
        ([512], "/elsewhere", 512, WITHOUT.format("/elsewhere")),
        ([512], "never", 512, WITHOUT.format("never")),
        ([512], "RUN_DIR", 512, f"checkpoint at 512 frames; {CONTINUE}"),
    ],
)
def test_what_was_saved_is_read_from_disk(
    tmp_path: Path, saved: list[int], resume: str | None, frames: int | None, line: str
) -> None:
    from xdrl.run.lifecycle import _what_was_saved

    run_dir = tmp_path / "run"
    for at in saved:
        _save(run_dir, at)
    _save(run_dir, 768, whole=False)  # a save a second Ctrl-C cut short: not a checkpoint
    resume = str(run_dir) if resume == "RUN_DIR" else resume
    assert _what_was_saved(_spec(run_dir, resume), frames) == line


def test_a_failure_line_advises_a_resume_only_from_a_checkpoint(tmp_path: Path) -> None:
    from xdrl.run.lifecycle import _after_failure, _what_was_saved

    off = _spec(tmp_path, enabled=False)
    assert _what_was_saved(off, 512) == "logs written, no checkpoint (checkpoint.enabled=false)"
    assert _after_failure(off, 512) == "no checkpoint (checkpoint.enabled=false)"
    assert _after_failure(_spec(tmp_path), 0) == "no checkpoint yet: the same command starts afresh"
    _save(tmp_path, 256)
    resumed = "run the same command to resume from the last checkpoint"
    assert _after_failure(_spec(tmp_path), 512) == resumed


def _spawned_workers(pid: int) -> list[int]:
    """The children of ``pid`` that multiprocessing spawned (collector workers, which import
    torch for seconds before they ignore the stop signals)."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except OSError:
                continue
    return found


def _group_gone(pgid: int) -> bool:
    """Whether every process of the group ``pgid`` has exited (zombies count as exited)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_workers_start_gives_one_line_and_leaves_nothing(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """The signal goes to the whole process group (a terminal's Ctrl-C, a scheduler's SIGTERM)
    once the run has spawned its two workers, which then import torch for seconds. It gave two
    interleaved worker tracebacks (SIGINT), or no line and a leaked-semaphore warning from the
    resource tracker (SIGTERM). A real process, not the tests' warm interpreter: the resource
    tracker and the workers are the run's own, and their output is checked after they exit."""
    run_dir, err = tmp_path / "run", tmp_path / "stderr.txt"
    args = [*RUN, *WORKERS, "total_frames=1000000", f"run_dir={run_dir}"]
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [XDRL_TRAIN, *args], cwd=tmp_path, env=ENV, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(lambda: len(_spawned_workers(proc.pid)) == 2, proc, log=err)
        os.killpg(proc.pid, signum)
        code = proc.wait(timeout=300)
        deadline = time.monotonic() + 120  # a safety net: the group's last process is gone
        while not _group_gone(proc.pid):
            assert time.monotonic() < deadline, "a process of the run outlived it"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    what = "aborted by Ctrl-C" if signum == signal.SIGINT else "stopped by SIGTERM"
    assert code == 128 + signum
    assert err.read_text().splitlines() == [
        f"xdrl-train: {what} before training started in {run_dir}; no checkpoint yet: the same "
        "command starts afresh"
    ]
    assert "Collector workers started" not in _run_log(run_dir)  # it stopped while they started
