"""Several seeds per Optuna trial (issue 37): a trial's k jobs get k distinct seeds and the same
parameters, its value is the configured aggregate of their objectives, the Wilcoxon pruner stops
a trial whose seeds are worse, an interrupted trial continues with the seeds it lacks, bad
settings are one line before anything runs, and the re-check runs the winners on disjoint test
seeds and writes a preset that ``xdrl-train experiment=<it>`` runs."""

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
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from scipy import stats

from hydra_plugins.xdrl_optuna.optuna_sweeper import OptunaSweeper
from hydra_plugins.xdrl_optuna.seeds import check_seed_settings
from tests.conftest import STOPPABLE_JOB, ctrl_c_when, run_cli
from tests.test_sweeps import TINY
from xdrl.config.errors import ConfigError

OBJECTIVE = "eval/deterministic/reward/episode_reward_mean"
SPACE = {"x": FloatDistribution(-1.0, 1.0)}
RECHECK_OFF = {"top": 0, "seeds": 10, "first_seed": 1000}


def _overrides(job: list[str]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in job)


class _SeedLauncher:
    """Stands in for Hydra's launcher: objective = ``per_seed[seed] + x``; records each launch.
    A seed in ``interrupt`` leaves a summary.json saying ``interrupted`` (what Ctrl-C leaves)."""

    def __init__(
        self,
        per_seed: list[float],
        out: Path,
        interrupt: tuple[int, ...] = (),
        status: str = "interrupted",
    ) -> None:
        self.per_seed, self.out, self.interrupt, self.status = per_seed, out, interrupt, status
        self.launches: list[list[dict[str, str]]] = []

    def launch(self, jobs: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        self.launches.append([_overrides(job) for job in jobs])
        returns = []
        for job in self.launches[-1]:
            seed = int(job["seed"])
            folder = self.out / job["hydra.sweep.subdir"]
            folder.mkdir(parents=True, exist_ok=True)
            status = self.status if seed in self.interrupt else "completed"
            (folder / "summary.json").write_text(json.dumps({"status": status}))
            value = None if seed in self.interrupt else self.per_seed[seed] + float(job["x"])
            hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}})
            returns.append(
                JobReturn(status=JobStatus.COMPLETED, _return_value=value, hydra_cfg=hydra_cfg)
            )
        if any(int(job["seed"]) in self.interrupt for job in self.launches[-1]):
            (self.out / ".interrupted").touch()  # what the sweep's Ctrl-C handler leaves
        return returns

    def jobs(self) -> list[dict[str, str]]:
        return [job for launch in self.launches for job in launch]


def _sweeper(launcher: _SeedLauncher, n_trials: int, **settings: object) -> OptunaSweeper:
    """The sweeper as Hydra builds it, over a fake launcher (no Hydra context: no re-check)."""
    sampler = {"_target_": "optuna.samplers.RandomSampler", "seed": 0}
    sweeper = OptunaSweeper(
        sampler=instantiate(sampler), n_trials=n_trials, recheck=RECHECK_OFF, **settings
    )  # type: ignore[arg-type]
    sweeper.config = OmegaConf.create(
        {"seed": 0, "hydra": {"job": {"name": "study"}, "sweeper": {"sampler": sampler}}}
    )
    sweeper.launcher = launcher
    return sweeper


