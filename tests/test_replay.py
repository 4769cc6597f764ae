"""LeanReplayBuffer against TorchRL's TensorDictReplayBuffer on the same draws, and
LeanSoftUpdate against SoftUpdate."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import (
    LazyTensorStorage,
    RandomSampler,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
)
from torchrl.objectives import SoftUpdate

from xdrl.algorithms import sac
from xdrl.algorithms.off_policy import LeanSoftUpdate
from xdrl.algorithms.replay import LeanReplayBuffer
from xdrl.envs import make_env


def _transitions(n: int, seed: int) -> TensorDict:
    gen = torch.Generator().manual_seed(seed)
    done = torch.rand(n, 1, generator=gen) < 0.1
    return TensorDict(
        {
            "observation": torch.randn(n, 3, generator=gen),
            "action": torch.randn(n, 1, generator=gen),
            "step_count": torch.randint(0, 200, (n, 1), generator=gen),
            "done": done,
            "next": {
                "observation": torch.randn(n, 3, generator=gen),
                "reward": torch.randn(n, 1, generator=gen),
                "done": done.clone(),
            },
        },
        batch_size=[n],
    )


SAMPLERS = {
    "uniform": RandomSampler,  # off-policy replay
    "epochs": lambda: SamplerWithoutReplacement(drop_last=True),  # PPO's minibatches
}


@pytest.mark.parametrize("sampler", list(SAMPLERS))
@pytest.mark.parametrize("capacity", [40, 1000])  # wrapped around, and partly filled
def test_same_batches_as_torchrl_sampling(capacity: int, sampler: str, monkeypatch) -> None:
    lean = LeanReplayBuffer(
        storage=LazyTensorStorage(capacity), sampler=SAMPLERS[sampler](), batch_size=16
    )
    reference = TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity), sampler=SAMPLERS[sampler](), batch_size=16
    )
    for seed in range(3):
        batch = _transitions(25, seed)
        lean.extend(batch.clone())
        reference.extend(batch.clone())
    gathered = []
    storage_get = LazyTensorStorage.get
    monkeypatch.setattr(
        LazyTensorStorage, "get", lambda self, i: gathered.append(1) or storage_get(self, i)
    )
    drawn = []
    for step in range(10):  # several epochs of the without-replacement sampler
        torch.manual_seed(step)
        ours = lean.sample()
        drawn.append(ours["index"])
        assert gathered == []  # the lean path ran: TorchRL's storage indexing was not used
        torch.manual_seed(step)
        theirs = reference.sample()
        assert gathered == [1]
        gathered.clear()
        assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
        assert ours.batch_size == theirs.batch_size and ours.device == theirs.device
        for key in theirs.keys(True, True):
            assert ours[key].dtype == theirs[key].dtype, key
            torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=str(key))
    assert int(ours["index"].max()) < len(lean)
    if sampler == "epochs":  # each epoch's batches are distinct rows
        per_epoch = len(lean) // 16
        epoch = torch.cat(drawn[:per_epoch])
        assert epoch.unique().numel() == epoch.numel()


def test_other_calls_sample_through_torchrl() -> None:
    lean = LeanReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    lean.extend(_transitions(10, 0))
    data, info = lean.sample(return_info=True)
    assert data.batch_size == (4,) and "index" in info


def test_lean_soft_update_is_soft_update() -> None:
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    losses = [sac.build(env, frames_per_batch=8).loss_module for _ in range(2)]
    losses[1].load_state_dict(losses[0].state_dict())
    lean, reference = LeanSoftUpdate(losses[0], tau=0.1), SoftUpdate(losses[1], tau=0.1)
    for _ in range(3):
        with torch.no_grad():
            for a, b in zip(losses[0].parameters(), losses[1].parameters(), strict=True):
                noise = torch.randn_like(a)
                a.add_(noise)
                b.add_(noise)
        lean.step()
        reference.step()
    ours, theirs = losses[0].target_qvalue_network_params, losses[1].target_qvalue_network_params
    for key in theirs.keys(True, True):
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-6, atol=1e-7)
    assert not torch.equal(
        ours["module", "0", "weight"], losses[0].qvalue_network_params["module", "0", "weight"]
    )
    env.close()


def test_the_buffer_keeps_what_the_loss_reads() -> None:
    """Off-policy buffers store the loss's ``in_keys`` only: a batch sampled from them gives the
    same losses as the whole transitions do, and the other collected entries are not kept."""
    env = make_env("Pendulum-v1", num_envs=2, batching="vector", seed=0)
    parts = sac.build(env, frames_per_batch=8, batch_size=16, init_random_frames=0)
    trainer_buffer = parts.modules["replay_buffer"]
    buffer = trainer_buffer.replay_buffer
    batch = env.rollout(20, parts.policy).reshape(-1)  # 40 whole transitions
    assert len(set(batch.keys(True, True))) > len(parts.loss_module.in_keys)
    buffer.extend(batch.clone())
    stored = set(buffer[:].exclude("index").keys(True, True))
    assert stored == set(parts.loss_module.in_keys)
    torch.manual_seed(0)
    sample = buffer.sample()
    rows = batch[sample["index"]]
    torch.manual_seed(1)
    ours = parts.loss_module(sample)
    torch.manual_seed(1)
    theirs = parts.loss_module(rows)
    for key in ("loss_actor", "loss_qvalue", "loss_alpha"):
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=key)
    env.close()
