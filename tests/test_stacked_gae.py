"""StackedValueGAE against TorchRL's ValueEstimatorHook on the same collected batches."""

from __future__ import annotations

import pytest
import torch
from torchrl.trainers import ValueEstimatorHook

from xdrl.algorithms import a2c, ppo
from xdrl.algorithms.on_policy import RewardScale, StackedValueGAE
from xdrl.collector import VectorCollector
from xdrl.envs import make_env

KEYS = ["state_value", ("next", "state_value"), "advantage", "value_target"]


def _hook_and_batch(env_id: str, builder, frames: int, **kwargs):
    torch.manual_seed(0)
    env = make_env(env_id, num_envs=4, batching="vector", seed=0)
    parts = builder.build(env, frames_per_batch=frames, **kwargs)
    (hook,) = [h for _, h in parts.hooks if isinstance(h, StackedValueGAE)]
    collector = VectorCollector(env, parts.policy, frames_per_batch=frames, total_frames=frames)
    batch = next(iter(collector))
    collector.shutdown()
    return hook, parts, batch


@pytest.mark.parametrize(
    ("env_id", "builder", "kwargs"),
    [
        ("CartPole-v1", ppo, {"minibatch_size": 64, "reward_scale": 0.1}),
        ("Pendulum-v1", ppo, {"minibatch_size": 64}),  # truncations at 200 steps
        ("CartPole-v1", a2c, {}),
    ],
)
def test_bit_for_bit_torchrls_value_estimator(env_id, builder, kwargs) -> None:
    frames = 1024 if env_id == "Pendulum-v1" else 512
    hook, parts, batch = _hook_and_batch(env_id, builder, frames, **kwargs)
    assert batch["next", "done"].any()  # episodes end inside the batch
    if env_id == "Pendulum-v1":
        assert batch["next", "truncated"].any() and not batch["next", "terminated"].any()
    for scale in [h for _, h in parts.hooks if isinstance(h, RewardScale)]:
        batch = scale(batch)  # the scaled reward the value targets read
    reference = batch.clone()
    ours = hook(batch)
    with torch.no_grad():
        theirs = ValueEstimatorHook(parts.loss_module.value_estimator)(reference)
    for key in KEYS:
        assert torch.equal(ours[key], theirs[key]), key
    assert ours["advantage"].abs().sum() > 0


def test_nan_next_observations_read_their_steps_observation() -> None:
    """As TorchRL's estimator does for a compact collector's missing final observations."""
    hook, parts, batch = _hook_and_batch("CartPole-v1", ppo, 256, minibatch_size=64)
    batch["next", "observation"][0, 3] = float("nan")
    reference = batch.clone()
    ours = hook(batch)
    with torch.no_grad():
        theirs = ValueEstimatorHook(parts.loss_module.value_estimator)(reference)
    for key in KEYS[2:]:  # TorchRL writes the values into its NaN-free copy, not the batch
        assert torch.equal(ours[key], theirs[key]), key
    assert not ours["advantage"].isnan().any()
