"""xdrl's Optuna sweeper through ``xdrl-train -m``: a sample a key cannot take fails its trial
only, a search space with no valid value or reversed bounds is one line before any trial, the
best trial so far is on disk after every trial, and the study in SQLite is continued by the same
command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from tests.conftest import STOPPABLE_JOB, ctrl_c_when, run_cli
from tests.test_sweeps import TINY

OBJECTIVE = "eval/deterministic/reward/episode_reward_mean"
# TPE's random start-up trials over epochs in {0, 1}: with seed 2, trial 0 samples 0 (invalid)
# and trial 1 samples 1 (seen with optuna.samplers.TPESampler(seed=2) over this search space).
SEARCH = [
    "-m",
    "hparams_search=ppo_cartpole",
    "hydra.sweeper.sampler.seed=2",
    "algorithm.build.epochs=range(0,2)",
    *(o for o in TINY if not o.startswith("algorithm.build.epochs=")),
    "num_threads=1",
]


def _trials(db: Path) -> list[tuple[int, str]]:
    """(number, state) of every trial in the study's SQLite file, read without Optuna."""
    with sqlite3.connect(db) as con:
        return con.execute("SELECT number, state FROM trials ORDER BY number").fetchall()


def _epochs_sampled(sweep_dir: Path, job: str) -> int:
    overrides = yaml.safe_load((sweep_dir / job / ".hydra" / "overrides.yaml").read_text())
    (value,) = [o.split("=", 1)[1] for o in overrides if o.startswith("algorithm.build.epochs=")]
    return int(value)


def test_an_invalid_sample_fails_its_trial_only_and_the_study_continues(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        [*SEARCH, "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    logged = result.stdout + result.stderr
    assert logged.count("range(0,2) can sample invalid values") == 1  # said once, up front
    sampled = {job: _epochs_sampled(sweep_dir, job) for job in ("0", "1")}
    assert sorted(sampled.values()) == [0, 1]
    bad, good = sorted(sampled, key=sampled.get)  # type: ignore[arg-type]
    assert _trials(sweep_dir / "optuna.db") == [
        (int(j), "FAIL" if j == bad else "COMPLETE") for j in ("0", "1")
    ]
    reasons = [line for line in logged.splitlines() if f"Trial {bad} failed" in line]
    assert len(reasons) == 1 and "config error: algorithm.build.epochs: got 0" in reasons[0]
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    good_summary = json.loads((sweep_dir / good / "summary.json").read_text())
    assert results["best_trial"] == int(good)
    assert results["best_value"] == good_summary["eval"][OBJECTIVE]
    assert results["best_params"]["algorithm.build.epochs"] == 1
    assert results["trials"] == {"complete": 1, "fail": 1, "running": 0}
    table = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert [j["status"] for j in table["jobs"]] == [
        "failed" if str(j["num"]) == bad else "completed" for j in table["jobs"]
    ]

    # The same command with a larger n_trials continues the study from the SQLite file.
    result = run_cli(
        [*SEARCH, "hydra.sweeper.n_trials=3", f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Using an existing study" in result.stdout + result.stderr
    assert [n for n, _ in _trials(sweep_dir / "optuna.db")] == [0, 1, 2]
    assert (sweep_dir / "2" / "summary.json").is_file() or (sweep_dir / "2" / ".hydra").is_dir()
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert sum(results["trials"].values()) == 3


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            "algorithm.build.clip_epsilon=interval(0.3,0.1)",
            "algorithm.build.clip_epsilon: interval(0.3,0.1) is empty or reversed",
        ),
        (
            "algorithm.build.epochs=range(-3,0)",
            "algorithm.build.epochs: range(-3,0) holds no valid value (got -3 (int), too small",
        ),
        (
            "algorithm.build.clip_epsilo=interval(0.1,0.2)",
            "did you mean algorithm.build.clip_epsilon?",
        ),
    ],
)
def test_a_search_space_without_valid_values_is_one_line_before_any_trial(
    space: str, message: str, tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        ["-m", "hparams_search=ppo_cartpole", space, f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("xdrl-train: config error: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert not sweep_dir.exists()


def test_a_trial_stopped_by_ctrl_c_resumes_in_its_folder_when_the_command_runs_again(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    base = [
        "-m",
        "hparams_search=ppo_cartpole",
        "hydra.sweeper.n_trials=2",
        *STOPPABLE_JOB,
        f"hydra.sweep.dir={sweep_dir}",
    ]

    def trial_0_checkpointed() -> bool:
        return any(sweep_dir.glob("0/checkpoints/checkpoint-*/manifest.json"))

    code, stderr = ctrl_c_when([*base, "total_frames=1000000"], tmp_path, trial_0_checkpointed)
    assert code == 130, stderr[-3000:]
    stopped = json.loads((sweep_dir / "0" / "summary.json").read_text())
    assert stopped["status"] == "interrupted"
    assert _trials(sweep_dir / "optuna.db") == [(0, "RUNNING")]  # no trial 1 was started
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert results["trials"] == {"complete": 0, "fail": 0, "running": 1}

    budget = (stopped["total_frames"] // 256 + 1) * 256
    result = run_cli([*base, f"total_frames={budget}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _trials(sweep_dir / "optuna.db") == [(0, "COMPLETE"), (1, "COMPLETE")]
    resumed = json.loads((sweep_dir / "0" / "summary.json").read_text())
    assert resumed["status"] == "completed" and resumed["total_frames"] == budget
    assert Path(resumed["resumed_from"]).name == f"checkpoint-{stopped['total_frames']:012d}"
