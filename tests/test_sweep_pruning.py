"""Pruning inside a trial's runs (issue 37): Optuna's median pruner judges a trial on the
evaluations its jobs write while they train (with several seeds, their aggregate at each frame
count), the Wilcoxon pruner on each (seed, evaluation) pair; a pruned trial's jobs stop through
``stop-request.json`` and say ``pruned``; a real run asked to stop stops at a checkpoint that
the same command resumes from; pruner settings with nothing to judge are one config error."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import optuna
import pytest
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.utils import instantiate
from omegaconf import OmegaConf
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from hydra_plugins.xdrl_optuna.optuna_sweeper import OptunaSweeper
from hydra_plugins.xdrl_optuna.pruning import WITHIN_RUNS, pruner_kind
from hydra_plugins.xdrl_optuna.wilcoxon import EvaluationWilcoxonPruner
from tests.conftest import CONF, compose_config
from xdrl.config.errors import ConfigError
from xdrl.run.layout import EVALUATIONS_FILE, STOP_REQUEST_FILE
from xdrl.trainer_hooks.stop_request import write_stop_request

OBJECTIVE = "eval/deterministic/reward/episode_reward_mean"
SPACE = {"x": FloatDistribution(-30.0, 30.0)}
EVERY = 100  # frames between a fake job's evaluations
CURVES = {0: [10.0, 20.0, 30.0, 40.0], 1: [30.0, 40.0, 50.0, 60.0], 2: [20.0, 30.0, 40.0, 50.0]}


class _TrainingLauncher:
    """Stands in for a parallel launcher: each job runs in its own thread and writes the
    evaluations ``CURVES[seed] + x`` to its ``evaluations.jsonl`` one at a time, like a run.
    Before each it reads ``stop-request.json`` (as the run's hook does after each batch) and
    then stops with ``summary.json`` saying ``pruned``. After writing one, it waits until the
    sweep process has reported that evaluation or asked it to stop: the steps are what the
    watcher saw, whatever the threads' timing."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.storage = optuna.storages.InMemoryStorage()  # the sweeper's study lives here
        self.written: dict[str, int] = {}  # job folder -> evaluations written
        self.step = lambda frames, seed: frames  # the Optuna step the sweep reports it at
        self.launches: list[list[str]] = []  # each launch's job folders, in launch order

    def _reported(self, trial: int, seed: int, frames: int) -> bool:
        study = optuna.load_study(study_name="study", storage=self.storage)
        steps = study.get_trials(deepcopy=False)[trial].intermediate_values
        return self.step(frames, seed) in steps

    def _job(self, overrides: dict[str, str]) -> JobReturn:
        folder = self.out / overrides["hydra.sweep.subdir"]
        folder.mkdir(parents=True, exist_ok=True)
        trial, seed = int(folder.name.split("_")[0]), int(overrides["seed"])
        x = float(overrides["x"])
        status, value, written = "completed", None, 0
        for step, base in enumerate(CURVES[seed], start=1):
            if (folder / STOP_REQUEST_FILE).exists():
                (folder / STOP_REQUEST_FILE).unlink()
                status = "pruned"
                break
            value, frames = base + x, step * EVERY
            with (folder / EVALUATIONS_FILE).open("a") as fh:
                fh.write(json.dumps({"frames": frames, OBJECTIVE: value}) + "\n")
            written = step
            stop = folder / STOP_REQUEST_FILE
            while not self._reported(trial, seed, frames) and not stop.exists():
                threading.Event().wait(0.01)  # until the watcher read it or stopped the job
        self.written[folder.name] = written
        (folder / "summary.json").write_text(json.dumps({"status": status}))
        hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}})
        return JobReturn(status=JobStatus.COMPLETED, _return_value=value, hydra_cfg=hydra_cfg)

    def launch(self, jobs: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        del initial_job_idx
        parsed = [dict(o.split("=", 1) for o in job) for job in jobs]
        self.launches.append([job["hydra.sweep.subdir"] for job in parsed])
        with ThreadPoolExecutor(len(parsed)) as pool:
            return list(pool.map(self._job, parsed))


def _sweeper(launcher: _TrainingLauncher, pruner: object, **config: object) -> OptunaSweeper:
    sampler = {"_target_": "optuna.samplers.RandomSampler", "seed": 0}
    sweeper = OptunaSweeper(sampler=instantiate(sampler), n_trials=4, seeds_per_trial=2,
                            aggregate="mean", pruner=pruner)  # fmt: skip
    sweeper.config = OmegaConf.create(
        {
            "seed": 0,
            "objective": OBJECTIVE,
            "total_frames": 4 * EVERY,
            "eval": {"enabled": True, "interval_frames": EVERY},
            "hydra": {"job": {"name": "study"}, "sweeper": {"sampler": sampler}},
            **config,
        }
    )
    sweeper.launcher = launcher
    sweeper.storage = launcher.storage  # type: ignore[assignment]  # an Optuna storage object
    sweeper.poll_s = 0.02
    return sweeper


def test_the_median_pruner_stops_a_trial_whose_evaluations_fall_below_the_median(
    tmp_path: Path,
) -> None:
    """Each trial's value at a step is the mean of its two seeds' evaluations: CURVES' means
    (20, 30, 40, 50) + x. Trials 0 and 1 (x = 0, 10) run to the end; the median of their values
    is 25, 35, 45, 55 at 100 ... 400 frames. Trial 2 (x = 4: 24, 34, ...) is below it from the
    start, but the 150-frame warm-up spares it at 100 frames: pruned at 200 (34 < 35). Trial 3
    (x = 20: 40, 50, ...) stays above and completes."""
    launcher = _TrainingLauncher(tmp_path)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=150)
    sweeper = _sweeper(launcher, pruner)
    study = sweeper._study(tmp_path)
    for x in (0.0, 10.0, 4.0, 20.0):
        study.enqueue_trial({"x": x})
    sweeper._run(study, SPACE, [], tmp_path)

    states = [t.state for t in study.get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED,
                      TrialState.COMPLETE]  # fmt: skip
    pruned = study.get_trials()[2]
    assert pruned.user_attrs["pruned_at_frames"] == 200
    assert pruned.intermediate_values == {100: 24.0, 200: 34.0}  # mean of its two seeds
    assert study.get_trials()[1].intermediate_values == {100: 30.0, 200: 40.0, 300: 50.0,
                                                         400: 60.0}  # fmt: skip
    assert study.get_trials()[3].value == pytest.approx(70.0)  # the final evaluations' mean
    for seed in (0, 1):  # the pruned trial's jobs stopped before their last evaluation
        folder = tmp_path / f"2_seed{seed}"
        assert json.loads((folder / "summary.json").read_text())["status"] == "pruned"
        assert launcher.written[folder.name] < len(CURVES[seed])
        assert not (folder / STOP_REQUEST_FILE).exists()
    assert "| 2 | pruned | " in (tmp_path / "study.md").read_text()
    assert "pruned at 200 frames" in (tmp_path / "study.md").read_text()


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_the_wilcoxon_pruner_on_evaluations_stops_a_trial_behind_the_best_on_each(
    tmp_path: Path,
) -> None:
    """Each (seed, evaluation) is one step, ``frames * 1000 + seed``: trial 0 (x = 0) has no
    best to be compared with and completes. Trial 1 (x = -5) is 5 below it on every instance:
    the one-sided signed-rank p-value is 1/16 on 4 instances (all ranks negative) and 1/32 on 5,
    below 0.1, so it stops at the first read with 4 instances, before its seeds' last
    evaluations. Trial 2 (x = 3) is above on every instance and completes."""
    launcher = _TrainingLauncher(tmp_path)
    launcher.step = lambda frames, seed: frames * 1000 + seed
    pruner = EvaluationWilcoxonPruner(p_threshold=0.1, n_startup_steps=4)
    # after Hydra's plugin scan (another test's) the module holds a new class: still judged
    # within runs (a pruner judged between seeds would leave the fake jobs waiting for reports)
    Plugins.instance()
    assert pruner_kind(pruner) == WITHIN_RUNS
    sweeper = _sweeper(launcher, pruner, total_frames=4 * EVERY)
    sweeper.n_trials = 3
    study = sweeper._study(tmp_path)
    for x in (0.0, -5.0, 3.0):
        study.enqueue_trial({"x": x})
    sweeper._run(study, SPACE, [], tmp_path)

    first, pruned, last = study.get_trials()
    assert [t.state for t in (first, pruned, last)] == [TrialState.COMPLETE, TrialState.PRUNED,
                                                         TrialState.COMPLETE]  # fmt: skip
    assert first.intermediate_values == {100_000: 10.0, 100_001: 30.0, 200_000: 20.0,
                                         200_001: 40.0, 300_000: 30.0, 300_001: 50.0,
                                         400_000: 40.0, 400_001: 60.0}  # fmt: skip
    assert len(pruned.intermediate_values) in (4, 5)  # 2 seeds read while they run
    for step, value in pruned.intermediate_values.items():
        frames, seed = divmod(step, 1000)
        assert value == CURVES[seed][frames // EVERY - 1] - 5.0
    assert pruned.user_attrs["pruned_at_frames"] == max(
        step // 1000 for step in pruned.intermediate_values
    )
    assert sum(launcher.written[f"1_seed{seed}"] for seed in (0, 1)) < 8
    assert last.value == pytest.approx((40.0 + 60.0) / 2 + 3.0)
    assert "pruned at" in (tmp_path / "study.md").read_text()


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_the_wilcoxon_pruner_on_evaluations_starts_trials_in_pairs_and_carries_later_seeds(
    tmp_path: Path,
) -> None:
    """3 seeds a trial, 2 trials a batch, 6 trials. Each trial starts with its seeds 0 and 1
    side by side; its seed 2 waits for the next launch, first in it, and only beside another
    trial's (on 2 workers a lone seed leaves the other worker idle). Trials 0 and 1 (x = 0, 10)
    have no finished trial to be compared with; trial 2 (x = -5) is behind trial 1 on all 8
    instances of its first two seeds when trial 1 has finished, so it is stopped before its
    third seed starts, which leaves trial 3's seed 2 alone: it waits for the next batch's."""
    launcher = _TrainingLauncher(tmp_path)
    launcher.step = lambda frames, seed: frames * 1000 + seed
    sweeper = _sweeper(launcher, EvaluationWilcoxonPruner(p_threshold=0.1, n_startup_steps=4))
    sweeper.n_trials, sweeper.n_jobs, sweeper.seeds_per_trial = 6, 2, 3
    study = sweeper._study(tmp_path)
    for x in (0.0, 10.0, -5.0, 20.0, 30.0, 40.0):
        study.enqueue_trial({"x": x})
    sweeper._run(study, SPACE, [], tmp_path)

    assert launcher.launches == [
        ["0_seed0", "0_seed1", "1_seed0", "1_seed1"],
        ["0_seed2", "1_seed2", "2_seed0", "2_seed1", "3_seed0", "3_seed1"],
        ["4_seed0", "4_seed1", "5_seed0", "5_seed1"],
        ["3_seed2", "4_seed2", "5_seed2"],
    ]
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2 + [TrialState.PRUNED] + [
        TrialState.COMPLETE
    ] * 3
    assert trials[2].user_attrs["pruned_at_frames"] == 4 * EVERY
    assert not (tmp_path / "2_seed2").exists()
    means = [sum(CURVES[s][-1] for s in range(3)) / 3 + x for x in (0, 10, 20, 30, 40)]
    assert [t.value for t in trials if t.number != 2] == pytest.approx(means)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_trial_left_waiting_for_its_third_seed_runs_only_that_seed_when_continued(
    tmp_path: Path,
) -> None:
    """Ctrl-C while trial 0 waited for its seed 2 (seeds 0 and 1 done, kept as its user
    attribute): the same command launches seed 2 alone, then a fresh trial in pairs."""
    launcher = _TrainingLauncher(tmp_path)
    launcher.step = lambda frames, seed: frames * 1000 + seed
    sweeper = _sweeper(launcher, EvaluationWilcoxonPruner(p_threshold=0.1, n_startup_steps=4))
    sweeper.n_trials, sweeper.n_jobs, sweeper.seeds_per_trial = 2, 1, 3
    study = sweeper._study(tmp_path)
    study.enqueue_trial({"x": 0.0})
    waiting = study.ask(SPACE)
    waiting.set_user_attr("seed_values", {"0": 40.0, "1": 60.0})
    sweeper._run(study, SPACE, [], tmp_path)

    assert launcher.launches == [["0_seed2"], ["1_seed0", "1_seed1"], ["1_seed2"]]
    first = study.get_trials()[0]
    assert first.state == TrialState.COMPLETE
    assert first.value == pytest.approx((40.0 + 60.0 + CURVES[2][-1]) / 3)
    assert not (tmp_path / "0_seed0").exists()  # its finished seeds were not run again


def test_the_median_pruner_launches_a_trials_seeds_together(tmp_path: Path) -> None:
    """The median pruner waits for all of a trial's seeds at each step: one launch a batch,
    trial by trial."""
    launcher = _TrainingLauncher(tmp_path)
    sweeper = _sweeper(launcher, optuna.pruners.MedianPruner(n_startup_trials=5))
    sweeper.n_trials, sweeper.n_jobs, sweeper.seeds_per_trial = 2, 2, 3
    sweeper._run(sweeper._study(tmp_path), SPACE, [], tmp_path)

    assert launcher.launches == [["0_seed0", "0_seed1", "0_seed2", "1_seed0", "1_seed1", "1_seed2"]]


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize(
    ("pruner", "config", "message"),
    [
        (
            "wilcoxon",
            {"seeds_per_trial": 1},
            "hydra.sweeper.pruner: prunes between a trial's seeds; set seeds_per_trial >= 2",
        ),
        (
            "median",
            {"eval": {"enabled": True, "interval_frames": 10_000}, "total_frames": 8_192},
            "hydra.sweeper.pruner: MedianPruner judges the evaluations a run writes while it "
            "trains, and with eval.enabled=True, eval.interval_frames=10000 and "
            "total_frames=8192 there are none; set eval.interval_frames=1024 (or pruner=none)",
        ),
        (
            "halving",
            {"eval": {"enabled": False, "interval_frames": 100}},
            "hydra.sweeper.pruner: SuccessiveHalvingPruner judges the evaluations",
        ),
        (
            "wilcoxon_evals",
            {"eval": {"enabled": True, "interval_frames": 400}},
            "hydra.sweeper.pruner: EvaluationWilcoxonPruner judges the evaluations",
        ),
    ],
)
def test_a_pruner_with_nothing_to_judge_is_one_config_error(
    pruner: str, config: dict, message: str, tmp_path: Path
) -> None:
    node = OmegaConf.load(CONF / "hydra" / "sweeper" / "pruner" / f"{pruner}.yaml")
    seeds = config.pop("seeds_per_trial", 2)
    sweeper = _sweeper(_TrainingLauncher(tmp_path), instantiate(node)(), **config)
    sweeper.seeds_per_trial = seeds
    with pytest.raises(ConfigError) as err:
        sweeper._check_seeds()
    assert str(err.value).startswith(message)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("name", ["median", "halving", "hyperband", "wilcoxon_evals"])
def test_each_pruner_preset_builds_a_pruner_that_judges_evaluations(name: str) -> None:
    node = OmegaConf.load(CONF / "hydra" / "sweeper" / "pruner" / f"{name}.yaml")
    assert pruner_kind(instantiate(node)()) == WITHIN_RUNS


def test_a_run_asked_to_stop_stops_at_a_checkpoint_the_same_command_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The request is there before the run starts (a job of a trial pruned before it began):
    the run trains one batch, checkpoints it and says pruned; run again, it resumes from that
    checkpoint (the request was consumed) and completes."""
    import xdrl.run.lifecycle

    run_dir = tmp_path / "run"
    overrides = ["total_frames=512", "frames_per_batch=256", "env.num_envs=4", "eval=none",
                 "algorithm.build.epochs=1", "logging=none", "num_threads=1"]  # fmt: skip
    write_stop_request(run_dir, "pruned", "Optuna pruner: trial 3 at 256 frames")
    xdrl.run.lifecycle.run(compose_config(overrides, run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "pruned" and summary["total_frames"] == 256
    assert summary["stop_request"] == {
        "status": "pruned",
        "reason": "Optuna pruner: trial 3 at 256 frames",
        "frames": 256,
    }
    assert (run_dir / "checkpoints" / "checkpoint-000000000256" / "checksums.json").is_file()
    assert not (run_dir / STOP_REQUEST_FILE).exists()
    assert "xdrl-train: pruned at 256 frames" in capsys.readouterr().err

    xdrl.run.lifecycle.run(compose_config(overrides, run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["total_frames"] == 512
    assert Path(summary["resumed_from"]).name == "checkpoint-000000000256"


@pytest.mark.parametrize(
    ("target", "line"),
    [
        ("optuna.pruners.MedianPruner", None),
        (
            "optuna.pruners.NoSuchPruner",
            "hydra.sweeper.pruner._target_: optuna.pruners.NoSuchPruner does not exist; pick "
            "hydra/sweeper/pruner=halving|hyperband|median|none|wilcoxon|wilcoxon_evals",
        ),
        (
            "nosuch.Pruner",
            "hydra.sweeper.pruner._target_: nosuch.Pruner does not exist; pick "
            "hydra/sweeper/pruner=halving|hyperband|median|none|wilcoxon|wilcoxon_evals",
        ),
    ],
)
def test_an_unknown_pruner_class_is_one_line_before_hydra_builds_the_sweeper(
    target: str, line: str | None
) -> None:
    from xdrl.config.check import check_launch_plugins

    sweeper = "hydra_plugins.xdrl_optuna.optuna_sweeper.OptunaSweeper"
    hydra_cfg = OmegaConf.create({"sweeper": {"_target_": sweeper, "pruner": {"_target_": target}}})
    if line is None:
        check_launch_plugins(hydra_cfg)
        return
    with pytest.raises(ConfigError) as err:
        check_launch_plugins(hydra_cfg)
    assert str(err.value) == line
