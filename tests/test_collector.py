"""VectorCollector against TorchRL's Collector: same keys, shapes and values for the same seed."""

from __future__ import annotations

import pytest
import torch
from torchrl.collectors import Collector
from torchrl.envs import StepCounter
from torchrl.envs.utils import ExplorationType, set_exploration_type

from xdrl.algorithms import dqn, sac, td3
from xdrl.algorithms.ppo import build
from xdrl.envs.factory import make_env
from xdrl.lean.collector import VectorCollector, VectorEnv, fast_rollouts, fits


def _batches(
    collector_cls,
    env_id: str,
    num_envs: int,
    weights=None,
    batches: int = 3,
    builder=build,
    random_frames: int = 0,
):
    torch.manual_seed(0)
    env = make_env(env_id, num_envs=num_envs, batching="vector", seed=3, reward_weights=weights)
    torch.manual_seed(1)
    kwargs = {"minibatch_size": num_envs * 16} if builder is build else {}
    policy = builder(env, frames_per_batch=num_envs * 16, **kwargs).policy
    kwargs = {
        "frames_per_batch": num_envs * 16,
        "total_frames": num_envs * 16 * batches,
        "init_random_frames": random_frames,
    }
    if collector_cls is Collector:
        collector = Collector(
            env, policy, exploration_type=ExplorationType.RANDOM, track_traj_ids=False, **kwargs
        )
    else:
        collector = collector_cls(env, policy, **kwargs)
    # seeded after construction: TorchRL's Collector runs exploration modules once to learn
    # their outputs (a dry run that draws random numbers)
    torch.manual_seed(2)
    out = [batch.clone() for batch in collector]
    collector.shutdown()
    return out


@pytest.mark.parametrize(
    ("env_id", "num_envs", "weights", "builder"),
    [
        ("CartPole-v1", 8, None, build),
        ("deep-sea-treasure-v0", 4, [0.7, 0.3], build),
        ("Pendulum-v1", 4, None, build),  # tanh-normal actor through its TensorDict forward
        ("CartPole-v1", 4, None, dqn.build),  # Q-value actor + annealed epsilon-greedy
        ("Pendulum-v1", 2, None, td3.build),  # deterministic actor + Gaussian noise
        ("Pendulum-v1", 2, None, sac.build),
    ],
)
@pytest.mark.parametrize("random_frames", [0, 40])  # 40: the first two batches act at random
def test_same_batches_as_torchrl_collector(
    env_id: str, num_envs: int, weights, builder, random_frames: int
) -> None:
    if random_frames and builder is build:
        pytest.skip("on-policy algorithms take no random warm-up frames")
    args = (env_id, num_envs, weights)
    ours = _batches(VectorCollector, *args, builder=builder, random_frames=random_frames)
    theirs = _batches(Collector, *args, builder=builder, random_frames=random_frames)
    assert len(ours) == len(theirs) == 3
    for mine, ref in zip(ours, theirs, strict=True):
        assert mine.batch_size == ref.batch_size
        assert set(mine.keys(True, True)) == set(ref.keys(True, True))
        for key in ref.keys(True, True):
            a, b = mine.get(key), ref.get(key)
            assert a.shape == b.shape and a.dtype == b.dtype, key
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=str(key))
    if env_id != "Pendulum-v1":  # episodes ended inside the batches: resets were exercised
        assert any(bool(b["next", "done"].any()) for b in theirs)


def test_fits_only_the_folded_transforms() -> None:
    env = make_env("CartPole-v1", num_envs=2, batching="vector", seed=0)
    policy = build(env, frames_per_batch=8, minibatch_size=8).policy
    assert fits(env, policy)
    assert not fits(env, policy.module)  # a plain torch module, not a TensorDict module
    capped = make_env("CartPole-v1", num_envs=2, batching="vector", seed=0)
    capped.append_transform(StepCounter(max_steps=5))  # truncation is not folded in
    assert not fits(capped, policy)
    normed = make_env("CartPole-v1", num_envs=2, batching="vector", normalize_observations=True)
    assert not fits(normed, policy)
    serial = make_env("CartPole-v1", num_envs=2, batching="serial")
    assert not fits(serial, policy)