# A spread of seed values whose IQM, mean, median and min all differ (worked by hand):
# sorted 0, 1, 2, 10, 11, 50, 60, 70; the IQM drops 2 of 8 at each end: (2+10+11+50)/4.
PER_SEED = [10.0, 0.0, 70.0, 2.0, 50.0, 1.0, 60.0, 11.0]
BY_HAND = {"iqm": 18.25, "mean": 25.5, "median": 10.5, "min": 0.0}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_a_trial_runs_k_distinct_seeds_with_one_configuration_and_its_value_aggregates_them(
    name: str, tmp_path: Path
) -> None:
    launcher = _SeedLauncher(PER_SEED, tmp_path)
    sweeper = _sweeper(launcher, 2, seeds_per_trial=8, aggregate=name)
    study = sweeper._study(tmp_path)
    study.enqueue_trial({"x": 0.0})
    study.enqueue_trial({"x": 0.5})
    sweeper._run(study, SPACE, ["algorithm.build.epochs=1"], tmp_path)

    assert len(launcher.launches) == 2  # one launch per trial: its 8 seeds side by side
    for number, launch in enumerate(launcher.launches):
        assert [int(j["seed"]) for j in launch] == list(range(8))
        assert {j["x"] for j in launch} == {repr([0.0, 0.5][number])}
        assert {j["algorithm.build.epochs"] for j in launch} == {"1"}
        assert [j["hydra.sweep.subdir"] for j in launch] == [f"{number}_seed{s}" for s in range(8)]
    first, second = study.get_trials()
    assert first.state == second.state == TrialState.COMPLETE
    assert first.value == pytest.approx(BY_HAND[name])
    assert second.value == pytest.approx(BY_HAND[name] + 0.5)
    assert first.user_attrs["seed_values"] == {str(s): v for s, v in enumerate(PER_SEED)}
    assert first.user_attrs["seeds"] == list(range(8))
    assert first.intermediate_values == dict(enumerate(PER_SEED))  # a step per seed (dashboard)
    low, high = first.user_attrs["interval"]
    assert min(PER_SEED) <= low <= first.value <= high <= max(PER_SEED)
    results = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert results["best_trial"] == 1 and results["best_value"] == pytest.approx(second.value)
    rows = [line for line in (tmp_path / "study.md").read_text().splitlines() if "| comp" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| 1", "| 0"]  # best first
    assert "0: 10, 1: 0, 2: 70, 3: 2, 4: 50, 5: 1, 6: 60, 7: 11" in rows[1]


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_the_wilcoxon_pruner_stops_a_trial_whose_seeds_are_worse(tmp_path: Path) -> None:
    """Trial 0 sets the bar; trial 1 is 1 worse on every seed, trial 2 0.5 better. The pruner
    (Optuna's defaults: p < 0.1, two seeds first) stops trial 1 after the first n seeds where a
    one-sided signed-rank test of its differences says "worse" (SciPy, here), trial 2 runs all."""
    per_seed = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    pruner = optuna.pruners.WilcoxonPruner(p_threshold=0.1, n_startup_steps=2)
    launcher = _SeedLauncher(per_seed, tmp_path)
    sweeper = _sweeper(launcher, 3, seeds_per_trial=6, pruner=pruner)
    study = sweeper._study(tmp_path)
    for x in (0.0, -1.0, 0.5):
        study.enqueue_trial({"x": x})
    sweeper._run(study, SPACE, [], tmp_path)

    expected = next(
        n for n in range(2, 7) if stats.wilcoxon([-1.0] * n, alternative="less").pvalue < 0.1
    )
    assert expected == 4  # 0.5 ** 4 = 0.0625: the exact test on 4 seeds, all worse
    seeds_run = {n: [int(j["seed"]) for j in launcher.jobs() if j["x"] == repr(x)]
                 for n, x in enumerate((0.0, -1.0, 0.5))}  # fmt: skip
    assert seeds_run == {0: list(range(6)), 1: list(range(expected)), 2: list(range(6))}
    assert all(len(launch) == 1 for launch in launcher.launches)  # one seed per wave, n_jobs 1
    states = [t.state for t in study.get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.COMPLETE]
    pruned = study.get_trials()[1]
    assert pruned.user_attrs["pruned_after"] == list(range(expected))
    assert pruned.intermediate_values == {s: per_seed[s] - 1.0 for s in range(expected)}
    results = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert results["best_trial"] == 2 and results["trials"]["pruned"] == 1
    assert "| 1 | pruned | " in (tmp_path / "study.md").read_text()
    assert f"pruned after seeds {list(range(expected))}" in (tmp_path / "study.md").read_text()


@pytest.mark.parametrize("status", ["interrupted", "not_started"])
def test_an_interrupted_trial_runs_only_the_seeds_it_lacks_when_the_command_runs_again(
    status: str, tmp_path: Path
) -> None:
    """Ctrl-C reached seed 2 of trial 0 (its summary says interrupted, or not started: the
    sweep was stopped before it): the trial stays running with seeds 0, 1 and 3 recorded; the
    next command launches seed 2 alone, then trial 1."""
    per_seed = [1.0, 2.0, 3.0, 4.0]
    interrupted = _SeedLauncher(per_seed, tmp_path, interrupt=(2,), status=status)
    sweeper = _sweeper(interrupted, 2, seeds_per_trial=4, aggregate="mean")
    study = sweeper._study(tmp_path)
    study.enqueue_trial({"x": 0.0})
    sweeper._run(study, SPACE, [], tmp_path)
    (trial,) = study.get_trials()
    assert trial.state == TrialState.RUNNING
    assert trial.user_attrs["seed_values"] == {"0": 1.0, "1": 2.0, "3": 4.0}

    (tmp_path / ".interrupted").unlink()  # the next command starts clean
    again = _SeedLauncher(per_seed, tmp_path)
    sweeper = _sweeper(again, 2, seeds_per_trial=4, aggregate="mean")
    sweeper._run(sweeper._study(tmp_path), SPACE, [], tmp_path)
    assert [(j["hydra.sweep.subdir"], j["seed"]) for j in again.launches[0]] == [("0_seed2", "2")]
    assert [int(j["seed"]) for j in again.launches[1]] == [0, 1, 2, 3]  # trial 1, whole
    study = optuna.load_study(study_name="study", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    first, second = study.get_trials()
    assert first.state == second.state == TrialState.COMPLETE
    assert first.value == pytest.approx((1.0 + 2.0 + 3.0 + 4.0) / 4)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"seeds_per_trial": 0}, "hydra.sweeper.seeds_per_trial: got 0; set a whole number >= 1"),
        ({"aggregate": "mode"}, "hydra.sweeper.aggregate: got 'mode'; set one of iqm, mean"),
        (
            {"seeds_per_trial": 3, "recheck": {"top": 1, "seeds": 5, "first_seed": 2}},
            "hydra.sweeper.recheck.first_seed: test seeds 2..6 overlap the tuning seeds 0..2",
        ),
        (
            {"recheck": {"top": 2, "seeds": 0, "first_seed": 1000}},
            "hydra.sweeper.recheck.seeds: a re-check needs seeds >= 1",
        ),
    ],
)
def test_seed_settings_that_cannot_run_are_one_config_error(settings: dict, message: str) -> None:
    recheck = {**RECHECK_OFF, **settings.get("recheck", {})}
    with pytest.raises(ConfigError) as err:
        check_seed_settings(
            seeds_per_trial=settings.get("seeds_per_trial", 1),  # type: ignore[arg-type]
            aggregate_name=settings.get("aggregate", "iqm"),  # type: ignore[arg-type]
            base_seed=0,
            recheck=recheck,
        )
    assert str(err.value).startswith(message)


