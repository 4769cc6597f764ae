"""Memory (issue 36): masked observations, recurrent actors and critics
(``xdrl.algorithms.recurrent``).

Expected values come from outside the code under test: plain ``torch.nn.LSTM`` calls on each
episode's steps from a zero state, the values the collector computed step by step, the
unmasked env's observations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.collectors import Collector
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import LSTMModule, set_recurrent_mode

import xdrl.run.lifecycle
from tests.conftest import compose_config, read_summary
from xdrl.algorithms import ppo
from xdrl.algorithms.common import activation_class
from xdrl.algorithms.recurrent import (
    EnvRows,
    RecurrentGAE,
    recurrent_actor,
    state_keys,
    zero_at_starts,
)
from xdrl.config.errors import ConfigError
from xdrl.envs.factory import make_env
from xdrl.envs.masking import check_mask
from xdrl.policy.evaluate import evaluate
from xdrl.policy.export import ExportError, export_policy
from xdrl.policy.loading import load_run
from xdrl.training.build import add_recurrent_state
from xdrl.training.env_state import EnvState

# Masked observations


@pytest.mark.parametrize("batching", ["vector", "serial"])
def test_masked_entries_are_zero_and_the_others_unchanged(batching: str) -> None:
    plain = make_env("CartPole-v1", num_envs=2, batching=batching, seed=3)
    masked = make_env(
        "CartPole-v1", num_envs=2, batching=batching, seed=3, mask_observations=[3, 1]
    )
    seen, full = masked.reset(), plain.reset()
    for step in range(12):
        expected = full["observation"].clone()
        expected[..., [1, 3]] = 0
        torch.testing.assert_close(seen["observation"], expected, rtol=0, atol=0)
        assert full["observation"][..., [1, 3]].abs().sum() > 0  # the hidden entries move
        action = torch.tensor([step % 2, (step + 1) % 2])
        seen = masked.step(seen.set("action", action))["next"]
        full = plain.step(full.set("action", action))["next"]


def test_mask_index_out_of_range_names_the_observation_size() -> None:
    with pytest.raises(ConfigError, match="CartPole-v1 has 4 observation entries"):
        check_mask([1, 4], (4,), "CartPole-v1")
    assert check_mask([3, 1, 3], (4,), "CartPole-v1") == [1, 3]


# The cell: resets at episode starts, sequences equal steps


def _lstm_parts(actor) -> tuple[torch.nn.LSTM, torch.nn.Module]:
    cell = next(m for m in actor.modules() if isinstance(m, LSTMModule))
    head = next(m for m in actor.modules() if getattr(m, "in_keys", None) == ["actor_features"])
    return cell.lstm, head.module


def test_hidden_state_resets_at_episode_starts_on_a_hand_built_batch() -> None:
    torch.manual_seed(0)
    env = make_env("CartPole-v1", num_envs=2, seed=0)
    actor = recurrent_actor(env, [8], activation_class("tanh"), "cpu", cell="lstm", hidden=8)
    lstm, head = _lstm_parts(actor)
    steps = 6
    observation = torch.randn(2, steps, 4)
    is_init = torch.zeros(2, steps, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[1, 3] = True  # env 1's episode ends after step 2 and a new one starts at step 3

    # Step by step, as the collector runs it: the state is always carried, never cleared by hand
    state = {"actor_h": torch.randn(2, 1, 8), "actor_c": torch.randn(2, 1, 8)}  # stale
    rows = []
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        for t in range(steps):
            td = TensorDict(
                {"observation": observation[:, t], "is_init": is_init[:, t], **state}, [2]
            )
            out = actor(td)
            rows.append(out.exclude("next"))
            state = {key: out["next", key] for key in state}
    stepped = torch.stack(rows, 1)

    # Expected: each episode from a zero state through plain nn.LSTM, then the head
    embed = stepped["actor_embed"]
    expected = torch.empty(2, steps, 2)
    for env_index, starts in ((0, [0]), (1, [0, 3])):
        bounds = [*starts, steps]
        for start, end in zip(bounds[:-1], bounds[1:], strict=False):
            features, _ = lstm(embed[env_index : env_index + 1, start:end])
            expected[env_index, start:end] = head(features)[0]
    torch.testing.assert_close(stepped["logits"], expected)

    # In recurrent mode, from the states stored at each step (the loss's path; the stale state
    # stored at env 0's first step must not leak either)
    stored = stepped.select("observation", "is_init", "actor_h", "actor_c")
    assert stored["actor_h"][0, 0].abs().sum() > 0
    with set_recurrent_mode(True), set_exploration_type(ExplorationType.DETERMINISTIC):
        sequence = actor(zero_at_starts(stored, state_keys(actor)))
    torch.testing.assert_close(sequence["logits"], expected)


@pytest.fixture(scope="module")
def collected() -> tuple[Any, list[TensorDictBase]]:
    """A recurrent PPO's parts and two batches (4 envs x 48 steps) its collector gathered with
    TorchRL's ``Collector``, step by step, on masked CartPole."""
    num_envs, frames, batches = 4, 192, 2
    torch.manual_seed(1)
    env = make_env(
        "CartPole-v1", num_envs=num_envs, batching="vector", seed=1, mask_observations=[1, 3]
    )
    parts = ppo.build(
        env,
        frames_per_batch=frames,
        minibatch_size=frames,
        actor_cells=[16],
        critic_cells=[16],
        recurrent="lstm",
        recurrent_hidden=16,
        recurrent_critic=True,
    )
    add_recurrent_state(env, parts.policy)
    collector = Collector(
        env, parts.policy, frames_per_batch=frames, total_frames=frames * batches,
        exploration_type=ExplorationType.RANDOM,
    )  # fmt: skip
    data = [batch.clone() for batch in collector]
    collector.shutdown()
    return parts, data


