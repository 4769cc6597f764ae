"""StackedValueGAE against TorchRL's ValueEstimatorHook on the same collected batches."""

from __future__ import annotations

import pytest
import torch
from torchrl.trainers import ValueEstimatorHook

from xdrl.algorithms import a2c, ppo
from xdrl.algorithms.on_policy import RewardScale, StackedValueGAE
from xdrl.envs.factory import make_env
from xdrl.lean.collector import VectorCollector

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


def _against_torchrl(hook, parts, batch, keys):
    """Run ``hook`` on ``batch`` and TorchRL's ``ValueEstimatorHook`` on a copy; ``keys`` equal
    bit for bit. Returns the hook's batch."""
    reference = batch.clone()
    ours = hook(batch)
    with torch.no_grad():
        theirs = ValueEstimatorHook(parts.loss_module.value_estimator)(reference)
    for key in keys:
        assert torch.equal(ours[key], theirs[key]), key
    return ours


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
    ours = _against_torchrl(hook, parts, batch, KEYS)
    assert ours["advantage"].abs().sum() > 0


def test_nan_next_observations_read_their_steps_observation() -> None:
    """As TorchRL's estimator does for a compact collector's missing final observations."""
    hook, parts, batch = _hook_and_batch("CartPole-v1", ppo, 256, minibatch_size=64)
    batch["next", "observation"][0, 3] = float("nan")
    # TorchRL writes the values into its NaN-free copy, not the batch: compare the rest
    ours = _against_torchrl(hook, parts, batch, KEYS[2:])
    assert not ours["advantage"].isnan().any()


def _made_up_batch(envs: int, steps: int, *, seed: int = 0, named: bool = False):
    """Values, rewards and episode ends drawn at random: terminations and truncations."""
    from tensordict import TensorDict

    g = torch.Generator().manual_seed(seed)
    shape = (envs, steps, 1)
    terminated = torch.rand(shape, generator=g) < 0.1
    truncated = (torch.rand(shape, generator=g) < 0.05) & ~terminated
    batch = TensorDict(
        {
            "state_value": torch.randn(shape, generator=g) * 10,
            "next": {
                "state_value": torch.randn(shape, generator=g) * 10,
                "reward": torch.randn(shape, generator=g),
                "terminated": terminated,
                "truncated": truncated,
                "done": terminated | truncated,
            },
        },
        batch_size=[envs, steps],
    )
    if named:
        batch.refine_names(None, "time")
    return batch


@pytest.mark.parametrize(
    ("gamma", "lmbda", "envs", "steps", "named"),
    [(0.98, 0.8, 8, 32, False), (0.99, 0.95, 3, 128, True), (1.0, 1.0, 1, 7, False)],
)
def test_numpy_recursion_is_torchrls_bit_for_bit(gamma, lmbda, envs, steps, named, monkeypatch):
    from torchrl.objectives.value import GAE

    from xdrl.lean.gae import advantages

    gae = GAE(gamma=gamma, lmbda=lmbda, value_network=None, average_gae=False)
    batch = _made_up_batch(envs, steps, seed=envs, named=named)
    theirs = gae(batch.clone())
    monkeypatch.setattr(GAE, "forward", lambda *a, **k: pytest.fail("TorchRL's GAE ran"))
    ours = advantages(gae, batch.clone())
    for key in ("advantage", "value_target"):
        assert ours[key].shape == theirs[key].shape
        assert torch.equal(ours[key], theirs[key]), key


@pytest.mark.parametrize("setting", ["average_gae", "time_dim_0", "float64"])
def test_other_settings_run_torchrls_gae(setting: str) -> None:
    from torchrl.objectives.value import GAE

    from xdrl.lean.gae import advantages

    batch = _made_up_batch(4, 16)
    gae = GAE(gamma=0.9, lmbda=0.9, value_network=None, average_gae=setting == "average_gae")
    if setting == "time_dim_0":
        gae.time_dim = 0
    if setting == "float64":
        for key in ("state_value", ("next", "state_value"), ("next", "reward")):
            batch.set(key, batch.get(key).double())
    calls = []
    original = GAE.forward

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GAE, "forward", counted)
        ours = advantages(gae, batch.clone())
    assert calls, "the lean path ran a setting it does not cover"
    assert torch.equal(ours["advantage"], gae(batch.clone())["advantage"])
