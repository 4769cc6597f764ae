"""xdrl's Optuna sweeper through ``xdrl-train -m``: a sample a key cannot take fails its trial
only, a search space with no valid value or reversed bounds is one line before any trial, the
best trial so far is on disk after every trial, and the study in SQLite is continued by the same
command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import optuna
import pytest
import yaml
from hydra.core.utils import JobReturn, JobStatus
from hydra.utils import instantiate
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from hydra_plugins.xdrl_optuna.optuna_sweeper import OptunaSweeper
from tests.conftest import STOPPABLE_JOB, ctrl_c_when, run_cli, run_script
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
    # stderr holds the failed trial's one line; Optuna's own lines are in the log (stdout)
    failed = "xdrl-train: config error: algorithm.build.epochs: got 0 (int), too small"
    assert [line for line in result.stderr.splitlines() if not line.startswith(failed)] == []
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
    assert results["trials"] == {"complete": 1, "fail": 1, "running": 0, "duplicate": 0}
    table = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert [j["status"] for j in table["jobs"]] == [
        "failed" if str(j["num"]) == bad else "completed" for j in table["jobs"]
    ]

    # The same command with a larger n_trials continues the study from the SQLite file.
    result = run_cli(
        [*SEARCH, "hydra.sweeper.n_trials=3", f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Using an existing study" in result.stdout
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
    assert results["trials"] == {"complete": 0, "fail": 0, "running": 1, "duplicate": 0}

    budget = (stopped["total_frames"] // 256 + 1) * 256
    result = run_cli([*base, f"total_frames={budget}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _trials(sweep_dir / "optuna.db") == [(0, "COMPLETE"), (1, "COMPLETE")]
    resumed = json.loads((sweep_dir / "0" / "summary.json").read_text())
    assert resumed["status"] == "completed" and resumed["total_frames"] == budget
    assert Path(resumed["resumed_from"]).name == f"checkpoint-{stopped['total_frames']:012d}"


# ---------------------------------------------------------------------------------------------
# A continued study never re-samples what it measured
# ---------------------------------------------------------------------------------------------


def _params(db: Path) -> dict[int, tuple[tuple[str, float], ...]]:
    """Each trial's parameters, from the study's SQLite file, read without Optuna."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT t.number, p.param_name, p.param_value FROM trials t"
            " JOIN trial_params p ON p.trial_id = t.trial_id ORDER BY t.number, p.param_name"
        ).fetchall()
    out: dict[int, list[tuple[str, float]]] = {}
    for number, name, value in rows:
        out.setdefault(number, []).append((name, value))
    return {n: tuple(p) for n, p in out.items()}


def test_a_study_continued_by_the_same_command_samples_no_configuration_twice(
    tmp_path: Path,
) -> None:
    """Two commands with n_trials 2 then 4 leave the state a Ctrl-C after two trials leaves.
    The preset's TPE (seed 0, 5 random start-up trials) rebuilt with its seed used to give
    trials 2 and 3 exactly trial 0's and 1's parameters, and the report one group of two
    "seeds 0,0"."""
    sweep_dir = tmp_path / "sweep"
    base = ["-m", "hparams_search=ppo_cartpole", *TINY, "num_threads=1"]
    for n_trials in (2, 4):
        args = [*base, f"hydra.sweeper.n_trials={n_trials}", f"hydra.sweep.dir={sweep_dir}"]
        result = run_cli(args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    assert _trials(sweep_dir / "optuna.db") == [(n, "COMPLETE") for n in range(4)]
    params = _params(sweep_dir / "optuna.db")
    assert len(set(params.values())) == 4, params
    assert {name for p in params.values() for name, _ in p} == {
        "algorithm.optimizer.lr",
        "algorithm.build.clip_epsilon",
        "algorithm.build.entropy_coef",
    }

    report = run_script("xdrl-report", [str(sweep_dir)], cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-3000:]
    groups = json.loads((sweep_dir / "report" / "report.json").read_text())["groups"]
    assert [g["runs"] for g in groups] == [1, 1, 1, 1]


class _CountingLauncher:
    """Stands in for Hydra's launcher: records each job's overrides; objective = job index."""

    def __init__(self) -> None:
        self.jobs: list[list[str]] = []

    def launch(self, jobs: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        self.jobs += jobs
        return [
            JobReturn(status=JobStatus.COMPLETED, _return_value=float(initial_job_idx + i))
            for i in range(len(jobs))
        ]


def _sweeper(sampler: dict, n_trials: int) -> OptunaSweeper:
    """The sweeper as Hydra builds it (the sampler instantiated with it), with a fake launcher."""
    sweeper = OptunaSweeper(sampler=instantiate(sampler), n_trials=n_trials, n_jobs=2)
    sweeper.config = OmegaConf.create(
        {"hydra": {"job": {"name": "study"}, "sweeper": {"sampler": sampler}}}
    )
    sweeper.launcher = _CountingLauncher()
    return sweeper


def test_a_repeated_configuration_is_not_launched_and_a_measured_space_ends_the_sweep(
    tmp_path: Path,
) -> None:
    """Three configurations, eight trials asked for: each runs once, repeats are told FAIL with
    the trial they repeat and do not count toward n_trials. A trial of an earlier search space
    (over another key) is not one of the three."""
    space = {"epochs": CategoricalDistribution([1, 2, 3])}
    sweeper = _sweeper({"_target_": "optuna.samplers.RandomSampler", "seed": 0}, 8)
    study = sweeper._study(tmp_path)
    earlier = {"clip": FloatDistribution(0.1, 0.3)}
    study.add_trial(create_trial(params={"clip": 0.2}, distributions=earlier, value=0.0))
    sweeper._run(study, space, [], tmp_path)
    launched = sweeper.launcher.jobs
    assert sorted(launched) == [["epochs=1"], ["epochs=2"], ["epochs=3"]]
    trials = study.get_trials()[1:]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    repeats = [t for t in trials if t.state == TrialState.FAIL]
    assert len(complete) == 3 and len(complete) + len(repeats) == len(trials)
    first = {t.params["epochs"]: t.number for t in complete}
    assert repeats, "RandomSampler(seed=0) over 3 values repeats one within 3 asks"
    assert all(t.user_attrs["duplicate_of"] == first[t.params["epochs"]] for t in repeats)
    results = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert results["trials"] == {"complete": 4, "fail": 0, "running": 0, "duplicate": len(repeats)}


def test_a_continued_seeded_study_draws_new_values_and_a_fresh_one_keeps_its_seed(
    tmp_path: Path,
) -> None:
    """Two commands over one SQLite study: the second sampler does not replay the first's
    draws; a fresh study with the same seed asks what a plain seeded sampler asks."""
    space = {"lr": FloatDistribution(1e-4, 1e-2, log=True)}
    sampler = {"_target_": "optuna.samplers.TPESampler", "seed": 7, "n_startup_trials": 10}
    for n_trials in (2, 4):
        sweeper = _sweeper(sampler, n_trials)
        sweeper._run(sweeper._study(tmp_path), space, [], tmp_path)
    second = [float(job[0].split("=")[1]) for job in sweeper.launcher.jobs]
    study = optuna.load_study(study_name="study", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    lrs = [t.params["lr"] for t in study.get_trials()]
    assert len(lrs) == 4 and len(set(lrs)) == 4
    assert second == lrs[2:]

    plain = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=7, n_startup_trials=10))
    assert lrs[:2] == [plain.ask(space).params["lr"] for _ in range(2)]
