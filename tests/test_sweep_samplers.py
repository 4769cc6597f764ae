"""The Optuna sweeper's samplers (issue 37): each preset in conf/hydra/sweeper/sampler/ drives a
study (TPE multivariate by default, random, CMA-ES on its own model), and a space CMA-ES cannot
sample, or CMA-ES without its package, is one config error before anything runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus
from hydra.utils import instantiate
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hydra_plugins.xdrl_optuna.optuna_sweeper import OptunaSweeper, check_sampler
from tests.conftest import CONF
from xdrl.config.errors import ConfigError

SPACE = {"x": FloatDistribution(-1.0, 1.0), "y": FloatDistribution(1e-3, 1.0, log=True)}


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
