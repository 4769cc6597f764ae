"""Every file in conf/ composes, and the objects it names instantiate."""

from __future__ import annotations

from dataclasses import MISSING, fields
from pathlib import Path

import pytest
from hydra.utils import instantiate

from tests.conftest import CONF, compose_config, missing_extra, read_scalars, read_summary
from xdrl.config.settings import (
    AlgorithmSettings,
    CheckpointSettings,
    EvalSettings,
    LoggingSettings,
    RunSettings,
)


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("env_file", [e for e in _options("env") if e not in ("gym", "mo_gym")])
def test_env_file_builds_a_working_env(env_file: str, tmp_path: Path) -> None:
    missing = missing_extra(env_file)
    if missing:
        pytest.skip(f"needs xdrl[{missing}]")
    cfg = compose_config([f"env={env_file}"], tmp_path)
    env = instantiate(cfg.env)(num_envs=2, seed=0)
    try:
        rollout = env.rollout(3, break_when_any_done=False)
        assert rollout.batch_size == (2, 3)
        assert rollout["next", "reward"].shape[-1] == 1  # training reward is scalar
        assert ("next", "episode_reward") in rollout.keys(True)
    finally:
        env.close()


def test_generic_gym_entry_requires_an_id(tmp_path: Path) -> None:
    cfg = compose_config(["env=gym", "env.id=Acrobot-v1"], tmp_path)
    env = instantiate(cfg.env)(num_envs=1, seed=0)
    assert env.rollout(2).batch_size[-1] == 2
    env.close()


@pytest.mark.parametrize("batching", ["vector", "serial", "parallel"])
@pytest.mark.parametrize(
    "named",
    [
        ["env.id=tests.user_envs:XdrlCorridor-v0"],  # gymnasium's module:EnvId
        ["env.import_modules=[tests.user_envs]", "env.id=XdrlCorridor-v0"],
    ],
)
def test_a_user_env_builds_under_every_batching(
    named: list[str], batching: str, tmp_path: Path
) -> None:
    """A user's own env (tests/user_envs.py), in worker processes too (batching=parallel)."""
    cfg = compose_config([*named, f"env.batching={batching}", "env.num_envs=2"], tmp_path)
    env = instantiate(cfg.env)(seed=0)
    try:
        rollout = env.rollout(3, break_when_any_done=False)
    finally:
        env.close()
    positions = rollout["next", "observation"]
    assert positions.shape == (2, 3, 1)
    assert ((positions >= 0) & (positions <= 3 / 8 + 1e-6)).all()  # 3 steps on a corridor of 8


