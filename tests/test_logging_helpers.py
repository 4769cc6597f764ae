"""Unit tests of the tensor helpers behind the xdrl logging hooks (hand-computed values)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from xdrl.trainer_hooks.logging import (
    _as_float,
    _collector_mask,
    _min_mean_max,
    _prepare_episode_reward,
    _scalarize_last_dim,
    _summarize_metric,
)


def test_as_float_returns_python_float():
    value = _as_float(torch.tensor([2.5]))
    assert value == 2.5 and type(value) is float
    assert _as_float(torch.tensor(3, dtype=torch.int64)) == 3.0
    assert _as_float(torch.tensor(1.5, requires_grad=True)) == 1.5


def test_min_mean_max():
    out = _min_mean_max("x", torch.tensor([[1.0, 2.0], [6.0, 3.0]]))
    assert out == {"x_min": 1.0, "x_mean": 3.0, "x_max": 6.0}
    assert all(type(v) is float for v in out.values())
    assert _min_mean_max("x", torch.tensor([1, 2], dtype=torch.int32))["x_mean"] == 1.5
    assert _min_mean_max("x", torch.zeros(0)) == {}


def test_summarize_metric_one_element_keeps_the_name():
    assert _summarize_metric("train/loss", torch.tensor([0.25])) == {"train/loss": 0.25}
    assert _summarize_metric("train/loss", torch.tensor(0.25), reduce_stats=False) == {
        "train/loss": 0.25
    }


@pytest.mark.parametrize("reduce_stats", [None, True])
def test_summarize_metric_vector_min_mean_max(reduce_stats):
    out = _summarize_metric("e", torch.tensor([1.0, 2.0, 6.0]), reduce_stats=reduce_stats)
    assert out == {"e_min": 1.0, "e_mean": 3.0, "e_max": 6.0}


def test_summarize_metric_vector_mean_only():
    assert _summarize_metric("e", torch.tensor([1.0, 2.0, 6.0]), reduce_stats=False) == {
        "e_mean": 3.0
    }


def test_collector_mask():
    batch = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    assert _collector_mask(batch) is None
    mask = torch.tensor([[True, True, False], [True, False, False]])
    batch["collector", "mask"] = mask
    assert torch.equal(_collector_mask(batch), mask)


def test_scalarize_last_dim():
    value = torch.tensor([[2.0, 4.0], [1.0, 1.0]])
    assert _scalarize_last_dim(value, None) is value
    torch.testing.assert_close(_scalarize_last_dim(value, (1.0, 0.5)), torch.tensor([4.0, 1.5]))
    torch.testing.assert_close(_scalarize_last_dim(value, [-1.0, 2.0]), torch.tensor([6.0, 1.0]))


def test_scalarize_last_dim_wrong_length_names_both_lengths():
    with pytest.raises(ValueError, match=r"3 reward weights.*2 entries"):
        _scalarize_last_dim(torch.ones(4, 2), (1.0, 1.0, 1.0))


def _two_envs_three_steps():
    # env 0 ends at t=1 (return [1, 2]) and t=2 (return [3, 0]); env 1 ends at t=2 ([5, 5]).
    value = torch.tensor(
        [
            [[0.0, 1.0], [1.0, 2.0], [3.0, 0.0]],
            [[1.0, 1.0], [2.0, 3.0], [5.0, 5.0]],
        ]
    )
    done = torch.tensor([[[False], [True], [True]], [[False], [False], [True]]])
    return value, done


def test_prepare_episode_reward_vector_without_weights():
    value, done = _two_envs_three_steps()
    out = _prepare_episode_reward(value, done, weights=None)
    torch.testing.assert_close(out, torch.tensor([[1.0, 2.0], [3.0, 0.0], [5.0, 5.0]]))


def test_prepare_episode_reward_vector_with_weights():
    value, done = _two_envs_three_steps()
    out = _prepare_episode_reward(value, done, weights=(1.0, 0.5))
    torch.testing.assert_close(out, torch.tensor([2.0, 3.0, 7.5]))


def test_prepare_episode_reward_scalar_and_flat_done():
    value, done = _two_envs_three_steps()
    scalar = value[..., :1]
    torch.testing.assert_close(
        _prepare_episode_reward(scalar, done, weights=None), torch.tensor([1.0, 3.0, 5.0])
    )
    torch.testing.assert_close(
        _prepare_episode_reward(value, done.squeeze(-1), weights=None)[:, 1],
        torch.tensor([2.0, 0.0, 5.0]),
    )


def test_prepare_episode_reward_none_ended():
    value, done = _two_envs_three_steps()
    assert _prepare_episode_reward(value, torch.zeros_like(done), weights=(1.0, 1.0)).numel() == 0


def test_prepare_episode_reward_wrong_weights():
    value, done = _two_envs_three_steps()
    with pytest.raises(ValueError, match=r"1 reward weights.*2 entries"):
        _prepare_episode_reward(value, done, weights=(1.0,))