def test_sequence_forward_equals_the_step_by_step_forward(collected) -> None:
    parts, (batch, _) = collected
    assert batch["is_init"][:, 1:].any(), "no episode started mid-row: the test would not bite"
    actor, critic = parts.loss_module.actor_network, parts.loss_module.critic_network
    with set_recurrent_mode(True), torch.no_grad():
        dist = actor.get_dist(batch.clone())
        log_prob = dist.log_prob(batch["action"])
        values = critic(batch.clone())["state_value"]
    torch.testing.assert_close(log_prob, batch["action_log_prob"], rtol=0, atol=1e-5)
    torch.testing.assert_close(values, batch["state_value"], rtol=0, atol=1e-5)


def test_recurrent_gae_values_follow_the_critic_state_across_batches(collected) -> None:
    parts, (first, second) = collected
    critic = parts.loss_module.critic_network
    gae = next(hook for _, hook in parts.hooks if isinstance(hook, RecurrentGAE))
    collected = first["state_value"].clone()
    out = gae(first.clone())
    torch.testing.assert_close(out["state_value"], collected, rtol=0, atol=1e-5)
    done = first["next", "done"].squeeze(-1)
    inside = ~done[:, :-1]  # the next value is the next step's where the episode goes on
    torch.testing.assert_close(
        out["next", "state_value"][:, :-1][inside], collected[:, 1:][inside], rtol=0, atol=1e-5
    )
    # a row's last next value: the collector's first value of the next batch, same episode
    goes_on = ~done[:, -1]
    assert goes_on.any()
    torch.testing.assert_close(
        out["next", "state_value"][goes_on, -1],
        second["state_value"][goes_on, 0],
        rtol=0,
        atol=1e-5,
    )
    # GAE on those values: the textbook recursion, by hand
    gamma, lmbda = 0.99, 0.95
    reward, next_value = out["next", "reward"], out["next", "state_value"]
    terminated = out["next", "terminated"].float()
    delta = reward + gamma * next_value * (1 - terminated) - collected
    advantage = torch.zeros_like(delta)
    running = torch.zeros_like(delta[:, 0])
    for t in reversed(range(delta.shape[1])):
        running = delta[:, t] + gamma * lmbda * (1 - done[:, t, None].float()) * running
        advantage[:, t] = running
    torch.testing.assert_close(out["advantage"], advantage, rtol=1e-4, atol=1e-4)
    assert critic is gae.critic