@pytest.mark.parametrize("logging_file", _options("logging"))
def test_logging_file_instantiates(logging_file: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = compose_config([f"logging={logging_file}"], tmp_path)
    if cfg.logging.logger is None:
        assert logging_file == "none"
        return
    logger = instantiate(cfg.logging.logger)
    logger.log_scalar("counters/total_frames", 1, step=1)
    if logging_file == "wandb":
        import wandb

        wandb.finish()
        assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 1  # under run_dir
    elif logging_file == "tensorboard":
        assert list((tmp_path / "logs" / "test").glob("events.out.tfevents.*"))
    else:
        assert read_scalars(tmp_path / "logs") == {"counters/total_frames": [(1, 1.0)]}


@pytest.mark.parametrize("group", ["algorithm", "eval", "checkpoint"])
def test_every_option_passes_the_pre_check(group: str, tmp_path: Path) -> None:
    """Every preset: tests/test_config_errors.py::test_every_preset_passes."""
    from xdrl.config.check import check_config

    for option in _options(group):
        check_config(compose_config([f"{group}={option}"], tmp_path))


# Every preset's own env and algorithm settings, on a budget of one small batch.
PRESET_BUDGET = [
    "total_frames=256",
    "frames_per_batch=256",  # a multiple of every preset's minibatch size
    "env.num_envs=2",
    "logging=none",
    "checkpoint=none",
    "eval.episodes=1",
    "eval.max_steps=20",
    "eval.interval_frames=256",
]
# Off-policy presets: their random warm-up ends inside the budget, and the one batch after it
# takes 32 optimizer steps into a 1,000-transition buffer (the preset's own utd took 256 steps of
# halfcheetah_sac's 256x256 networks, 3.4 s of CPU, and atari_dqn allocated 100k frames).
OFF_POLICY = {"dqn", "sac", "td3"}
OFF_POLICY_BUDGET = [
    "algorithm.build.init_random_frames=128",
    "algorithm.build.utd=0.125",
    "algorithm.build.buffer_size=1000",
]


@pytest.mark.parametrize("preset", _options("experiment"))
def test_every_preset_trains_on_a_tiny_budget(preset: str, tmp_path: Path) -> None:
    import yaml

    import xdrl.run.lifecycle

    text = (CONF / "experiment" / f"{preset}.yaml").read_text()
    defaults = yaml.safe_load(text)["defaults"]
    while not any("override /env" in str(entry) for entry in defaults):  # a preset on a preset
        parent = next(entry for entry in defaults if isinstance(entry, str))
        defaults = yaml.safe_load((CONF / "experiment" / f"{parent}.yaml").read_text())["defaults"]
    overrides = dict(next(iter(e.items())) for e in defaults if isinstance(e, dict))
    env_file, algorithm = overrides["override /env"], overrides["override /algorithm"]
    missing = missing_extra(env_file)
    if missing:
        pytest.skip(f"needs xdrl[{missing}]")
    warm_up = OFF_POLICY_BUDGET if algorithm in OFF_POLICY else []
    cfg = compose_config([f"experiment={preset}", *PRESET_BUDGET, *warm_up], tmp_path / "run")
    xdrl.run.lifecycle.run(cfg)
    summary = read_summary(tmp_path / "run")
    env_id = yaml.safe_load((CONF / "env" / f"{env_file}.yaml").read_text())["id"]
    frames = 256 * cfg.env.frame_skip  # one batch of 256 agent steps (4 frames each on Atari)
    assert (summary["status"], summary["total_frames"]) == ("completed", frames)
    assert (summary["env"], summary["algorithm"]) == (env_id, algorithm)
    assert summary["eval"]  # the preset's policy was evaluated


TYPED_GROUPS = {"eval": EvalSettings, "checkpoint": CheckpointSettings, "logging": LoggingSettings}


@pytest.mark.parametrize("group", sorted(TYPED_GROUPS))
def test_every_option_instantiates_its_typed_settings(group: str, tmp_path: Path) -> None:
    """The ``_target_`` of eval, checkpoint and logging is a real constructor: every option
    builds it with its YAML values, and every field without a default is set in YAML."""
    cls = TYPED_GROUPS[group]
    required = {f.name for f in fields(cls) if f.default is MISSING}
    for option in _options(group):
        node = compose_config([f"{group}={option}"], tmp_path)[group]
        settings = instantiate(node, _recursive_=False)
        assert isinstance(settings, cls)
        keys = {str(k) for k in node if k != "_target_"}
        assert required <= keys <= {f.name for f in fields(cls)}, option
        assert {k: getattr(settings, k) for k in keys} == {k: node[k] for k in keys}


def test_top_level_and_algorithm_keys_are_their_settings_fields(tmp_path: Path) -> None:
    assert set(map(str, compose_config([], tmp_path))) == {f.name for f in fields(RunSettings)}
    for option in _options("algorithm"):
        node = compose_config([f"algorithm={option}"], tmp_path).algorithm
        assert set(map(str, node)) == {f.name for f in fields(AlgorithmSettings)}, option


def test_every_yaml_key_is_commented() -> None:
    """House style: each YAML key documents itself with a trailing comment."""
    bare = []
    for path in CONF.rglob("*.yaml"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith(("#", "-")) or stripped.endswith(":"):
                continue
            if stripped.startswith(("_target_", "_partial_")) or "#" in stripped:
                continue
            bare.append(f"{path.relative_to(CONF)}:{number}: {stripped}")
    assert not bare, "uncommented keys:\n" + "\n".join(bare)
