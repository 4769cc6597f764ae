"""Every bad value is one line on stderr (exit 2) before anything heavy: ``xdrl.config.check``.

The table of bad values runs in process through the CLI's pre-check (what ``xdrl-train`` runs
before Hydra makes a run dir); a few cases run ``xdrl-train`` end to end, and one subprocess runs
the whole table to show that none of it imports torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from tests.conftest import CONF, REPO, SMALL, compose_config, read_scalars, run_cli
from xdrl.cli import _precheck
from xdrl.config.check import check_config, check_value, check_writable_dir
from xdrl.config.errors import ConfigError
from xdrl.config.signatures import read_signature

A_FILE = str(Path(__file__).resolve())  # a plain file that exists wherever the tests run
USER_ENV = "tests.user_envs:XdrlCorridor-v0"  # a user's own env module (tests/user_envs.py)

# (override, the key the one line must name)
BAD_VALUES = [
    # the values the issue reproduced
    ("total_frames=abc", "total_frames"),
    ("eval.episodes=two", "eval.episodes"),
    ("seed=x", "seed"),
    ("seed=-1", "seed"),
    ("total_frames=[1,2]", "total_frames"),
    ("algorithm.optimizer.lr=-1", "algorithm.optimizer.lr"),
    ("algorithm.optimizer.lr=abc", "algorithm.optimizer.lr"),
    ("env.max_episode_steps=0", "env.max_episode_steps"),
    ("env=deep_sea_treasure env.reward_weights=[a,b]", "env.reward_weights"),
    ("device=cuda", "device"),  # this CPU-only test machine
    ("device=banana", "device"),
    (f"resume={A_FILE}", "resume"),
    (f"hydra.run.dir={A_FILE}", "hydra.run.dir"),
    (f"hydra.run.dir={A_FILE}/sub/run", "hydra.run.dir"),
    ("+env.make_kwargs.foo=1", "env.make_kwargs.foo"),
    ("frames_per_batch=256.5", "frames_per_batch"),
    ("algorithm.build.gamma=1.5", "algorithm.build.gamma"),
    ("algorithm.build.lmbda=2", "algorithm.build.lmbda"),
    ("algorithm.build.clip_epsilon=-1", "algorithm.build.clip_epsilon"),
    ("algorithm.max_grad_norm=-1", "algorithm.max_grad_norm"),
    ("total_frames=2048.7", "total_frames"),
    ("logging.reduce_stats=banana", "logging.reduce_stats"),
    ("logging.progress_interval_s=-1", "logging.progress_interval_s"),
    ("objective=nope", "objective"),
    # the rest of the config's keys
    ("num_threads=0", "num_threads"),
    ("num_threads=1.5", "num_threads"),
    ("num_threads=many", "num_threads"),
    ("pareto.method=random", "pareto.method"),
    ("pareto.w0_range=[0.0,2.0]", "pareto.w0_range"),
    ("pareto.num_weights=1", "pareto.num_weights"),
    ("+algorithm.optimizer.betas=[0.9,1.5]", "algorithm.optimizer.betas"),
    ("frames_per_batch=0", "frames_per_batch"),
    ("frames_per_batch=250", "frames_per_batch"),  # not a multiple of env.num_envs=8
    ("resume=/nonexistent/run", "resume"),
    ("+foo=1", "foo"),
    ("env.num_envs=0", "env.num_envs"),
    ("env.batching=threads", "env.batching"),
    ("env.frame_skip=0", "env.frame_skip"),
    ("env.normalize_observations=maybe", "env.normalize_observations"),
    ("env.id=CartPol-v1", "env.id"),
    ("env=gym", "env.id"),  # required, left at ???
    ("env.make_kwargs=3", "env.make_kwargs"),
    ("eval.interval_frames=-5", "eval.interval_frames"),
    ("eval.max_steps=0", "eval.max_steps"),
    ("eval.enabled=yes", "eval.enabled"),
    ("eval.deterministic=false", "eval.deterministic"),  # nothing would be evaluated
    ("eval.video_fps=0", "eval.video_fps"),
    ("+eval.episode=3", "eval.episode"),
    ("checkpoint.keep_last=0", "checkpoint.keep_last"),
    ("checkpoint.interval_frames=1e3", "checkpoint.interval_frames"),
    ("checkpoint.enabled=2", "checkpoint.enabled"),
    ("logging.group=", "logging.group"),
    ("algorithm.lr_schedule=cosine", "algorithm.lr_schedule"),
    ("algorithm.optimizer.eps=0", "algorithm.optimizer.eps"),
    ("algorithm.optimizer.fused=sometimes", "algorithm.optimizer.fused"),
    ("algorithm.build.epochs=0", "algorithm.build.epochs"),
    ("algorithm.build.actor_cells=[64,0]", "algorithm.build.actor_cells"),
    ("algorithm.build.activation=sigmoid", "algorithm.build.activation"),
    ("algorithm.build.entropy_coef=-0.1", "algorithm.build.entropy_coef"),
    ("+algorithm.build.clip_epsilo=0.1", "algorithm.build.clip_epsilo"),
    ("+algorithm.build.frames_per_batch=64", "algorithm.build.frames_per_batch"),
    ("algorithm=dqn algorithm.build.tau=0", "algorithm.build.tau"),
    ("algorithm=dqn algorithm.build.eps_end=1.5", "algorithm.build.eps_end"),
    ("algorithm=dqn algorithm.build.loss_function=huber", "algorithm.build.loss_function"),
    ("algorithm=sac algorithm.build.target_entropy=hi", "algorithm.build.target_entropy"),
    ("num_threads=true", "num_threads"),
    ("algorithm.optimizer.lr=.inf", "algorithm.optimizer.lr"),
    ("algorithm=dqn algorithm.build.buffer_size=0", "algorithm.build.buffer_size"),
    ("algorithm=dqn algorithm.build.target_update=sometimes", "algorithm.build.target_update"),
    (
        "algorithm=dqn algorithm.build.hard_update_interval=0",
        "algorithm.build.hard_update_interval",
    ),
    ("algorithm=sac algorithm.build.utd=0", "algorithm.build.utd"),
    ("algorithm=td3 algorithm.build.policy_delay=0", "algorithm.build.policy_delay"),
    ("algorithm.build.reward_scale=0", "algorithm.build.reward_scale"),
    ("algorithm=a2c algorithm.build.epochs=0", "algorithm.build.epochs"),
    ("env=deep_sea_treasure env.reward_weights=[.nan,1]", "env.reward_weights"),
    ("env=deep_sea_treasure env.reward_weights=[0.5,0.3,0.2]", "env.reward_weights"),
    ("env=deep_sea_treasure env.reward_weights=[0,0]", "env.reward_weights"),
    ("env.reward_weights=[1.0]", "env.reward_weights"),  # CartPole's reward is a scalar
    ("checkpoint.keep_best=maybe", "checkpoint.keep_best"),
    ("+logging.log_model=3", "logging.log_model"),
    ("+checkpoint.keep_bst=true", "checkpoint.keep_bst"),
    ("logging=wandb logging.logger.mode=garbage", "logging.logger.mode"),
    # a budget that cannot train: it ends inside the random warm-up (issue 18 A5)
    ("algorithm=sac total_frames=2048", "total_frames"),
    ("algorithm=dqn total_frames=512 frames_per_batch=256", "total_frames"),
    ("algorithm=td3 algorithm.build.init_random_frames=4097 total_frames=4096", "total_frames"),
    ("experiment=atari_dqn total_frames=32768", "total_frames"),  # frame_skip 4 (issue 38)
    # envs a user names (issue 18 E): third-party families, modules, observation spaces
    ("env.id=MiniGrid-Empty-5x5-v0", "env.id"),
    ("env=atari algorithm=sac", "algorithm"),  # images, no image encoder
    ("env.id=no_such_module:Foo-v0", "env.id"),
    ("env.import_modules=[no_such_module]", "env.import_modules"),
    ("env.import_modules=minigrid", "env.import_modules"),  # a list, not a string
    ("env.id=FrozenLake-v1", "env.id"),  # Discrete observations
    ("env.observation_encoding=one_hot", "env.observation_encoding"),  # CartPole: float Box
    ("env.observation_encoding=onehot", "env.observation_encoding"),
    ("env.id=Blackjack-v1", "env.id"),  # Tuple observations
    ("env.id=CarRacing-v3 algorithm.build.encoder=mlp", "algorithm.build.encoder"),
    # images and pixels (issue 21): encoders, frame stacks, Atari's own keys, precision
    ("algorithm.build.encoder=cnn", "algorithm.build.encoder"),  # CartPole's vectors
    ("algorithm=dqn algorithm.build.encoder=cnn", "algorithm.build.encoder"),
    ("algorithm.build.encoder=resnet", "algorithm.build.encoder"),
    ("env=atari algorithm.build.encoder=mlp", "algorithm.build.encoder"),
    ("env.frame_stack=4", "env.frame_stack"),  # a frame stack on vector observations
    # memory (issue 36): recurrent policies and masked observations
    ("algorithm=dqn +algorithm.build.recurrent=lstm", "algorithm.build.recurrent"),
    ("algorithm=sac env=pendulum +algorithm.build.recurrent=gru", "algorithm.build.recurrent"),
    ("algorithm=td3 env=pendulum +algorithm.build.recurrent=lstm", "algorithm.build.recurrent"),
    ("algorithm.build.recurrent=rnn", "algorithm.build.recurrent"),
    ("algorithm.build.recurrent_hidden=0", "algorithm.build.recurrent_hidden"),
    ("algorithm.build.recurrent=lstm", "algorithm.build.minibatch_size"),  # 64: not whole rows
    ("env.mask_observations=[1,4]", "env.mask_observations"),  # CartPole has 4 entries
    ("env.mask_observations=[-1]", "env.mask_observations"),
    ("env=atari env.mask_observations=[1]", "env.mask_observations"),
    ("env.frame_stack=0", "env.frame_stack"),
    ("env=atari env.id=CartPole-v1", "env.id"),
    ("env=atari env.id=ALE/Pongg-v5", "env.id"),
    ("env=atari env.frame_skip=0", "env.frame_skip"),
    ("env=atari env.repeat_action_probability=1.5", "env.repeat_action_probability"),
    ("env=atari env.normalize_observations=true", "env.normalize_observations"),
    ("env=atari env.reward_weights=[1.0]", "env.reward_weights"),
    ("precision=fp16", "precision"),
    ("algorithm.build.clip_schedule=cosine", "algorithm.build.clip_schedule"),
    ("env.id=tests.user_envs:XdrlDictCorridor-v0", "env.id"),  # Dict, as MiniGrid's
    # issue 38: Atari ids outside env=atari, log_model without W&B
    ("env=gym env.id=ALE/Breakout-v5", "env.id"),
    ("env=gym env.id=BreakoutNoFrameskip-v4", "env.id"),
    ("env.id=ALE/Pong-v5 algorithm=dqn", "env.id"),
    ("logging.log_model=true", "logging.log_model"),
    ("logging=none logging.log_model=true", "logging.log_model"),
    ("logging=tensorboard logging.log_model=true", "logging.log_model"),
    ("+env.make_kwargs.length=-3 env.id=tests.user_envs:XdrlCorridor-v0", "env.make_kwargs"),
]
# (override, key, environment variables): variables the libraries read at start-up (issue 18 E15)
BAD_ENVIRONMENT = [
    ("logging=wandb", "WANDB_MODE", {"WANDB_MODE": "garbage"}),
    ("seed=1", "RL_LOGGING_LEVEL", {"RL_LOGGING_LEVEL": "garbage"}),
    ("seed=1", "RL_LOGGING_LEVEL", {"RL_LOGGING_LEVEL": "info"}),  # TorchRL wants INFO
]
# The few run end to end as a user would (the rest go through the same pre-check in process).
END_TO_END = [
    ("total_frames=abc", "total_frames", {}),
    ("algorithm.build.gamma=1.5", "algorithm.build.gamma", {}),
    ("env=gym", "env.id", {}),
    ("algorithm=sac total_frames=2048", "total_frames", {}),
    ("env.id=FrozenLake-v1", "env.id", {}),
    ("device=cuda", "device", {}),
    ("env.id=XdrlCorridor-v0", "env.id", {}),  # registered only once its module is imported
    # the env check creates a MuJoCo env, whose C library warns on stderr at every load
    ("env=mo_halfcheetah env.reward_weights=[1,2,3]", "env.reward_weights", {}),
    *BAD_ENVIRONMENT[:2],
]


def _precheck_line(override: str, run_in: Path) -> str | None:
    cwd = Path.cwd()
    os.chdir(run_in)  # relative run dirs resolve here, as they would for xdrl-train
    try:
        return _precheck(override.split(" "))
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize(("override", "key"), BAD_VALUES, ids=[o for o, _ in BAD_VALUES])
def test_bad_value_is_one_line_naming_its_key(tmp_path: Path, override: str, key: str) -> None:
    line = _precheck_line(override, tmp_path)
    assert line is not None and line.startswith(f"{key}: "), line
    assert "\n" not in line and ";" in line  # one line: what is wrong; how to fix
    assert not (tmp_path / "outputs").exists()  # no run dir, no checkpoint, no summary


@pytest.mark.parametrize(("override", "key", "env"), BAD_ENVIRONMENT)
def test_bad_environment_variable_is_one_line(
    tmp_path: Path, monkeypatch, override: str, key: str, env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    line = _precheck_line(override, tmp_path)
    assert line is not None and line.startswith(f"{key}: environment variable is "), line
    assert repr(env[key]) in line and "\n" not in line


@pytest.mark.parametrize(
    ("override", "env"),
    [
        ("seed=1", {"RL_LOGGING_LEVEL": "DEBUG"}),
        ("logging=wandb", {"WANDB_MODE": "offline"}),
        ("seed=1", {"WANDB_MODE": "garbage"}),  # the CSV logger: W&B never reads it
        ("logging=wandb logging.logger.mode=offline", {"WANDB_MODE": "garbage"}),  # the key wins
    ],
)
def test_environment_variables_that_work_pass(
    tmp_path: Path, monkeypatch, override: str, env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _precheck_line(override, tmp_path) is None


@pytest.mark.parametrize(("override", "key", "env"), END_TO_END, ids=[o for o, *_ in END_TO_END])
def test_bad_value_end_to_end_is_one_line_and_exit_2(
    tmp_path: Path, override: str, key: str, env: dict[str, str]
) -> None:
    if "halfcheetah" in override and importlib.util.find_spec("mujoco") is None:
        pytest.skip("needs xdrl[mujoco]")
    result = run_cli(override.split(" "), cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"xdrl-train: config error: {key}: "), lines[0]
    assert not (tmp_path / "outputs").exists()


# One case per kind of check (a type, a settings group, a builder signature, make_kwargs, the
# objective, the warm-up budget, a third-party id, an observation space, reward weights).
LIGHT = [
    "total_frames=abc",
    "checkpoint.keep_last=0",
    "algorithm.build.gamma=1.5",
    "+env.make_kwargs.foo=1",
    "objective=nope",
    "algorithm=sac total_frames=2048",
    "env.id=MiniGrid-Empty-5x5-v0",
    "env.id=FrozenLake-v1",
    "env=deep_sea_treasure env.reward_weights=[0,0]",
    "algorithm=sac",  # passes
]


def test_checks_import_no_torch(tmp_path: Path) -> None:
    """Each kind of check through the pre-check in one fresh process: torch, TorchRL and W&B
    stay unimported (``device=cuda`` asks torch, by design)."""
    code = (
        "import json, sys\n"
        "from xdrl.cli import _precheck\n"
        f"lines = [_precheck(o.split(' ')) for o in {LIGHT!r}]\n"
        "print(json.dumps([lines, sorted(m for m in ('torch', 'torchrl', 'wandb') "
        "if m in sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    lines, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert heavy == []
    assert [line is None for line in lines] == [False] * (len(LIGHT) - 1) + [True]


# Envs a user names, budgets that can train (the other side of the table)


def test_a_user_env_module_is_named_by_module_colon_id_or_import_modules(tmp_path: Path) -> None:
    assert _precheck_line(f"env.id={USER_ENV}", tmp_path) is None
    both = "env.import_modules=[tests.user_envs] env.id=XdrlCorridor-v0"
    assert _precheck_line(both, tmp_path) is None


def test_a_user_env_trains_end_to_end(tmp_path: Path) -> None:
    args = [*SMALL, f"env.id={USER_ENV}", "checkpoint=none", "hydra.run.dir=run"]
    result = run_cli(args, cwd=tmp_path, env={"PYTHONPATH": str(REPO)}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed"
    scalars = read_scalars(tmp_path / "run" / "logs")
    assert any(name.startswith("train/") for name in scalars)
    # the Corridor's reward: -0.01 per step, +1 at the far end; an episode's return is in between
    (step, episode_mean), *_ = scalars["eval/deterministic/reward/episode_reward_mean"]
    assert -0.5 <= episode_mean <= 1.0


SAC_TINY = [
    "env=pendulum",
    "algorithm=sac",
    "total_frames=256",
    "frames_per_batch=256",
    "env.num_envs=4",
    "algorithm.build.utd=0.02",
    "algorithm.build.batch_size=16",
    "algorithm.build.actor_cells=[16]",
    "algorithm.build.critic_cells=[16]",
    "eval=none",
    "checkpoint=none",
]


def _train(overrides: list[str], run_dir: Path) -> None:
    """Train the composed config in process: what the pre-check passed, the run runs (the
    console script's one-line refusals are tested above)."""
    import xdrl.run.lifecycle

    xdrl.run.lifecycle.run(compose_config(overrides, run_dir))


def test_a_budget_that_reaches_the_warm_up_trains_and_one_frame_more_does_not(
    tmp_path: Path,
) -> None:
    """The boundary the check draws is TorchRL's: its Trainer optimizes once the collected frames
    reach ``init_random_frames``; one warm-up frame more and nothing would be trained."""
    too_long = _precheck_line(
        " ".join([*SAC_TINY, "algorithm.build.init_random_frames=257"]), tmp_path
    )
    assert too_long is not None and too_long.startswith("total_frames: 256 frames end inside")
    _train([*SAC_TINY, "algorithm.build.init_random_frames=256"], tmp_path / "run")
    scalars = read_scalars(tmp_path / "run" / "logs")
    assert scalars["train/agents/loss_actor"]  # TorchRL ran the optimizer in the last batch


# Budgets in frames, for every frame_skip (issue 38): the refusal's two fixes are each accepted
# and train. (preset, overrides whose budget ends inside the warm-up, the two fixes computed by
# hand: frames per batch = frames_per_batch x frame_skip; the run trains ceil(total / that) batches)
BUDGETS = [
    (
        "cartpole_dqn",  # frame_skip 1, batches of 32 frames: 64 < 100; 4 batches = 128 >= 100
        ["frames_per_batch=32", "env.num_envs=4", "total_frames=64",
         "algorithm.build.init_random_frames=100", "algorithm.build.batch_size=16"],
        ("total_frames=128", "algorithm.build.init_random_frames=64"),
    ),
    (
        "pendulum_sac",  # frame_skip 1, batches of 16 frames: 32 < 40; 3 batches = 48 >= 40
        ["frames_per_batch=16", "env.num_envs=4", "total_frames=32",
         "algorithm.build.init_random_frames=40", "algorithm.build.batch_size=16",
         "algorithm.build.actor_cells=[16]", "algorithm.build.critic_cells=[16]"],
        ("total_frames=48", "algorithm.build.init_random_frames=32"),
    ),
    (
        "atari_dqn",  # frame_skip 4: 4 agent steps = 16 frames a batch; 64 < 65; 5 batches = 80
        ["total_frames=64", "algorithm.build.init_random_frames=65",
         "algorithm.build.buffer_size=64", "algorithm.build.batch_size=8", "num_threads=1"],
        ("total_frames=80", "algorithm.build.init_random_frames=64"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("preset", "overrides", "fixes"), BUDGETS, ids=[b[0] for b in BUDGETS])
@pytest.mark.parametrize("fix", [0, 1], ids=["total_frames", "init_random_frames"])
def test_a_budget_inside_the_warm_up_is_refused_and_each_suggested_fix_trains(
    tmp_path: Path, preset: str, overrides: list[str], fixes: tuple[str, str], fix: int
) -> None:
    """Frames count ``frame_skip`` per agent step once: the line's fixes are the budgets
    computed by hand, each passes the check, and its run optimizes (``train/`` metrics)."""
    if preset.startswith("atari") and importlib.util.find_spec("ale_py") is None:
        pytest.skip("needs xdrl[atari]")
    args = [f"experiment={preset}", *overrides, "eval=none", "checkpoint=none"]
    line = _precheck_line(" ".join(args), tmp_path)
    assert line is not None and line.startswith("total_frames: "), line
    suggested = re.search(
        r"set e\.g\. total_frames=\d+ \(the warm-up 10% of the run; (\d+) would train on its "
        r"last batch only\), or (\S+=\d+) or less$",
        line,
    )
    assert suggested is not None, line
    assert (f"total_frames={suggested[1]}", suggested[2]) == fixes
    fixed = [*args, fixes[fix]]
    assert _precheck_line(" ".join(fixed), tmp_path) is None
    _train(fixed, tmp_path / "run")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"
    scalars = read_scalars(tmp_path / "run" / "logs")
    (optim_steps,) = [v for k, v in scalars.items() if k.endswith("/optim_steps")]
    assert optim_steps[-1][1] > 0  # the last batch reached the warm-up and optimized


@pytest.mark.parametrize(
    "override",
    ["env=gym env.id=ALE/Breakout-v5", "env=gym env.id=BreakoutNoFrameskip-v4"],
)
def test_an_atari_id_outside_env_atari_points_to_it(tmp_path: Path, override: str) -> None:
    env_id = override.rpartition("=")[2]
    line = _precheck_line(override, tmp_path)
    assert line is not None and line.endswith(f"; set env=atari env.id={env_id}"), line
    if importlib.util.find_spec("ale_py") is not None:
        assert _precheck_line(f"env=atari env.id={env_id}", tmp_path) is None


def test_log_model_names_the_wandb_logger_it_needs(tmp_path: Path) -> None:
    line = _precheck_line("logging.log_model=true", tmp_path)
    assert line is not None and "set logging=wandb, or logging.log_model=false" in line
    if importlib.util.find_spec("wandb") is not None:
        assert _precheck_line("logging=wandb logging.log_model=true", tmp_path) is None


# In-process checks of the checker (cheap)


def _check(*overrides: str, run_dir: Path) -> None:
    check_config(compose_config(list(overrides), run_dir))


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*")))
def test_every_preset_passes(experiment: str, tmp_path: Path) -> None:
    """The one test that composes and checks every preset, through the CLI's pre-check."""
    assert _precheck_line(f"experiment={experiment}", tmp_path) is None


@pytest.mark.parametrize("env", sorted(p.stem for p in (CONF / "env").glob("*.yaml")))
def test_every_env_file_passes(env: str, tmp_path: Path) -> None:
    if env in ("gym", "mo_gym"):
        pytest.skip("needs env.id")
    _check(f"env={env}", run_dir=tmp_path)


@pytest.mark.parametrize("algorithm", sorted(p.stem for p in (CONF / "algorithm").glob("*")))
def test_builder_signature_read_without_import_matches_type_hints(algorithm: str) -> None:
    import importlib

    target = f"xdrl.algorithms.{algorithm}.build"
    read = read_signature(target)
    assert read is not None
    params, _ = read
    build = importlib.import_module(target.rsplit(".", 1)[0]).build
    hints = typing.get_type_hints(build, include_extras=True)
    hints.pop("return")
    assert {name: params[name].annotation for name in hints} == hints


@pytest.mark.parametrize(
    "name",
    ["RunSettings", "AlgorithmSettings", "EvalSettings", "CheckpointSettings", "LoggingSettings"],
)
def test_settings_class_read_without_import_matches_type_hints(name: str) -> None:
    import xdrl.config.settings

    read = read_signature(f"xdrl.config.settings.{name}")
    assert read is not None
    hints = typing.get_type_hints(getattr(xdrl.config.settings, name), include_extras=True)
    assert {key: param.annotation for key, param in read[0].items()} == hints


def test_make_env_signature_is_read_too() -> None:
    import xdrl.envs.factory

    read = read_signature("xdrl.envs.factory.make_env")
    assert read is not None
    hints = typing.get_type_hints(xdrl.envs.factory.make_env, include_extras=True)
    assert read[0]["num_envs"].annotation == hints["num_envs"]


@pytest.mark.parametrize(
    ("value", "annotation", "fragment"),
    [
        (2048.7, int, "got 2048.7 (float), not an integer"),
        ("abc", float, "got 'abc' (str), not a number"),
        (True, int, "not an integer"),  # YAML true is not 1
        (3, float, None),  # an int is a fine float
        ([1, "a"], list[float], "item 1 ('a') not a number"),
    ],
)
def test_check_value_is_strict(value, annotation, fragment: str | None) -> None:
    if fragment is None:
        assert check_value("k", value, annotation) == value
        return
    with pytest.raises(ConfigError) as err:
        check_value("k", value, annotation)
    assert fragment in str(err.value)


def test_objective_names_per_objective_keys_on_multi_objective_envs(tmp_path: Path) -> None:
    _check(
        "env=deep_sea_treasure",
        "objective=eval/deterministic/reward/objective_1/episode_reward_mean",
        run_dir=tmp_path,
    )


def test_optuna_trial_fails_fast_on_an_objective_it_never_logs(tmp_path: Path, monkeypatch) -> None:
    import xdrl.config.check as config_check

    monkeypatch.setattr(config_check, "_optuna_sweep", lambda: True)
    with pytest.raises(ConfigError, match="objective"):
        _check("objective=eval/stochastic/reward/episode_reward_mean", run_dir=tmp_path)
    with pytest.raises(ConfigError, match="eval is disabled"):
        _check("eval=none", run_dir=tmp_path)
    _check(run_dir=tmp_path)  # the default objective is logged


def test_writable_dir_checks_create_nothing(tmp_path: Path) -> None:
    check_writable_dir(str(tmp_path / "a" / "b"), "run_dir")
    assert not (tmp_path / "a").exists()
    with pytest.raises(ConfigError, match="is a file"):
        check_writable_dir(A_FILE, "run_dir")


def test_compose_without_overrides_passes(tmp_path: Path) -> None:
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"run_dir={tmp_path}", "exp_name=t"])
    check_config(cfg)


def test_sweep_job_with_a_bad_value_fails_only_itself_and_logs_its_trace(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "total_frames=abc,xyz", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert result.stderr.count("xdrl-train: config error: total_frames: got ") == 2
    assert "| 1 | total_frames=xyz | failed" in result.stdout  # the second job still ran
    for log_file in sweep.glob("*/*.log"):
        assert "Traceback" in log_file.read_text()
    assert len(list(sweep.glob("*/*.log"))) == 2
    assert not list(sweep.glob("*/summary.json"))
