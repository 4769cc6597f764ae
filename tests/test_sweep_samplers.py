"""The Optuna sweeper's samplers and objectives (issue 37): each preset in
conf/hydra/sweeper/sampler/ drives a study (TPE multivariate by default, random, CMA-ES on its own
model); a space CMA-ES cannot sample, or CMA-ES without its package, is one config error before
anything runs; ``frames_to_reach`` adds a second objective read from the jobs' evaluations and
the study reports its Pareto set."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import optuna
import pytest
import yaml
from hydra.core.utils import JobReturn, JobStatus
from hydra.utils import instantiate
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hydra_plugins.xdrl_optuna.optuna_sweeper import OptunaSweeper, check_sampler
from tests.conftest import CONF
from xdrl.config.errors import ConfigError
from xdrl.report.study import plot_pareto

SPACE = {"x": FloatDistribution(-1.0, 1.0), "y": FloatDistribution(1e-3, 1.0, log=True)}
OBJECTIVE = "eval/deterministic/reward/episode_reward_mean"


class _Launcher:
    """Stands in for Hydra's launcher: objective = -(x - 0.3)^2 - y."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def launch(self, jobs: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        returns = []
        for number, job in enumerate(jobs, start=initial_job_idx):
            values = dict(o.split("=", 1) for o in job)
            folder = self.out / str(number)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "summary.json").write_text(json.dumps({"status": "completed"}))
            value = -((float(values["x"]) - 0.3) ** 2) - float(values["y"])
            cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}})
            returns.append(JobReturn(status=JobStatus.COMPLETED, _return_value=value,
                                     hydra_cfg=cfg))  # fmt: skip
        return returns


def _preset(name: str) -> dict:
    return OmegaConf.to_container(  # type: ignore[return-value]
        OmegaConf.load(CONF / "hydra" / "sweeper" / "sampler" / f"{name}.yaml")
    )


@pytest.mark.parametrize("name", ["tpe", "random", "cmaes"])
def test_each_sampler_preset_runs_a_study(name: str, tmp_path: Path) -> None:
    node = {**_preset(name), "seed": 0}
    sampler = instantiate(node)
    sweeper = OptunaSweeper(sampler=sampler, n_trials=4)
    sweeper.config = OmegaConf.create(
        {"seed": 0, "hydra": {"job": {"name": "study"}, "sweeper": {"sampler": node}}}
    )
    sweeper.launcher = _Launcher(tmp_path)
    sweeper.storage = optuna.storages.InMemoryStorage()  # type: ignore[assignment]
    study = sweeper._study(tmp_path)
    check_sampler(sweeper.sampler_config, SPACE, {"x": "", "y": ""})
    sweeper._run(study, SPACE, [], tmp_path)

    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert type(study.sampler) is type(sampler)
    if name == "tpe":
        assert study.sampler._multivariate  # the default: the parameters modelled jointly
    if name == "cmaes":  # after its one random start-up trial, CMA-ES's own model proposes
        assert not any(k.startswith("cma:") for k in trials[0].system_attrs)
        assert all(any(k.startswith("cma:") for k in t.system_attrs) for t in trials[1:])


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            {"x": FloatDistribution(0, 1), "epochs": CategoricalDistribution([1, 2])},
            "hydra.sweeper.sampler: CMA-ES samples numeric dimensions only and epochs is "
            "choice(1,2) (categorical); write it as interval(a,b) or tag(int, interval(a,b)), "
            "or use sampler=tpe",
        ),
        ({"x": FloatDistribution(0, 1), "epochs": IntDistribution(1, 4)}, None),
    ],
)
def test_cmaes_refuses_a_categorical_dimension_in_one_line(
    space: dict, message: str | None
) -> None:
    spec = {"x": "interval(0,1)", "epochs": "choice(1,2)"}
    sampler = optuna.samplers.CmaEsSampler(seed=0)
    if message is None:
        check_sampler(sampler, space, spec)
        return
    with pytest.raises(ConfigError) as err:
        check_sampler(sampler, space, spec)
    assert str(err.value) == message


