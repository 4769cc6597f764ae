"""Saved configs read back through the run's typed spec (``RunSpec.from_saved``,
``RunSpec.from_run_dir``): the fixture run dirs written by older code (tests/fixtures/runs) give
the values their YAML files hold, read here independently with ``yaml``; moved ``_target_`` paths
are renamed; keys an older run lacked come from today's ``conf/`` files; the nodes a library
instantiates are left as saved."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import REPO
from xdrl.config.errors import ConfigError
from xdrl.config.settings import CheckpointSettings, EvalSettings
from xdrl.config.spec import RunSpec
from xdrl.policy.run_dir import saved_config

FIXTURES = REPO / "tests" / "fixtures" / "runs"
CARTPOLE = FIXTURES / "cartpole_ppo_v1"
(CHECKPOINT,) = sorted((CARTPOLE / "checkpoints").glob("checkpoint-*"))


def _yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def _conf(path: str) -> dict[str, Any]:
    """One of today's ``conf/`` files, as written (cartpole.yaml takes its keys from gym.yaml)."""
    return _yaml(REPO / "conf" / path)


def _settings(cls: type, node: dict[str, Any]) -> Any:
    return cls(**{k: v for k, v in node.items() if k != "_target_"})


def _assert_spec_of(spec: RunSpec, saved: dict[str, Any]) -> None:
    """Every typed field of ``spec`` against the saved YAML's own value."""
    assert spec.seed == saved["seed"] and spec.device == saved["device"]
    assert spec.precision == saved["precision"] and spec.objective == saved["objective"]
    assert spec.frames_per_batch == saved["frames_per_batch"]
    assert spec.requested_total_frames == saved["total_frames"]
    assert spec.env_id == saved["env"]["id"] and spec.frame_skip == saved["env"]["frame_skip"]
    assert spec.resume == saved["resume"]
    assert spec.lr_schedule == saved["algorithm"]["lr_schedule"]
    assert spec.max_grad_norm == saved["algorithm"]["max_grad_norm"]
    assert spec.eval == _settings(EvalSettings, saved["eval"])
    assert spec.checkpoint == _settings(CheckpointSettings, saved["checkpoint"])
    assert spec.group == saved["logging"]["group"]
    assert spec.suspect_gap == saved["pareto"]["suspect_gap"]
    assert spec.reward_weights == saved["env"]["reward_weights"]  # None in both fixtures
    assert spec.algorithm_name == saved["algorithm"]["build"]["_target_"].split(".")[-2]


@pytest.mark.parametrize(
    "path", [CARTPOLE / ".hydra" / "config.yaml", CHECKPOINT / "config.yaml"], ids=["hydra", "ckpt"]
)
def test_an_old_run_dirs_configs_read_back_with_their_values(path: Path) -> None:
    saved = _yaml(path)
    assert "lean" not in saved  # written before the key existed
    spec = RunSpec.from_saved(saved_config(path.parent))  # both files are config.yaml
    _assert_spec_of(spec, saved)
    assert spec.lean is _conf("config.yaml")["lean"]  # today's default fills the missing key
    assert saved["env"]["_target_"] == "xdrl.envs.make_env"  # moved since
    assert spec.cfg.env._target_ == "xdrl.envs.factory.make_env"
    assert spec.cfg.eval._target_ == "xdrl.config.settings.EvalSettings"
    assert spec.total_frames == 1024 and spec.eval_seed == saved["seed"] + 10_000


def test_from_run_dir_reads_the_hydra_config() -> None:
    spec = RunSpec.from_run_dir(CARTPOLE)
    _assert_spec_of(spec, _yaml(CARTPOLE / ".hydra" / "config.yaml"))
    written = OmegaConf.to_container(spec.cfg, resolve=False)
    assert isinstance(written, dict) and written["run_dir"] == "${hydra:runtime.output_dir}"


def test_the_old_atari_config_reads_back_with_its_factory_and_frame_skip() -> None:
    saved = _yaml(FIXTURES / "atari_ppo_v1" / "config.yaml")
    spec = RunSpec.from_saved(saved_config(FIXTURES / "atari_ppo_v1"))
    _assert_spec_of(spec, saved)
    assert spec.frame_skip == 4 and spec.cfg.env._target_ == "xdrl.envs.atari.make_atari_env"


def _older(saved: dict[str, Any]) -> dict[str, Any]:
    """``saved`` as a run from before env.frame_skip, env.frame_stack and eval.video_fps."""
    older = copy.deepcopy(saved)
    for node, key in (("env", "frame_skip"), ("env", "frame_stack"), ("eval", "video_fps")):
        del older[node][key]
    return older


def test_keys_an_older_run_lacked_come_from_todays_defaults_outside_instantiated_nodes() -> None:
    older = _older(_yaml(CHECKPOINT / "config.yaml"))
    before = copy.deepcopy(older)
    spec = RunSpec.from_saved(older)
    assert older == before  # the caller's data is not changed
    assert spec.frame_skip == _conf("env/gym.yaml")["frame_skip"] == 1
    assert spec.eval.video_fps == _conf("eval/default.yaml")["video_fps"] == 30
    assert "frame_stack" not in spec.cfg.env  # the factory's own default applies, as for the run
    assert set(spec.cfg.algorithm.build) == set(older["algorithm"]["build"])


def test_multi_objective_fields_and_a_partial_config() -> None:
    config = {
        "seed": 1003,
        "env": {"id": "deep-sea-treasure-v0", "reward_weights": [0.25, 0.75],
                "pareto": {"ref_point": [0, -25]}},
        "pareto": {"suspect_gap": 0.5},
    }  # fmt: skip
    spec = RunSpec.from_saved(config)
    assert spec.reward_weights == (0.25, 0.75) and spec.ref_point == (0.0, -25.0)
    assert spec.suspect_gap == 0.5 and spec.seed == 1003
    unweighted = RunSpec.from_saved({"seed": 0, "env": {"id": "CartPole-v1"}})
    assert unweighted.ref_point is None and unweighted.reward_weights is None
    assert unweighted.suspect_gap == _conf("config.yaml")["pareto"]["suspect_gap"]


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"seed": "abc", "env": {"id": "CartPole-v1"}}, "cfg.yaml"),
        ({"seed": 0, "env": {"frame_skip": 1}}, "env.id"),
        ({"seed": 0, "env": {"id": "CartPole-v1"}, "algorithm": "a2c"}, "cfg.yaml"),
    ],
    ids=["seed-not-int", "no-env-id", "group-not-a-node"],
)
def test_a_config_that_is_no_run_config_is_one_config_error(config: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        RunSpec.from_saved(config, "cfg.yaml")
    assert err.value.key == key and "not a run config xdrl can read" in err.value.message


def test_the_pareto_report_reads_records_through_the_spec() -> None:
    from xdrl.pareto.report import run_spec

    record = SimpleNamespace(dir=Path("/x"), config={"seed": 2, "env": {"id": "x"}})
    spec = run_spec(record)
    assert spec is not None and (spec.seed, spec.env_id) == (2, "x")
    assert run_spec(SimpleNamespace(dir=Path("/x"), config={"seed": "two"})) is None


def test_report_records_carry_the_spec(tmp_path: Path) -> None:
    import shutil

    from xdrl.report.runs import read_run

    run = read_run(Path(shutil.copytree(CARTPOLE, tmp_path / "run")))
    assert run.spec is not None and (run.seed, run.env) == (0, "CartPole-v1")
    assert run.config == saved_config(CARTPOLE / ".hydra")  # the plain data, renamed
