"""LeanReplayBuffer against TorchRL's TensorDictReplayBuffer on the same draws, LeanSoftUpdate
against SoftUpdate, and replay checkpoints that hold what was collected, not the capacity."""

from __future__ import annotations

import io

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
from xdrl.algorithms.off_policy import LeanSoftUpdate, replay_buffer
from xdrl.envs.factory import make_env
from xdrl.lean.frame_replay import FrameReplayBuffer
from xdrl.lean.replay import LeanReplayBuffer


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


def _saved_bytes(module) -> bytes:
    """``module.state_dict()`` as a checkpoint writes it (one ``torch.save`` file)."""
    file = io.BytesIO()
    torch.save(module.state_dict(), file)
    return file.getvalue()


def _loaded(data: bytes):
    """A saved state as a checkpoint load reads it (``weights_only``, as TorchRL loads)."""
    return torch.load(io.BytesIO(data), weights_only=True)


def test_an_off_policy_checkpoint_holds_the_filled_rows_not_the_capacity() -> None:
    """Two buffers of equal capacity filled with 2,000 and 4,000 transitions save ~1:2, far
    below what the capacity's rows weigh (counted from the stored tensors' sizes)."""
    capacity = 200_000
    sizes = []
    for batches in (20, 40):
        buffer = replay_buffer(capacity, 16)
        for seed in range(batches):
            buffer.extend(_transitions(100, seed))
        sizes.append(len(_saved_bytes(buffer)))
    row = _transitions(1, 0)
    row_bytes = sum(t.numel() * t.element_size() for t in row.values(True, True))
    row_bytes += 8  # the int64 ``index`` entry TorchRL's buffer writes into its storage
    assert 1.8 < sizes[1] / sizes[0] < 2.2
    assert sizes[1] < 4_000 * row_bytes + 20_000  # the rows and a little framing
    assert sizes[1] < capacity * row_bytes / 20


@pytest.mark.parametrize("more", [50, 250])  # still filling, and wrapping the ring of 300
def test_a_buffer_restored_from_its_filled_rows_samples_and_fills_as_the_original(
    more: int,
) -> None:
    original = replay_buffer(300, 16)
    for seed in range(2):
        original.extend(_transitions(100, seed))
    restored = replay_buffer(300, 16)
    restored.load_state_dict(_loaded(_saved_bytes(original)))
    for module in (original, restored):
        module.extend(_transitions(more, 7))
    assert len(restored.replay_buffer) == len(original.replay_buffer) == min(300, 200 + more)
    for seed in range(3):
        torch.manual_seed(seed)
        ours = restored.sample(None)
        torch.manual_seed(seed)
        theirs = original.sample(None)
        for key in theirs.keys(True, True):
            torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=str(key))


def test_a_checkpoint_of_the_whole_capacity_still_loads() -> None:
    """A state saved by TorchRL's ``LazyTensorStorage`` (every row of the capacity, as xdrl's
    checkpoints were written before) restores the same buffer."""
    old = TensorDictReplayBuffer(storage=LazyTensorStorage(300), batch_size=16)
    old.extend(_transitions(120, 0))
    restored = replay_buffer(300, 16)
    restored.replay_buffer.load_state_dict(_loaded(_saved_bytes(old)))
    assert len(restored.replay_buffer) == 120
    torch.testing.assert_close(
        restored.replay_buffer[:120]["observation"], old[:120]["observation"], rtol=0, atol=0
    )


def _frame_batch(num_envs: int, steps: int, start: int, seed: int) -> TensorDict:
    """A collector batch ``[num_envs, steps]`` of 4-frame stacks of 20x20 frames, episodes of 7
    steps (step counts from ``start``)."""
    gen = torch.Generator().manual_seed(seed)
    step_count = (start + torch.arange(steps)).remainder(7).expand(num_envs, steps)
    frames = torch.randint(0, 256, (num_envs, steps, 4, 20, 20), generator=gen, dtype=torch.uint8)
    done = (step_count == 6).unsqueeze(-1)
    return TensorDict(
        {
            "observation": frames,
            "step_count": step_count.unsqueeze(-1).clone(),
            "action": torch.randint(0, 4, (num_envs, steps), generator=gen),
            "next": {
                "observation": frames.roll(-1, 1),
                "reward": torch.randn(num_envs, steps, 1, generator=gen),
                "terminated": done,
                "truncated": torch.zeros_like(done),
            },
        },
        batch_size=[num_envs, steps],
    )


def test_a_frame_replay_checkpoint_holds_the_filled_rows_and_restores_exactly() -> None:
    """Atari DQN's buffer: saved bytes grow with the rows written (1:2), stay far below its
    capacity's, and the restored ring samples and wraps as the original."""
    sizes = []
    for batches in (2, 4):
        buffer = FrameReplayBuffer(capacity=2_000, batch_size=8, stack=4)
        for b in range(batches):
            buffer.extend(_frame_batch(2, 25, 25 * b, b))
        sizes.append(len(_saved_bytes(buffer)))
    capacity_bytes = buffer.nbytes()  # the preallocated ring of 1,000 rows x 2 envs
    assert 1.8 < sizes[1] / sizes[0] < 2.2
    assert sizes[1] < capacity_bytes / 5
    restored = FrameReplayBuffer(capacity=2_000, batch_size=8, stack=4)
    restored.load_state_dict(_loaded(_saved_bytes(buffer)))
    for module in (buffer, restored):
        module.extend(_frame_batch(2, 950, 100, 9))  # 1,050 rows: the ring of 1,000 wraps
    assert restored.cursor == buffer.cursor == 50 and restored.filled == buffer.filled
    for seed in range(3):
        torch.manual_seed(seed)
        ours = restored.sample()
        torch.manual_seed(seed)
        theirs = buffer.sample()
        for key in theirs.keys(True, True):
            torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=str(key))
