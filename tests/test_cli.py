"""End-to-end: the installed ``xdrl-train`` console script, as a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SMALL, read_scalars, read_summary, run_cli


def _run_dir(cwd: Path) -> Path:
    (summary,) = cwd.glob("outputs/*/*/summary.json")
    return summary.parent


def test_default_job_writes_config_logs_and_summary(tmp_path: Path) -> None:
    result = run_cli(SMALL, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = _run_dir(tmp_path)
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["total_frames"] == 512
    assert summary["frames_per_second"] > 0
    # num_threads auto: one thread below 128 units (the default PPO network is 64 wide)
    assert summary["segments"][-1]["torch_threads"] == 1
    assert "eval/deterministic/reward/episode_reward_mean" in summary["eval"]
    scalars = read_scalars(run_dir / "logs")
    assert scalars["counters/total_frames"] == [(0, 0.0), (256, 256.0), (512, 512.0)]
    for key in (
        "collection/agents/reward/reward_mean",
        "train/agents/loss_objective",
        "timers/fps",
        "eval/deterministic/reward/episode_reward_mean",
    ):
        assert key in scalars, sorted(scalars)
    # evaluated before training (step 0) and at the end (512)
    eval_steps = [s for s, _ in scalars["eval/deterministic/reward/episode_reward_mean"]]
    assert eval_steps[0] == 0 and eval_steps[-1] == 512


def test_continuous_env_trains_with_the_same_algorithm_file(tmp_path: Path) -> None:
    result = run_cli([*SMALL, "env=pendulum", "logging=none"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert read_summary(_run_dir(tmp_path))["status"] == "completed"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("env.id=CartPol-v1", "env.id"),
        ("eval.interval_frames=-5", "eval.interval_frames"),
        ("frames_per_batch=250", "frames_per_batch"),
        ("algorithm.build.minibatch_size=100", "algorithm.build.minibatch_size"),
        ("+algorithm.build.clip_epsilo=0.1", "algorithm.build"),
    ],
)
def test_bad_config_stops_before_training_with_one_line(
    tmp_path: Path, override: str, key: str
) -> None:
    result = run_cli([*SMALL, override], cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"xdrl-train: config error: {key}")
    assert not list(tmp_path.glob("outputs/*/*/logs/*/scalars/counters"))


def test_unknown_env_suggests_the_close_id(tmp_path: Path) -> None:
    result = run_cli(["env.id=CartPol-v1"], cwd=tmp_path, timeout=120)
    assert "did you mean 'CartPole-v1'" in result.stderr


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("total_frame=100", "total_frame: not a config key; did you mean total_frames?"),
        ("env=cartpol", "env: no option 'cartpol'; did you mean env=cartpole?"),
        (
            "algorithm.build.clip_epsilo=0.1",
            "algorithm.build.clip_epsilo: not a config key; did you mean "
            "algorithm.build.clip_epsilon?",
        ),
        (  # a sweep without -m (it said "seed=0,1: not a config key")
            "seed=0,1",
            "seed: '0,1' is a sweep; add -m to run one job per value, or give one value "
            "(seed=[0,1] for a list)",
        ),
    ],
)
def test_misspelt_key_or_option_is_one_line_with_a_suggestion(
    tmp_path: Path, override: str, line: str
) -> None:
    result = run_cli([override], cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == f"xdrl-train: config error: {line}"
    assert not (tmp_path / "outputs").exists()  # stopped before Hydra made a run dir


@pytest.mark.parametrize("mode", [[], ["-m"], ["--cfg", "job"], ["--info", "config"]])
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["algorithm=ppx"], "algorithm: no option 'ppx'; did you mean algorithm=ppo?"),
        (
            ["algorithm.build.clip_epsilo=0.1"],
            "algorithm.build.clip_epsilo: not a config key; did you mean "
            "algorithm.build.clip_epsilon?",
        ),
    ],
)
def test_a_typo_is_the_same_line_and_exit_2_in_every_mode(
    tmp_path: Path, mode: list[str], args: list[str], line: str
) -> None:
    """Sweeps and Hydra's printing modes say what a single run says (issue 38; Hydra's own
    text was several lines with exit 1)."""
    result = run_cli([*mode, *args], cwd=tmp_path, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (2, f"xdrl-train: config error: {line}")
    assert result.stdout == ""  # --cfg printed nothing
    assert list(tmp_path.iterdir()) == []  # no outputs/ or multirun/


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["algorithm=ppo,ppx", "seed=0,1"],
         "algorithm: no option 'ppx'; did you mean algorithm=ppo?"),
        (["env=glob(*)", "algorithm=a2c,dqq"],
         "algorithm: no option 'dqq'; did you mean algorithm=dqn?"),
        (
            ["hydra/sweeper=optuna", "algorithm.optimizer.lrr=tag(log, interval(1e-4, 3e-3))"],
            "algorithm.optimizer.lrr: not a config key; did you mean algorithm.optimizer.lr?",
        ),
        (["seed=0,1", "total_frame=range(256,1024,256)"],
         "total_frame: not a config key; did you mean total_frames?"),
    ],
)  # fmt: skip
def test_a_sweep_looks_up_every_swept_option_and_key(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """Every value of a swept group is an option, whatever its place in the sweep; a swept key
    (a choice, a range, Optuna's interval) is a config key."""
    result = run_cli(["-m", *args], cwd=tmp_path, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (2, f"xdrl-train: config error: {line}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("flags", "flag"), [(["--cfg", "job"], "--cfg"), (["--info", "config"], "--info")]
)
def test_a_sweep_with_a_printing_mode_is_one_line(
    tmp_path: Path, flags: list[str], flag: str
) -> None:
    """Hydra refuses ``-m`` with ``--cfg`` or ``--info`` by a traceback (a ValueError)."""
    result = run_cli(["-m", *flags, "seed=0,1"], cwd=tmp_path, timeout=60)
    line = (
        f"-m: a sweep cannot be combined with {flag} (Hydra runs one mode at a time); drop -m "
        f"to print the config a job gets, or {flag} to sweep"
    )
    assert (result.returncode, result.stderr.strip()) == (2, f"xdrl-train: config error: {line}")
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_without_typos_runs_and_cfg_job_prints(tmp_path: Path) -> None:
    """The control: the pre-check lets correct sweeps and ``--cfg job`` through."""
    result = run_cli(["--cfg", "job", "algorithm=a2c"], cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "xdrl.algorithms.a2c.build" in result.stdout
    args = ["-m", *SMALL, "logging=none", "eval=none", "checkpoint=none", "algorithm=ppo,a2c",
            "hydra.sweep.dir=sweep"]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [read_summary(p)["status"] for p in sorted((tmp_path / "sweep").glob("[0-9]*"))] == [
        "completed",
        "completed",
    ]


@pytest.mark.parametrize("flag", ["--help", "--cfg=job", "--info"])
def test_fast_startup_commands_import_no_heavy_library(flag: str, tmp_path: Path) -> None:
    """What makes these commands fast, checked without a clock (the suite runs on busy
    machines; `scripts/bench.py --mode startup` measures the time): Python's own import log of the
    real command names no torch, torchrl or wandb module."""
    result = run_cli([flag], cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "env" in result.stdout
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "hydra" in imported  # the log is there
    assert not imported & {"torch", "torchrl", "tensordict", "wandb"}


def test_exit_without_teardown_keeps_what_a_normal_exit_does(tmp_path: Path) -> None:
    """Threads joined, a thread pool's exit callback run first (it wakes the thread the join
    waits for, as concurrent.futures and joblib's loky do), atexit handlers run, buffered output
    flushed, the exit code kept; only the interpreter's module teardown (here: a module-level
    ``__del__``) is skipped."""
    import subprocess
    import sys

    marker = tmp_path / "thread-done"
    code = f"""
import atexit, sys, threading, time
from xdrl.cli import exit_without_teardown

class Teardown:
    def __del__(self):
        print("teardown ran", flush=True)

keep = Teardown()
def late():
    time.sleep(0.3)
    open({str(marker)!r}, "w").close()
threading.Thread(target=late).start()
woken = threading.Event()
threading.Thread(target=woken.wait).start()  # a pool's manager thread: waits to be told to stop
threading._register_atexit(woken.set)
atexit.register(lambda: print("atexit ran"))
print("buffered", end="")
exit_without_teardown(sys.argv[1] if sys.argv[1] == "boom" else int(sys.argv[1]))
"""
    out = subprocess.run(
        [sys.executable, "-c", code, "3"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 3
    assert out.stdout == "bufferedatexit ran\n"  # no "teardown ran": finalization skipped
    assert marker.exists()  # the non-daemon thread finished first
    failed = subprocess.run(
        [sys.executable, "-c", code, "boom"], capture_output=True, text=True, timeout=120
    )
    assert (failed.returncode, failed.stderr.strip()) == (1, "boom")
