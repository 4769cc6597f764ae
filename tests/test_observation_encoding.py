"""``env.observation_encoding=one_hot``: the joint one-hot of each discrete space kind, through
the vector and serial env paths, and a one-line error for a space it cannot encode."""

from __future__ import annotations

from typing import Any

import gymnasium
import mo_gymnasium
import numpy as np
import pytest
import torch

from xdrl.config.errors import ConfigError
from xdrl.envs.factory import check_env, make_env
from xdrl.envs.observation_encoding import MAX_ONE_HOT_CELLS, OneHotObservation, one_hot_size


class _Fixed(gymnasium.Env):
    """An env whose observations are given in advance (reset returns the first)."""

    def __init__(self, space: gymnasium.Space, observations: list[Any]) -> None:
        self.observation_space = space
        self.action_space = gymnasium.spaces.Discrete(2)
        self._obs = list(observations)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self._obs.pop(0), {}

    def step(self, action: int):
        return self._obs.pop(0), 0.0, False, False, {}


@pytest.mark.parametrize(
    ("space", "observations", "cells", "hot"),
    [
        # Discrete(5, start=2): value v sits at v - 2
        (gymnasium.spaces.Discrete(5, start=2), [2, 4, 6], 5, [0, 2, 4]),
        # MultiDiscrete([3, 4]): (a, b) at a * 4 + b
        (gymnasium.spaces.MultiDiscrete([3, 4]), [(0, 0), (2, 1), (1, 3)], 12, [0, 9, 7]),
        # integer Box of 2 values in [-1, 1] each: (x, y) at (x + 1) * 3 + (y + 1)
        (
            gymnasium.spaces.Box(-1, 1, (2,), dtype=np.int64),
            [np.array([-1, -1]), np.array([1, 0]), np.array([0, 1])],
            9,
            [0, 7, 5],
        ),
    ],
)
def test_each_space_kind_becomes_the_one_hot_of_its_joint_state(
    space: gymnasium.Space, observations: list[Any], cells: int, hot: list[int]
) -> None:
    env = OneHotObservation(_Fixed(space, observations))
    assert env.observation_space == gymnasium.spaces.Box(0.0, 1.0, (cells,), dtype=np.float32)
    seen = [env.reset(seed=0)[0], env.step(0)[0], env.step(0)[0]]
    for obs, index in zip(seen, hot, strict=True):
        expected = np.zeros(cells, dtype=np.float32)
        expected[index] = 1.0
        np.testing.assert_array_equal(obs, expected)


@pytest.mark.parametrize("batching", ["vector", "serial"])
def test_deep_sea_treasure_cells_are_row_times_12_plus_col(batching: str) -> None:
    actions = [1, 1, 3, 1, 3, 1]  # down, down, right, down, right, down (MO-Gymnasium's order)
    raw = mo_gymnasium.make("deep-sea-treasure-v0")
    cells = [tuple(raw.reset(seed=0)[0])]
    for action in actions:
        obs, _r, terminated, _t, _i = raw.step(action)
        cells.append(tuple(obs))
        if terminated:
            break
    env = make_env(
        "deep-sea-treasure-v0", num_envs=1, batching=batching, observation_encoding="one_hot"
    )
    td = env.reset()
    got = [int(td["observation"].reshape(-1).argmax())]
    assert env.observation_spec["observation"].shape[-1] == 144  # 12 x 12 values of (row, col)
    for action in actions[: len(cells) - 1]:
        td["action"] = torch.tensor([action]).reshape(env.action_spec.shape)
        td = env.step(td)["next"]
        assert float(td["observation"].sum()) == 1.0
        got.append(int(td["observation"].reshape(-1).argmax()))
    assert got == [row * 12 + col for row, col in cells]
    env.close(raise_if_closed=False)


def test_a_space_too_large_or_not_discrete_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match="needs 1,000,000 cells .* more than 65,536"):
        one_hot_size(gymnasium.spaces.MultiDiscrete([1000, 1000]))
    assert one_hot_size(gymnasium.spaces.Discrete(MAX_ONE_HOT_CELLS)) == MAX_ONE_HOT_CELLS
    with pytest.raises(ConfigError, match="needs a Discrete, MultiDiscrete or bounded integer"):
        one_hot_size(gymnasium.spaces.Box(0.0, 1.0, (2,)))
    with pytest.raises(ConfigError, match="env.observation_encoding: one_hot of Box"):
        check_env("CarRacing-v3", [], {}, None, "one_hot")  # 96 x 96 x 3 pixels of 256 values
    check_env("FrozenLake-v1", [], {}, None, "one_hot")  # Discrete(16): accepted