def test_minibatches_are_whole_env_rows_each_once_per_epoch() -> None:
    batch = TensorDict({"x": torch.arange(32).reshape(8, 4)}, [8, 4])
    rows = EnvRows(2)
    rows.extend(batch)
    for _epoch in range(2):
        seen = []
        for _ in range(4):
            sample = rows.sample()
            assert sample.batch_size == torch.Size([2, 4])
            for row in sample["x"]:
                assert row.tolist() == list(range(int(row[0]), int(row[0]) + 4))  # in time order
                seen.append(int(row[0]) // 4)
        assert sorted(seen) == list(range(8))
    assert EnvRows(8).extend(batch) is batch and EnvRows(8).sample is not None


# End to end, in process


@pytest.mark.parametrize(
    "overrides",
    [
        ["experiment=cartpole_novel_lstm"],
        [
            "algorithm=a2c",
            "env.mask_observations=[1,3]",
            "algorithm.build.recurrent=gru",
            "algorithm.build.minibatch_size=128",
            "frames_per_batch=256",
        ],
    ],
    ids=["ppo-lstm-preset", "a2c-gru"],
)
def test_recurrent_run_trains_and_evaluates(overrides: list[str], tmp_path: Path) -> None:
    small = [
        "total_frames=256",
        "env.num_envs=4",
        "eval.interval_frames=256",
        "eval.episodes=2",
        "eval.max_steps=20",
        "checkpoint.interval_frames=256",
        "eval.stochastic=true",
        "algorithm.build.epochs=2",
    ]
    cfg = compose_config([*overrides, *small], tmp_path / "run")
    xdrl.run.lifecycle.run(cfg)
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "completed"
    assert summary["total_frames"] == 256
    metrics = summary["eval"]
    for mode in ("deterministic", "stochastic"):
        assert metrics[f"eval/{mode}/reward/episode_reward_mean"] > 0

    # xdrl-eval's path plays it with the state carried; one-step calls and export refuse it
    policy = load_run(tmp_path / "run", "last", num_envs=3)
    try:
        record = evaluate(policy, max_steps=20)
        assert record["episodes"] == 3 and all(0 < n <= 20 for n in record["lengths"])
        with pytest.raises(ConfigError, match="recurrent"):
            policy(np.zeros(4, dtype=np.float32))
        with pytest.raises(ExportError, match="recurrent"):
            export_policy(policy, "onnx", tmp_path / "policy.onnx")
    finally:
        policy.close()
    assert not (tmp_path / "policy.onnx").exists()


# Resume mid-episode: the hidden states travel with the collector's episodes in progress


def _recurrent_collector(seed: int) -> tuple[Any, Any, Collector]:
    env = make_env("CartPole-v1", num_envs=3, batching="vector", seed=seed)
    torch.manual_seed(0)
    actor = recurrent_actor(env, [8], activation_class("tanh"), "cpu", cell="gru", hidden=8)
    add_recurrent_state(env, actor)
    collector = Collector(
        env, actor, frames_per_batch=30, total_frames=300, track_traj_ids=False,
        exploration_type=ExplorationType.RANDOM,
    )  # fmt: skip
    return env, actor, collector


def test_resume_mid_episode_continues_with_the_saved_hidden_state() -> None:
    env, actor, collector = _recurrent_collector(seed=1)
    batches = iter(collector)
    for _ in range(2):  # 20 steps per sub-env: CartPole's first episodes are mid-way
        next(batches)
    saved = EnvState(env, collector).state_dict()
    rng = torch.get_rng_state()
    expected = next(batches)

    other_env, other_actor, other = _recurrent_collector(seed=99)
    other_actor.load_state_dict(actor.state_dict())
    state = EnvState(other_env, other)
    state.load_state_dict(saved)
    assert state.approximate is None and state.train_restored
    torch.set_rng_state(rng)
    got = next(iter(other))
    carried = ~got["is_init"][:, 0, 0]
    assert carried.any() and got["actor_h"][carried, 0].abs().sum() > 0  # a state, not zeros
    for key in expected.keys(True, True):
        assert torch.equal(got[key], expected[key]), key
    collector.shutdown()
    other.shutdown()