def test_cmaes_without_its_package_is_one_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cmaes" else real(name, *a)
    )
    with pytest.raises(ConfigError) as err:
        check_sampler(optuna.samplers.CmaEsSampler(), SPACE, {})
    assert str(err.value) == (
        "hydra.sweeper.sampler: CMA-ES needs the cmaes package; pip install 'xdrl[cmaes]' "
        "(or sampler=tpe)"
    )


class _CurveLauncher:
    """Stands in for Hydra's launcher: a job's evaluations at 100 ... 400 frames are
    ``x + y * i + 5 * seed`` (i = 1 ... 4), written to its ``evaluations.jsonl``; the last is its
    objective."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def launch(self, jobs: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        del initial_job_idx
        returns = []
        for job in jobs:
            values = dict(o.split("=", 1) for o in job)
            folder = self.out / values["hydra.sweep.subdir"]
            folder.mkdir(parents=True, exist_ok=True)
            x, y, seed = float(values["x"]), float(values["y"]), int(values["seed"])
            curve = [x + y * i + 5 * seed for i in range(1, 5)]
            records = [{"frames": 100 * i, OBJECTIVE: v} for i, v in enumerate(curve, start=1)]
            (folder / "evaluations.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in records)
            )
            (folder / "summary.json").write_text(json.dumps({"status": "completed"}))
            cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}})
            returns.append(JobReturn(status=JobStatus.COMPLETED, _return_value=curve[-1],
                                     hydra_cfg=cfg))  # fmt: skip
        return returns


CURVE_SPACE = {"x": FloatDistribution(-50.0, 50.0), "y": FloatDistribution(-50.0, 50.0)}


def _two_objective_sweeper(tmp_path: Path, **settings: object) -> OptunaSweeper:
    node = {**_preset("random"), "seed": 0}
    sweeper = OptunaSweeper(
        sampler=instantiate(node), n_trials=3, seeds_per_trial=2, aggregate="mean", **settings
    )  # type: ignore[arg-type]
    sweeper.config = OmegaConf.create(
        {
            "seed": 0,
            "objective": OBJECTIVE,
            "total_frames": 400,
            "eval": {"enabled": True, "interval_frames": 100},
            "hydra": {"job": {"name": "study"}, "sweeper": {"sampler": node}},
        }
    )
    sweeper.launcher = _CurveLauncher(tmp_path)
    sweeper.storage = optuna.storages.InMemoryStorage()  # type: ignore[assignment]
    return sweeper


def test_frames_to_reach_makes_a_second_objective_and_the_study_reports_its_pareto_set(
    tmp_path: Path,
) -> None:
    """Threshold 30, seeds 0 and 1 (+5), mean over seeds. By hand: trial 0 (x 30, y 0):
    30, 30, ... reaches 30 at 100 frames on both seeds, ends at 32.5 (mean of 30, 35); trial 1
    (x 0, y 20): 20, 40, ... reaches it at 200, ends at 82.5; trial 2 (x 0, y 5): 5 ... 20 and
    10 ... 25 never reach it (inf), ends at 22.5, beaten on both by trial 0. Pareto set: 1, 0."""
    sweeper = _two_objective_sweeper(tmp_path, frames_to_reach=30.0)
    sweeper._check_two_objectives()
    study = sweeper._study(tmp_path)
    for x, y in ((30.0, 0.0), (0.0, 20.0), (0.0, 5.0)):
        study.enqueue_trial({"x": x, "y": y})
    sweeper._run(study, CURVE_SPACE, [], tmp_path)

    assert [t.values for t in study.get_trials()] == [[32.5, 100.0], [82.5, 200.0],
                                                       [22.5, float("inf")]]  # fmt: skip
    assert study.get_trials()[2].user_attrs["seed_frames_to"] == {"0": float("inf"),
                                                                  "1": float("inf")}  # fmt: skip
    results = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert [row["trial"] for row in results["pareto_set"]] == [1, 0]
    assert results["best_trial"] is None
    text = (tmp_path / "study.md").read_text()
    pareto = text.split("## Pareto set")[1].split("\n\n")[1].splitlines()[2:]
    assert [line.split(" | ")[:3] for line in pareto] == [["| 1", "82.5", "200"],
                                                           ["| 0", "32.5", "100"]]  # fmt: skip
    picture = plot_pareto(study, tmp_path / "study-pareto.png")  # what xdrl-report adds
    assert picture is not None and picture.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("settings", "config", "message"),
    [
        ({"frames_to_reach": "high"}, {}, "got 'high'; set a number (e.g. 475)"),
        ({}, {"eval": {"enabled": True, "interval_frames": 400}},
         "reads the evaluations a run writes while it trains, and with eval.enabled=True, "
         "eval.interval_frames=400 and total_frames=400 there are none"),
        ({"pruner": optuna.pruners.MedianPruner()}, {},
         "Optuna prunes one-objective studies only; set pruner=none"),
        ({"sampler": optuna.samplers.CmaEsSampler()}, {},
         "CMA-ES samples one objective only; use sampler=tpe"),
        ({"recheck": {"top": 3, "seeds": 10, "first_seed": 1000}}, {},
         "the re-check ranks trials on one objective; set recheck.top=0"),
    ],
)  # fmt: skip
def test_a_second_objective_that_cannot_run_is_one_config_error(
    settings: dict, config: dict, message: str, tmp_path: Path
) -> None:
    sweeper = _two_objective_sweeper(tmp_path, frames_to_reach=30.0)
    for key, value in settings.items():
        setattr(sweeper, "sampler_config" if key == "sampler" else key, value)
    if "recheck" in settings:
        sweeper.recheck = settings["recheck"]
    sweeper.config = OmegaConf.merge(sweeper.config, config)
    with pytest.raises(ConfigError) as err:
        sweeper._check_two_objectives()
    assert str(err.value).startswith(f"hydra.sweeper.frames_to_reach: {message}")


# Every sampler with every search preset, and the sweeper's settings as one line (issue 47) --------

PRESETS = sorted(p.stem for p in (CONF / "hparams_search").glob("*.yaml"))
SAMPLERS = sorted(p.stem for p in (CONF / "hydra" / "sweeper" / "sampler").glob("*.yaml"))


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("preset", PRESETS)
def test_every_search_preset_takes_every_sampler(preset: str, sampler: str) -> None:
    """A preset sets only what every sampler takes (``seed``); the sampler's own keys live in
    its file, so ``hparams_search=<preset> hydra/sweeper/sampler=<sampler>`` builds the sampler
    its file names, with the preset's seed (RandomSampler was given TPE's n_startup_trials)."""
    from hydra import compose, initialize_config_module

    overrides = [f"hparams_search={preset}", f"hydra/sweeper/sampler={sampler}"]
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    node = cfg.hydra.sweeper.sampler
    own = OmegaConf.load(CONF / "hydra" / "sweeper" / "sampler" / f"{sampler}.yaml")
    assert set(node) == set(own)  # nothing of another sampler's
    built = instantiate(node)
    assert type(built).__name__ == str(own._target_).rpartition(".")[2]
    assert node.seed == 0  # the preset's
    from xdrl.sweep.settings import check_sweeper_settings

    check_sweeper_settings(cfg.hydra)


BAD_SETTINGS = [
    (["hparams_search=ppo_cartpole", "hydra.sweeper.sampler.seed=abc"],
     "hydra.sweeper.sampler.seed: got 'abc' (str), not an integer; set an integer or null"),
    (["hparams_search=ppo_cartpole", "hydra.sweeper.n_jobs=0"],
     "hydra.sweeper.n_jobs: got 0 (int), too small; set an integer >= 1, e.g. "
     "hydra.sweeper.n_jobs=1"),
    (["hparams_search=ppo_cartpole", "hydra.sweeper.n_trials=abc"],
     "hydra.sweeper.n_trials: got 'abc' (str), not an integer; set an integer >= 1, e.g. "
     "hydra.sweeper.n_trials=20"),
    (["hparams_search=ppo_cartpole", "hydra.sweeper.direction=up"],
     "hydra.sweeper.direction: got 'up' (str), not one of the options; set one of 'maximize', "
     "'minimize', e.g. hydra.sweeper.direction=maximize"),
    (["hparams_search=ppo_cartpole", "+hydra.sweeper.n_trial=5"],
     "hydra.sweeper.n_trial: not a setting of OptunaSweeper; did you mean hydra.sweeper.n_trials?"),
    (["hparams_search=ppo_cartpole", "+hydra.sweeper.recheck.topp=3"],
     "hydra.sweeper.recheck.topp: not a re-check key; did you mean hydra.sweeper.recheck.top?"),
    (["hparams_search=ppo_cartpole", "hydra/sweeper/sampler=random",
      "+hydra.sweeper.sampler.n_startup_trials=5"],
     "hydra.sweeper.sampler.n_startup_trials: not a setting of RandomSampler; its keys: seed"),
    (["hparams_search=ppo_cartpole", "hydra/sweeper/pruner=median",
      "hydra.sweeper.pruner.n_startup_trials=-1"],
     "hydra.sweeper.pruner: MedianPruner refused its settings (Number of startup trials cannot "
     "be negative, but got n_startup_trials=-1.); change the value it names, or pick another "
     "hydra/sweeper/pruner"),
    (["hydra/sweeper=pareto", "env=deep_sea_treasure", "algorithm=dqn",
      "hydra.sweeper.max_batch_size=abc"],
     "hydra.sweeper.max_batch_size: got 'abc' (str), not an integer; set an integer >= 1 or null"),
    (["hydra/sweeper=pareto", "env=deep_sea_treasure", "algorithm=dqn", "+hydra.sweeper.foo=1"],
     "hydra.sweeper.foo: not a setting of ParetoSweeper; its keys: max_batch_size"),
    (["seed=0,1", "algorithm.build.gamma=1.5"],  # a value every job gets
     "algorithm.build.gamma: got 1.5 (float), too large; set a number in [0, 1], e.g. "
     "algorithm.build.gamma=0.99"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "line"), BAD_SETTINGS, ids=[" ".join(a) for a, _ in BAD_SETTINGS])
def test_a_bad_sweeper_or_sampler_value_is_one_line_before_any_job(
    args: list[str], line: str
) -> None:
    """What ``xdrl-train -m`` checks before Hydra starts (Hydra's "Error in call to target"
    dump and exit 1 before; ``n_jobs=0`` was reported under n_trials)."""
    from xdrl.cli import check_command

    assert check_command(["-m", *args]) == line


@pytest.mark.parametrize(
    "args",
    [
        ["algorithm.build.gamma=1.5,0.9"],  # a swept value: its job fails alone
        ["hparams_search=ppo_cartpole", "algorithm.optimizer.lr=-1"],  # a searched key's
        ["hparams_search=ppo_cartpole_seeds", "hydra/sweeper/sampler=cmaes"],
    ],
)
def test_what_only_some_jobs_get_is_left_to_them(args: list[str]) -> None:
    from xdrl.cli import check_command

    assert check_command(["-m", *args]) is None


def test_the_console_script_says_it_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """End to end: the docs' ``-m hparams_search=ppo_cartpole`` with a bad sampler seed."""
    from tests.conftest import run_cli

    result = run_cli(
        ["-m", "hparams_search=ppo_cartpole", "hydra.sweeper.sampler.seed=abc"], cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (
        2,
        "xdrl-train: config error: hydra.sweeper.sampler.seed: got 'abc' (str), not an integer; "
        "set an integer or null\n",
    )
    assert list(tmp_path.iterdir()) == []