@pytest.mark.parametrize(
    ("env_id", "builder", "exploration"),
    [
        ("CartPole-v1", build, ExplorationType.DETERMINISTIC),
        ("CartPole-v1", build, ExplorationType.RANDOM),
        ("deep-sea-treasure-v0", build, ExplorationType.DETERMINISTIC),
        ("Pendulum-v1", sac.build, ExplorationType.DETERMINISTIC),
    ],
)
def test_evaluation_rollout_matches_torchrl(env_id: str, builder, exploration) -> None:
    """VectorEnv.rollout as the evaluation hook calls it == TransformedEnv.rollout."""
    kwargs = {"minibatch_size": 16} if builder is build else {}
    results = []
    for fast in (True, False):
        env = fast_rollouts(
            make_env(env_id, num_envs=6, batching="vector", seed=5, max_episode_steps=60)
        )
        assert isinstance(env, VectorEnv)
        torch.manual_seed(1)
        policy = builder(env, frames_per_batch=16, **kwargs).policy
        torch.manual_seed(2)
        rollout = env.rollout if fast else super(VectorEnv, env).rollout
        with torch.no_grad(), set_exploration_type(exploration):
            results.append(
                rollout(
                    80,
                    policy=policy,
                    auto_reset=False,
                    tensordict=env.reset(),
                    break_when_any_done=False,
                    break_when_all_done=True,
                )
            )
        env.close()
    ours, theirs = results
    assert ours.batch_size == theirs.batch_size
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        torch.testing.assert_close(ours.get(key), theirs.get(key), rtol=0, atol=1e-6, msg=str(key))
    done = theirs["next", "done"].squeeze(-1)
    assert done[:, -1].all() or theirs.shape[-1] == 80
    if env_id == "CartPole-v1":  # sub-envs ended at different steps: frozen rows exercised
        assert len(set(done.float().argmax(1).tolist())) > 1


@pytest.mark.parametrize(
    ("env_id", "builder"),
    [
        ("CartPole-v1", build),
        ("Pendulum-v1", sac.build),
        ("Pendulum-v1", td3.build),
        ("CartPole-v1", dqn.build),
    ],
)
def test_tensor_path_replaces_the_tensordict_forward(env_id: str, builder, monkeypatch) -> None:
    """The parity test above holds either way; this one shows the fast path really ran."""
    env = make_env(env_id, num_envs=2, batching="vector", seed=0)
    kwargs = {"minibatch_size": 8} if builder is build else {}
    policy = builder(env, frames_per_batch=8, **kwargs).policy

    def refuse(*args, **kwargs):
        raise AssertionError("the TensorDict forward ran")

    monkeypatch.setattr(type(policy), "forward", refuse)
    batch = next(iter(VectorCollector(env, policy, frames_per_batch=8, total_frames=8)))
    assert batch["action"].shape[:2] == (2, 4)


@pytest.mark.parametrize("rows", [1, 8, 64])
def test_categorical_draws_are_multinomials(rows: int) -> None:
    """``CategoricalActor.sample`` draws what ``Categorical(logits).sample()`` draws from the
    same RNG state, and leaves the RNG where it leaves it."""
    env = make_env("CartPole-v1", num_envs=1, batching="vector", seed=0)
    actor = build(env, frames_per_batch=8, minibatch_size=8).policy
    observation = torch.randn(200, rows, 4) * 3
    torch.manual_seed(5)
    ours = torch.stack([actor.sample(obs)[0] for obs in observation])
    after_ours = torch.get_rng_state()
    torch.manual_seed(5)
    with torch.no_grad():
        theirs = torch.stack(
            [
                torch.distributions.Categorical(logits=actor.logits_net(o)).sample()
                for o in observation
            ]
        )
    assert torch.equal(ours, theirs) and torch.equal(after_ours, torch.get_rng_state())
    assert 0 < ours.float().mean() < 1  # both actions drawn


def test_a_diverged_policy_stops_the_collection() -> None:
    """NaN weights: the batch is refused (``torch.multinomial`` refuses NaN in TorchRL's path)."""
    env = make_env("CartPole-v1", num_envs=2, batching="vector", seed=0)
    policy = build(env, frames_per_batch=8, minibatch_size=8).policy
    with torch.no_grad():
        next(policy.parameters()).fill_(float("nan"))
    with pytest.raises(RuntimeError, match="holds NaN"):
        next(iter(VectorCollector(env, policy, frames_per_batch=8, total_frames=8)))
