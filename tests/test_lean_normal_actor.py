"""NormalActor.act (the Gaussian PPO actor's tensor path) against its own ProbabilisticActor
forward, and the lean collector with it against TorchRL's Collector: bit for bit."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import ProbabilisticActor

from xdrl.algorithms.ppo import build
from xdrl.envs.factory import make_env
from xdrl.lean.collector import VectorCollector
from xdrl.lean.normal_actor import NormalActor

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _policy(env, frames: int = 32):
    torch.manual_seed(1)
    return build(
        env, frames_per_batch=frames, minibatch_size=frames, distribution="normal", log_std_init=-1
    ).policy


def test_act_draws_what_the_tensordict_forward_draws() -> None:
    env = make_env("Pendulum-v1", num_envs=3, batching="vector", seed=0)
    policy = _policy(env)
    assert isinstance(policy, NormalActor) and isinstance(policy, ProbabilisticActor)
    for seed in range(20):
        observation = torch.randn(3, 3) * 2
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            torch.manual_seed(seed)
            theirs = policy(TensorDict({"observation": observation}, batch_size=[3]))
            torch.manual_seed(seed)
            ours = policy.act(observation, explore=True)
        assert ours is not None
        assert set(ours) == set(theirs.keys()) - {"observation"}
        for key, value in ours.items():
            assert value.dtype == theirs[key].dtype and torch.equal(value, theirs[key]), key
    assert policy.act(observation, explore=False) is None  # deterministic: the forward


def _batches(collector_cls, frames: int = 32, batches: int = 3):
    torch.manual_seed(0)
    env = make_env(
        "Pendulum-v1", num_envs=2, batching="vector", seed=3, normalize_observations=True
    )
    policy = _policy(env, frames)
    budget = {"frames_per_batch": frames, "total_frames": frames * batches}
    if collector_cls is Collector:
        collector = Collector(
            env, policy, exploration_type=ExplorationType.RANDOM, track_traj_ids=False, **budget
        )
    else:
        collector = collector_cls(env, policy, **budget)
    torch.manual_seed(2)
    return [batch.clone() for batch in collector]


def test_lean_collector_with_the_gaussian_actor_matches_torchrl(monkeypatch) -> None:
    calls = []
    act = NormalActor.act

    def counted(self, *args, **kwargs):
        calls.append(1)
        return act(self, *args, **kwargs)

    monkeypatch.setattr(NormalActor, "act", counted)
    ours = _batches(VectorCollector)
    assert len(calls) == 3 * 16  # every step took the tensor path
    theirs = _batches(Collector)
    for mine, ref in zip(ours, theirs, strict=True):
        assert set(mine.keys(True, True)) == set(ref.keys(True, True))
        for key in ref.keys(True, True):
            assert torch.equal(mine.get(key), ref.get(key)), key