def test_a_bad_seed_setting_on_the_command_line_is_one_line_before_any_trial(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    args = ["-m", "hparams_search=ppo_cartpole", "hydra/sweeper/pruner=wilcoxon"]
    result = run_cli([*args, f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "xdrl-train: config error: hydra.sweeper.pruner: prunes between a trial's seeds; set "
        "seeds_per_trial >= 2 (or pruner=none)"
    ]
    assert not sweep_dir.exists()


# ---------------------------------------------------------------------------------------------
# End to end: seeds, re-check and the preset, through xdrl-train
# ---------------------------------------------------------------------------------------------


def _summary(job_dir: Path) -> dict:
    return json.loads((job_dir / "summary.json").read_text())


def test_the_recheck_runs_the_best_trial_on_test_seeds_and_its_preset_reproduces_it(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    search = [
        "-m",
        "hparams_search=ppo_cartpole_seeds",
        *TINY,
        "num_threads=1",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.seeds_per_trial=2",
        "hydra.sweeper.recheck.top=1",
        "hydra.sweeper.recheck.seeds=2",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    result = run_cli(search, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]

    # Each trial: two jobs, seeds 0 and 1, one configuration; its value the IQM (= mean of 2).
    with sqlite3.connect(sweep_dir / "optuna.db") as con:
        values = dict(con.execute("SELECT t.number, v.value FROM trials t JOIN trial_values v"
                                  " ON v.trial_id = t.trial_id").fetchall())  # fmt: skip
    for trial in (0, 1):
        jobs = [sweep_dir / f"{trial}_seed{seed}" for seed in (0, 1)]
        assert [_summary(j)["seed"] for j in jobs] == [0, 1]
        overrides = [yaml.safe_load((j / ".hydra" / "overrides.yaml").read_text()) for j in jobs]
        assert [o for o in overrides[0] if not o.startswith("seed=")] == [
            o for o in overrides[1] if not o.startswith("seed=")
        ]
        scores = [_summary(j)["eval"][OBJECTIVE] for j in jobs]
        assert values[trial] == pytest.approx(sum(scores) / 2)

    # The re-check: the better trial on test seeds 1000 and 1001, none of them a tuning seed.
    best = max(values, key=values.__getitem__)
    rechecked = sorted((sweep_dir / "recheck").iterdir())
    assert [d.name for d in rechecked] == [f"{best}_seed1000", f"{best}_seed1001"]
    assert [_summary(d)["seed"] for d in rechecked] == [1000, 1001]
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    (row,) = results["recheck"]
    test_scores = [_summary(d)["eval"][OBJECTIVE] for d in rechecked]
    assert row["trial"] == best and row["search_value"] == pytest.approx(values[best])
    assert row["recheck_value"] == pytest.approx(sum(test_scores) / 2)
    assert f"| {best} |" in (sweep_dir / "recheck.md").read_text()
    assert (sweep_dir / "recheck.md").read_text() in result.stdout  # under the sweep table

    # The preset runs as an experiment and, on test seed 1000, scores what the re-check did.
    preset = Path(results["recommended"]["preset"])
    assert preset == sweep_dir / "presets" / "experiment" / "ppo_cartpole_seeds_best.yaml"
    run_dir = tmp_path / "rerun"
    rerun = run_cli(
        [f"--config-dir={preset.parent.parent}", f"experiment={preset.stem}", "seed=1000",
         "num_threads=1", "logging=none", "checkpoint=none", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    for key, value in results["recommended"]["params"].items():
        node = config
        for part in key.split("."):
            node = node[part]
        assert node == pytest.approx(value), key
    measured = yaml.safe_load((rechecked[0] / ".hydra" / "config.yaml").read_text())
    per_run = ("run_dir", "exp_name")
    assert {k: v for k, v in config.items() if k not in per_run} == {
        k: v for k, v in measured.items() if k not in per_run
    }  # the search preset's keys (eval.interval_frames, ...) come with it
    assert _summary(run_dir)["eval"][OBJECTIVE] == test_scores[0]


def test_a_recheck_with_no_finished_trial_says_so_in_one_line_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from hydra_plugins.xdrl_optuna.recheck import run_recheck

    study = optuna.create_study(direction="maximize")
    study.tell(study.ask(SPACE), state=TrialState.FAIL)
    launched: list = []
    rows = run_recheck(
        study,
        settings={"top": 3, "seeds": 10, "first_seed": 1000},
        aggregate_name="iqm",
        fixed=[],
        launch=launched.append,  # type: ignore[arg-type]
        compose=None,  # type: ignore[arg-type]
        sweep_dir=tmp_path,
        interrupted=lambda: False,
    )
    assert rows == [] and launched == [] and list(tmp_path.iterdir()) == []
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        "hydra.sweeper.recheck: no trial finished with a value, nothing to re-check; see the "
        "sweep table"
    ]


def test_ctrl_c_in_a_seed_and_the_same_command_runs_only_what_the_trial_lacks(
    tmp_path: Path,
) -> None:
    """Ctrl-C while seed 0 of trial 0 trains (seed 1 waits behind it on the basic launcher):
    seed 0 stops at a checkpoint, seed 1 is not started, the trial stays running. The same
    command resumes seed 0 from its checkpoint, runs seed 1, and tells the trial their mean."""
    sweep_dir = tmp_path / "sweep"
    base = [
        "-m",
        "hparams_search=ppo_cartpole",
        "hydra.sweeper.n_trials=1",
        "hydra.sweeper.seeds_per_trial=2",
        "hydra.sweeper.aggregate=mean",
        *STOPPABLE_JOB,
        f"hydra.sweep.dir={sweep_dir}",
    ]

    def seed_0_checkpointed() -> bool:
        return any(sweep_dir.glob("0_seed0/checkpoints/checkpoint-*/manifest.json"))

    code, stderr = ctrl_c_when([*base, "total_frames=1000000"], tmp_path, seed_0_checkpointed)
    assert code == 130, stderr[-3000:]
    stopped = _summary(sweep_dir / "0_seed0")
    assert stopped["status"] == "interrupted"
    assert _summary(sweep_dir / "0_seed1")["status"] == "not_started"
    with sqlite3.connect(sweep_dir / "optuna.db") as con:
        assert con.execute("SELECT number, state FROM trials").fetchall() == [(0, "RUNNING")]

    budget = (stopped["total_frames"] // 256 + 1) * 256
    result = run_cli([*base, f"total_frames={budget}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    resumed, fresh = _summary(sweep_dir / "0_seed0"), _summary(sweep_dir / "0_seed1")
    assert Path(resumed["resumed_from"]).name == f"checkpoint-{stopped['total_frames']:012d}"
    assert resumed["total_frames"] == fresh["total_frames"] == budget
    assert "resumed_from" not in fresh or fresh["resumed_from"] is None
    with sqlite3.connect(sweep_dir / "optuna.db") as con:
        ((state, value),) = con.execute(
            "SELECT t.state, v.value FROM trials t JOIN trial_values v ON v.trial_id = t.trial_id"
        ).fetchall()
    scores = [resumed["eval"][OBJECTIVE], fresh["eval"][OBJECTIVE]]
    assert state == "COMPLETE" and value == pytest.approx(sum(scores) / 2)
