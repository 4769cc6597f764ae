"""DQN's options for a tabular-exact learner: a linear Q-network without bias, optimistic
initialization of the Q-values (a number, or ``auto`` from a stated return bound), the sum
reduction of SGD's tabular step size, and a replay buffer that keeps every frame."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from xdrl.algorithms.dqn import build
from xdrl.config.errors import ConfigError
from xdrl.envs.factory import make_env


def _q_values(parts, observations: torch.Tensor) -> torch.Tensor:
    td = TensorDict({"observation": observations}, batch_size=[len(observations)])
    return parts.eval_policy(td)["action_value"].detach()


def _linears(parts) -> list[nn.Linear]:
    return [m for m in parts.eval_policy.modules() if isinstance(m, nn.Linear)]


def test_a_number_sets_every_q_value_of_an_mlp() -> None:
    env = make_env("CartPole-v1", num_envs=2, seed=0)
    parts = build(env, frames_per_batch=64, q_cells=[16, 16], q_init=7.5)
    obs = torch.randn(32, 4) * 3
    assert torch.equal(_q_values(parts, obs), torch.full((32, 2), 7.5))
    env.close()


def test_auto_scalarizes_the_stated_bound_and_a_linear_table_holds_it_in_every_state() -> None:
    env = make_env(
        "deep-sea-treasure-v0",
        num_envs=2,
        reward_weights=[0.6, 0.4],
        observation_encoding="one_hot",
        seed=0,
    )
    parts = build(
        env,
        frames_per_batch=64,
        q_cells=[],
        q_bias=False,
        q_init="auto",
        q_init_bound=[23.7, -1.0],
    )
    (layer,) = _linears(parts)
    assert layer.bias is None and layer.weight.shape == (4, 144)  # a table: 4 actions x 144 cells
    every_state = torch.eye(144)
    expected = 0.6 * 23.7 + 0.4 * -1.0  # 13.82: the deepest treasure reached in one step
    assert torch.allclose(_q_values(parts, every_state), torch.full((144, 4), expected))
    env.close()


def test_bad_q_init_settings_name_their_key() -> None:
    env = make_env("deep-sea-treasure-v0", num_envs=2, seed=0)
    with pytest.raises(ConfigError, match="q_init_bound: q_init: auto needs an upper bound of"):
        build(env, frames_per_batch=64, q_init="auto")
    with pytest.raises(ConfigError, match="q_init_bound: .* 2 objectives"):
        build(env, frames_per_batch=64, q_init="auto", q_init_bound=[1.0])
    with pytest.raises(ConfigError, match="q_init: needs q_bias: true unless"):
        build(env, frames_per_batch=64, q_cells=[8], q_bias=False, q_init=1.0)
    env.close()


def test_sum_reduction_moves_a_sampled_q_value_by_twice_lr_times_its_td_error() -> None:
    """Plain SGD on ``(Q - target)^2`` summed: each sampled transition's Q-value moves by
    ``2 * lr * (target - Q)``, the step size of a tabular learner (0.5 here: half way)."""
    env = make_env(
        "deep-sea-treasure-v0", num_envs=1, observation_encoding="one_hot", reward_weights=[1, 0]
    )
    parts = build(
        env,
        frames_per_batch=8,
        q_cells=[],
        q_bias=False,
        q_init=10.0,
        gamma=1.0,
        loss_reduction="sum",
    )
    s, s2 = torch.eye(144)[0], torch.eye(144)[12]
    batch = TensorDict(
        {
            "observation": torch.stack([s, s2]),
            "action": torch.tensor([1, 3]),
            "next": {
                "observation": torch.stack([s2, s2]),
                "reward": torch.tensor([[0.7], [2.0]]),  # scalarized: weights [1, 0]
                "done": torch.tensor([[True], [False]]),
                "terminated": torch.tensor([[True], [False]]),
            },
        },
        batch_size=[2],
    )
    optimizer = torch.optim.SGD(parts.loss_module.parameters(), lr=0.25)
    loss = parts.loss_module(batch)["loss"]
    # (10 - 0.7)^2 (terminal) + (10 - (2 + 10))^2 (bootstrapped on the target network)
    assert float(loss.detach()) == pytest.approx(9.3**2 + 2.0**2, rel=1e-5)
    loss.backward()
    optimizer.step()
    q = _q_values(parts, torch.stack([s, s2]))
    assert float(q[0, 1]) == pytest.approx(10 - 0.5 * 9.3)
    assert float(q[1, 3]) == pytest.approx(10 + 0.5 * 2.0)
    assert float(q[0, 0]) == 10.0  # untouched cells keep their start value
    env.close()


def test_buffer_all_keeps_every_agent_step_of_the_run() -> None:
    env = make_env("CartPole-v1", num_envs=2, seed=0)
    parts = build(env, frames_per_batch=64, total_frames=3_000, buffer_size="all")
    assert parts.modules["replay_buffer"].replay_buffer.storage.max_size == 3_000
    skipped = build(env, frames_per_batch=64, total_frames=3_000, frame_skip=4, buffer_size="all")
    assert skipped.modules["replay_buffer"].replay_buffer.storage.max_size == 750  # 3000 / 4
    with pytest.raises(ConfigError, match="buffer_size: all needs total_frames"):
        build(env, frames_per_batch=64, buffer_size="all")
    env.close()


@pytest.mark.parametrize(("eval_epsilon", "rate"), [(0.3, 0.2), (0.0, 0.0)])
def test_evaluation_policy_is_greedy_deterministic_and_epsilon_greedy_random(
    eval_epsilon: float, rate: float
) -> None:
    """Acrobot (3 actions): under random exploration an action differs from the greedy one at
    ``eval_epsilon * (1 - 1/3)`` (a random action is the greedy one a third of the time); 30,000
    draws give a standard error of 0.0023 at 0.2, so +/- 0.015 never fails by chance. Under
    deterministic exploration (and with epsilon 0) it never differs."""
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    env = make_env("Acrobot-v1", num_envs=2, seed=0)
    parts = build(env, frames_per_batch=64, eval_epsilon=eval_epsilon)
    env.close()
    torch.manual_seed(0)
    td = TensorDict({"observation": torch.randn(30_000, 6)}, batch_size=[30_000])
    for exploration, expected in [
        (ExplorationType.RANDOM, rate),
        (ExplorationType.DETERMINISTIC, 0),
    ]:
        with set_exploration_type(exploration):
            out = parts.eval_policy(td.clone())
        greedy = out["action_value"].argmax(-1)
        differs = float((out["action"] != greedy).float().mean())
        assert differs == 0 if expected == 0 else abs(differs - expected) < 0.015
