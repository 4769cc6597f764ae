"""Every algorithm trains in process on every catalog env it can serve; misfits fail fast.

Runs are sequential in one process (TorchRL's Trainer keeps ``_last_log``/``_optim_count`` on the
class). Each run is a few hundred frames with tiny networks, enough for the optimizer to step.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium
import pytest
import torch
from hydra.utils import instantiate

import xdrl.run.lifecycle
from tests.conftest import CONF, compose_config, missing_extra, read_summary
from xdrl.config.check import check_config
from xdrl.config.errors import ConfigError

DISCRETE_ALGORITHMS = ["ppo", "a2c", "dqn"]
CONTINUOUS_ALGORITHMS = ["ppo", "a2c", "sac", "td3"]
CONTINUOUS_ENVS = {
    "pendulum",
    "mountaincar_continuous",
    "lunarlander_continuous",
    "halfcheetah",
    "hopper",
    "walker2d",
    "mo_mountaincarcontinuous",
    "mo_halfcheetah",
}
GENERIC_ENVS = {"gym", "mo_gym"}
ENVS = sorted(p.stem for p in (CONF / "env").glob("*.yaml") if p.stem not in GENERIC_ENVS)
ALGORITHMS = sorted(p.stem for p in (CONF / "algorithm").glob("*.yaml"))

TOTAL_FRAMES = 256
TINY = [
    "logging=none",
    "checkpoint=none",
    f"total_frames={TOTAL_FRAMES}",
    "frames_per_batch=64",
    "env.num_envs=2",
    "eval.episodes=1",
    "eval.max_steps=20",
    "eval.interval_frames=256",
    "eval.before_training=false",
]
# Per algorithm: tiny networks, small minibatches and warm-up, so every run takes optimizer steps.
ALGORITHM_OVERRIDES = {
    "ppo": [
        "algorithm.build.actor_cells=[16]",
        "algorithm.build.critic_cells=[16]",
        "algorithm.build.epochs=1",
        "algorithm.build.minibatch_size=32",
    ],
    "a2c": ["algorithm.build.actor_cells=[16]", "algorithm.build.critic_cells=[16]"],
    "dqn": [
        "algorithm.build.q_cells=[16]",
        "algorithm.build.batch_size=16",
        "algorithm.build.init_random_frames=64",
        "algorithm.build.utd=0.0625",
        "algorithm.build.eps_annealing_frames=128",
    ],
    "sac": [
        "algorithm.build.actor_cells=[16]",
        "algorithm.build.critic_cells=[16]",
        "algorithm.build.batch_size=16",
        "algorithm.build.init_random_frames=64",
        "algorithm.build.utd=0.0625",
    ],
    "td3": [
        "algorithm.build.actor_cells=[16]",
        "algorithm.build.critic_cells=[16]",
        "algorithm.build.batch_size=16",
        "algorithm.build.init_random_frames=64",
        "algorithm.build.utd=0.0625",
    ],
}


def _pairs(compatible: bool) -> list[tuple[str, str]]:
    out = []
    for env in ENVS:
        algorithms = CONTINUOUS_ALGORITHMS if env in CONTINUOUS_ENVS else DISCRETE_ALGORITHMS
        out += [(a, env) for a in ALGORITHMS if (a in algorithms) == compatible]
    return out


def _skip_if_missing(env_file: str) -> None:
    missing = missing_extra(env_file)
    if missing:
        pytest.skip(f"needs xdrl[{missing}]")


def test_every_algorithm_is_classified() -> None:
    assert set(ALGORITHMS) == set(DISCRETE_ALGORITHMS) | set(CONTINUOUS_ALGORITHMS)


def test_action_space_classification_matches_the_envs(tmp_path: Path) -> None:
    """CONTINUOUS_ENVS lists exactly the catalog envs with Box actions (new env files included)."""
    import mo_gymnasium  # noqa: F401  (registers the mo ids)

    from xdrl.envs.factory import register_ale

    if importlib.util.find_spec("ale_py") is not None:
        register_ale()  # the ALE ids of env=atari
    for env_file in ENVS:
        if missing_extra(env_file):
            continue
        env = gymnasium.make(compose_config([f"env={env_file}"], tmp_path).env.id)
        continuous = isinstance(env.action_space, gymnasium.spaces.Box)
        env.close()
        assert continuous == (env_file in CONTINUOUS_ENVS), env_file


@pytest.mark.parametrize(("algorithm", "env_file"), _pairs(compatible=True))
def test_algorithm_trains_on_env(
    algorithm: str, env_file: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _skip_if_missing(env_file)
    runs = []
    build_trainer = xdrl.run.lifecycle.build_trainer

    def recording_build(cfg, **kwargs):
        run_ = build_trainer(cfg, **kwargs)
        params = [p.detach().clone() for p in run_.trainer.loss_module.parameters()]
        runs.append((run_, params))
        return run_

    monkeypatch.setattr(xdrl.run.lifecycle, "build_trainer", recording_build)
    run_dir = tmp_path / "run"
    cfg = compose_config(
        [f"algorithm={algorithm}", f"env={env_file}", *TINY, *ALGORITHM_OVERRIDES[algorithm]],
        run_dir,
    )
    xdrl.run.lifecycle.run(cfg)

    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["total_frames"] == TOTAL_FRAMES
    assert "eval/deterministic/reward/episode_reward_mean" in summary["eval"]
    ((run_, before),) = runs
    after = list(run_.trainer.loss_module.parameters())
    assert any(not torch.equal(b, a.detach()) for b, a in zip(before, after, strict=True)), (
        "the optimizer never stepped"
    )


@pytest.mark.parametrize(("algorithm", "env_file"), _pairs(compatible=False))
def test_incompatible_pair_fails_fast_naming_the_action_space(
    algorithm: str, env_file: str, tmp_path: Path
) -> None:
    _skip_if_missing(env_file)
    overrides = [
        f"algorithm={algorithm}",
        f"env={env_file}",
        *TINY,
        *ALGORITHM_OVERRIDES[algorithm],
    ]
    cfg = compose_config(overrides, tmp_path / "run")
    with pytest.raises(ConfigError) as info:
        xdrl.run.lifecycle.run(cfg)
    assert info.value.key == "algorithm"
    needed = "continuous (Box)" if env_file not in CONTINUOUS_ENVS else "discrete"
    if env_file == "atari":  # images: the pre-check stops at the missing image encoder first
        assert f"{algorithm} has no image encoder" in str(info.value)
    else:
        assert f"{algorithm} needs a {needed} action space" in str(info.value)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ("[0.5,0.3,0.2]", "has 2 objectives but 3 weights"),
        ("[0.5]", "has 2 objectives but 1 weights"),
        ("[nan,1.0]", "finite"),
        ("[-1.0,0.5]", "positive sum"),
        ("[0.0,0.0]", "positive sum"),
    ],
)
def test_bad_reward_weights_fail_with_one_line(weights: str, message: str, tmp_path: Path) -> None:
    cfg = compose_config(["env=deep_sea_treasure", f"env.reward_weights={weights}"], tmp_path)
    with pytest.raises(ConfigError) as info:
        check_config(cfg)  # the env factory trusts what the check passed
    assert info.value.key == "env.reward_weights"
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("env_file", "extra"),
    [("lunarlander", "box2d"), ("halfcheetah", "mujoco"), ("mo_lunar_lander", "box2d")],
)
def test_missing_optional_package_names_the_extra(
    env_file: str, extra: str, tmp_path: Path
) -> None:
    module = {"box2d": "Box2D", "mujoco": "mujoco"}[extra]
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed")
    cfg = compose_config([f"env={env_file}"], tmp_path)
    with pytest.raises(ConfigError) as info:
        instantiate(cfg.env)(num_envs=1, seed=0)
    assert f"pip install 'xdrl[{extra}]'" in str(info.value)
    assert "\n" not in str(info.value)


def test_whole_batch_minibatch_is_the_flattened_batch_and_matches_the_buffer() -> None:
    """minibatch_size == frames_per_batch: every epoch trains on the whole batch, and its loss
    and gradients equal those on TorchRL's buffer sample (a permutation of the same frames)."""
    from tensordict import TensorDict
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer

    from xdrl.algorithms.on_policy import WholeBatch, minibatch_buffer
    from xdrl.algorithms.ppo import build
    from xdrl.envs.factory import make_env

    whole = minibatch_buffer(12, 12, "algorithm.build.minibatch_size")
    assert isinstance(whole, WholeBatch)
    assert not isinstance(minibatch_buffer(12, 4, "k"), WholeBatch)
    batch = TensorDict({"x": torch.arange(12.0).reshape(3, 4)}, batch_size=[3, 4])
    assert whole.extend(batch) is batch
    assert whole.sample(batch)["x"].tolist() == list(range(12))  # flattened, in order

    torch.manual_seed(0)
    env = make_env("CartPole-v1", num_envs=2, batching="vector", seed=0)
    parts = build(env, frames_per_batch=64, minibatch_size=64)
    collector = Collector(env, parts.policy, frames_per_batch=64, total_frames=64)
    batch = next(iter(collector))
    collector.shutdown()
    loss = parts.loss_module
    with torch.no_grad():
        loss.value_estimator(batch)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(64), sampler=SamplerWithoutReplacement(), batch_size=64
    )
    buffer.extend(batch.reshape(-1))
    permuted = buffer.sample()
    assert permuted["observation"].tolist() != batch.reshape(-1)["observation"].tolist()
    whole = WholeBatch()
    whole.extend(batch)
    results = []
    for sample in (whole.sample(), permuted):
        loss.zero_grad()
        out = loss(sample.clone())
        sum(v for k, v in out.items() if k.startswith("loss_")).backward()
        grads = [p.grad.clone() for p in loss.parameters() if p.grad is not None]
        results.append((out.detach(), grads))
    (ours, our_grads), (theirs, their_grads) = results
    for key in ("loss_objective", "loss_critic"):
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-5, atol=1e-6)
    assert len(our_grads) == len(their_grads) > 0
    for mine, ref in zip(our_grads, their_grads, strict=True):
        torch.testing.assert_close(mine, ref, rtol=1e-4, atol=1e-6)
