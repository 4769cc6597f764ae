"""ReturnNormalization (``algorithm.build.normalize_rewards``) against the pooled variance of
every discounted return seen so far, its resume from a state dict, and its wiring into PPO."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from xdrl.algorithms import ppo
from xdrl.algorithms.reward_norm import TRAIN_REWARD_KEY, ReturnNormalization
from xdrl.envs.factory import make_env

GAMMA = 0.9


def _batch(rewards: list[list[float]], ends: set[tuple[int, int]]) -> TensorDict:
    """A ``[envs, steps]`` batch with these rewards; ``ends``: (env, step) where episodes end."""
    reward = torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
    done = torch.zeros_like(reward, dtype=torch.bool)
    for env, step in ends:
        done[env, step] = True
    return TensorDict({"next": {"reward": reward, "done": done}}, batch_size=reward.shape[:2])


REWARDS = [[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.5, -2.0, 3.0, 0.0, 1.5, 2.0]]
ENDS = {(0, 1), (1, 3)}


def _expected(rewards: list[list[float]], ends: set[tuple[int, int]]) -> list[list[float]]:
    """Each reward over the std of the pool {a prior of weight 1e-4, mean 0, variance 1} and
    every return up to its step (all envs), written out with sums rather than running updates."""
    envs, steps = len(rewards), len(rewards[0])
    running, pool = [0.0] * envs, []
    out = [[0.0] * steps for _ in range(envs)]
    for t in range(steps):
        running = [GAMMA * running[e] + rewards[e][t] for e in range(envs)]
        pool += running
        weight = 1e-4 + len(pool)
        mean = sum(pool) / weight
        second = (1e-4 * 1.0 + sum(x * x for x in pool)) / weight
        std = math.sqrt(second - mean * mean + 1e-8)
        for e in range(envs):
            out[e][t] = max(-10.0, min(10.0, rewards[e][t] / std))
        running = [0.0 if (e, t) in ends else running[e] for e in range(envs)]
    return out


def test_divides_by_the_std_of_every_discounted_return_so_far() -> None:
    batch = ReturnNormalization(GAMMA)(_batch(REWARDS, ENDS))
    got = batch["next", TRAIN_REWARD_KEY].squeeze(-1)
    assert torch.allclose(got, torch.tensor(_expected(REWARDS, ENDS)), rtol=1e-5, atol=1e-6)
    assert (got[0] > 0).all()  # a constant reward stays positive (VecNormV2 would centre it)
    assert torch.equal(batch["next", "reward"].squeeze(-1), torch.tensor(REWARDS))  # env units


def test_a_normalizer_loaded_from_a_state_dict_continues_the_same_way() -> None:
    whole = ReturnNormalization(GAMMA)(_batch(REWARDS, ENDS))["next", TRAIN_REWARD_KEY]
    first = ReturnNormalization(GAMMA)
    earlier = {(env, step) for env, step in ENDS if step < 3}
    head = first(_batch([row[:3] for row in REWARDS], earlier))["next", TRAIN_REWARD_KEY]
    second = ReturnNormalization(GAMMA)
    second.load_state_dict(first.state_dict())
    later = {(env, step - 3) for env, step in ENDS if step >= 3}
    tail = second(_batch([row[3:] for row in REWARDS], later))["next", TRAIN_REWARD_KEY]
    assert torch.allclose(torch.cat([head, tail], dim=1), whole, rtol=0, atol=0)


def test_ppo_learns_from_the_normalized_reward_and_checkpoints_it() -> None:
    env = make_env("CartPole-v1", num_envs=2, batching="vector", seed=0)
    parts = ppo.build(env, frames_per_batch=64, minibatch_size=64, normalize_rewards=True)
    (hook,) = [h for _, h in parts.hooks if isinstance(h, ReturnNormalization)]
    assert parts.modules["reward_normalizer"] is hook
    assert parts.loss_module.value_estimator.tensor_keys.reward == TRAIN_REWARD_KEY
    plain = ppo.build(env, frames_per_batch=64, minibatch_size=64)
    assert "reward_normalizer" not in plain.modules
    assert plain.loss_module.value_estimator.tensor_keys.reward == "reward"
    env.close()
