"""ObservationNormStep and VectorCollector with observation normalization against TorchRL's
VecNormV2 and Collector: the same statistics, normalized observations and batches, bit for bit,
and a checkpoint of TorchRL's Collector continued by the lean one."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.envs import VecNormV2
from torchrl.envs.utils import ExplorationType, set_exploration_type

from xdrl.algorithms.ppo import build
from xdrl.envs.factory import make_env
from xdrl.lean.collector import VectorCollector, VectorEnv, fast_rollouts, fits
from xdrl.lean.vecnorm import ObservationNormStep
from xdrl.training.env_state import EnvState

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _norm(env) -> VecNormV2:
    return env.transform[-1]


def _stats(norm: VecNormV2) -> list[torch.Tensor]:
    return [norm._loc["observation"], norm._var["observation"], norm._count["observation"]]


# the lean actors' own outputs differ from TorchRL's in the last bits (tests/test_collector.py)
POLICY_OUTPUTS = {"action_log_prob", "logits", "loc", "scale"}


def _assert_same(ours, theirs) -> None:
    """Env outputs (normalized observations included) bit for bit, policy outputs as
    ``test_same_batches_as_torchrl_collector`` compares them."""
    assert ours.batch_size == theirs.batch_size
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        a, b = ours.get(key), theirs.get(key)
        assert a.dtype == b.dtype, key
        if key in POLICY_OUTPUTS:
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=str(key))
        else:
            assert torch.equal(a, b), key


@pytest.mark.parametrize("num_envs", [1, 3])
@pytest.mark.parametrize("frozen", [False, True])
def test_same_statistics_and_outputs_as_vecnormv2(num_envs: int, frozen: bool) -> None:
    env = make_env("CartPole-v1", num_envs=num_envs, batching="vector", normalize_observations=True)
    theirs = _norm(env)
    env.reset()  # statistics not at zero, so a frozen one normalizes with something
    ours = copy.deepcopy(theirs)
    if frozen:
        theirs.freeze()
        ours.freeze()
    step = ObservationNormStep(ours)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        x = torch.randn(num_envs, 4, generator=generator) * 3 + 1
        td = TensorDict({"observation": x.clone()}, batch_size=[num_envs])
        expected = theirs._step(td, td)["observation"]
        assert torch.equal(step(x.clone()), expected)
        for a, b in zip(_stats(ours), _stats(theirs), strict=True):
            assert torch.equal(a, b)
    assert int(_stats(theirs)[2]) == (num_envs if frozen else 201 * num_envs)


def _normalized_run(collector_cls, env_id: str, num_envs: int, batches: int = 3):
    torch.manual_seed(0)
    env = make_env(
        env_id, num_envs=num_envs, batching="vector", seed=3, normalize_observations=True
    )
    torch.manual_seed(1)
    policy = build(env, frames_per_batch=num_envs * 16, minibatch_size=num_envs * 16).policy
    budget = {"frames_per_batch": num_envs * 16, "total_frames": num_envs * 16 * batches}
    if collector_cls is Collector:
        collector = Collector(
            env, policy, exploration_type=ExplorationType.RANDOM, track_traj_ids=False, **budget
        )
    else:
        collector = collector_cls(env, policy, **budget)
    built = [s.clone() for s in _stats(_norm(env))]  # what an evaluation before training reads
    torch.manual_seed(2)
    out = [batch.clone() for batch in collector]
    return out, built, [s.clone() for s in _stats(_norm(env))], collector.state_dict()


@pytest.mark.parametrize(("env_id", "num_envs"), [("CartPole-v1", 3), ("Pendulum-v1", 1)])
def test_same_batches_and_statistics_as_torchrl_collector(env_id: str, num_envs: int) -> None:
    env = make_env(env_id, num_envs=num_envs, batching="vector", normalize_observations=True)
    policy = build(env, frames_per_batch=16, minibatch_size=16).policy
    assert not fits(env, policy) and fits(env, policy, normalize=True)
    ours = _normalized_run(VectorCollector, env_id, num_envs)
    theirs = _normalized_run(Collector, env_id, num_envs)
    for mine, ref in zip(ours[0], theirs[0], strict=True):
        _assert_same(mine, ref)
    for stats in (1, 2):  # after construction, after the last batch
        for a, b in zip(ours[stats], theirs[stats], strict=True):
            assert torch.equal(a, b)
    assert ours[3]["env_state_dict"].keys() == theirs[3]["env_state_dict"].keys()
    if env_id == "CartPole-v1":  # some sub-envs reset while others ran on: partial resets
        assert any(bool(b["next", "done"].any()) for b in theirs[0])
        assert any(not bool(b["next", "done"].all()) for b in theirs[0])


@pytest.mark.parametrize("writer", [Collector, VectorCollector], ids=["torchrl", "lean"])
def test_continues_a_checkpoint_of_torchrls_collector(writer) -> None:
    """A run collected by TorchRL's Collector (as normalized envs were before) or by the lean one,
    resumed on the lean collector, gives the batch the writer would have given next, and the
    same statistics."""
    budget = {"frames_per_batch": 48, "total_frames": 48 * 4}

    def fresh():
        torch.manual_seed(0)
        env = make_env("CartPole-v1", num_envs=3, batching="vector", normalize_observations=True)
        env.set_seed(3)
        torch.manual_seed(1)
        return env, build(env, frames_per_batch=48, minibatch_size=48).policy

    env, policy = fresh()
    if writer is Collector:
        theirs = Collector(
            env, policy, exploration_type=ExplorationType.RANDOM, track_traj_ids=False, **budget
        )
    else:
        theirs = VectorCollector(env, policy, **budget)
    batches = iter(theirs)
    next(batches)
    saved_env = EnvState(env, theirs).state_dict()
    saved_collector = copy.deepcopy(theirs.state_dict())  # as written to disk, not the live stats
    rng = torch.get_rng_state()
    expected = next(batches).clone()

    env2, policy2 = fresh()
    ours = VectorCollector(env2, policy2, **budget)
    EnvState(env2, ours).load_state_dict(saved_env)
    ours.load_state_dict(saved_collector)
    torch.set_rng_state(rng)
    _assert_same(next(iter(ours)), expected)
    for a, b in zip(_stats(_norm(env2)), _stats(_norm(env)), strict=True):
        assert torch.equal(a, b)


def test_evaluation_rollout_with_frozen_norm_matches_torchrl(monkeypatch) -> None:
    lean_rollouts = []
    first_episodes = VectorCollector.first_episodes

    def counted(self, *args, **kwargs):
        lean_rollouts.append(1)
        return first_episodes(self, *args, **kwargs)

    monkeypatch.setattr(VectorCollector, "first_episodes", counted)
    results = []
    for fast in (True, False):
        env = make_env(
            "CartPole-v1", num_envs=6, batching="vector", seed=5, normalize_observations=True
        )
        torch.manual_seed(0)
        env.rollout(30)  # learn some statistics, then freeze them as evaluation envs are
        _norm(env).freeze()
        env = fast_rollouts(env)
        assert isinstance(env, VectorEnv)
        torch.manual_seed(1)
        policy = build(env, frames_per_batch=16, minibatch_size=16).policy
        assert fits(env, policy, normalize=True)
        torch.manual_seed(2)
        rollout = env.rollout if fast else super(VectorEnv, env).rollout
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results.append(
                    rollout(
                        200,
                        policy=policy,
                        auto_reset=False,
                        tensordict=env.reset(),
                        break_when_any_done=False,
                        break_when_all_done=True,
                    )
                )
        env.close()
    assert len(lean_rollouts) == 1  # the fast path ran (and only for the fast rollout)
    _assert_same(*results)
