"""LeanDQNLoss against TorchRL's DQNLoss on fixed batches, LeanHardUpdate against HardUpdate."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.objectives import DQNLoss, HardUpdate

from tests.conftest import made_up_transitions
from xdrl.algorithms import dqn
from xdrl.algorithms.off_policy import LeanHardUpdate
from xdrl.envs.factory import make_env
from xdrl.lean.dqn_loss import LeanDQNLoss

BATCH = 64


def _batch(seed: int = 0) -> TensorDict:
    """Made-up CartPole transitions: 4-d observations, actions 0 or 1."""
    return made_up_transitions(
        BATCH, 4, lambda gen, n: torch.randint(0, 2, (n,), generator=gen), seed=seed
    )


def _losses(**kwargs):
    env = make_env("CartPole-v1", num_envs=2, seed=0)
    kwargs = {"q_cells": (32, 24), **kwargs}
    parts = [dqn.build(env, frames_per_batch=64, **kwargs) for _ in range(2)]
    lean = parts[0].loss_module
    assert isinstance(lean, LeanDQNLoss)
    reference = DQNLoss(
        parts[1].loss_module.value_network,
        loss_function=lean.loss_function,
        delay_value=True,
        double_dqn=lean.double_dqn,
        action_space=env.full_action_spec_unbatched["action"],
    )
    reference.make_value_estimator(gamma=0.99)
    reference.load_state_dict(lean.state_dict())
    with torch.no_grad():  # a target network that differs from the online one
        for p in lean.target_value_network_params.values(True, True):
            p.add_(0.1 * torch.randn_like(p))
        reference.target_value_network_params.update_(lean.target_value_network_params)
    env.close()
    return lean, reference


def _run(loss, batch):
    for p in loss.parameters():
        p.grad = None
    out = loss(batch)
    out["loss"].backward()
    return out, {n: p.grad.clone() for n, p in loss.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    ("kwargs", "tensors"),
    [
        ({}, 6),
        ({"double_dqn": True, "loss_function": "smooth_l1"}, 6),
        ({"q_cells": (), "q_bias": False}, 1),  # dst_dqn's linear Q-table: one weight, no bias
    ],
)
def test_same_values_and_gradients_as_dqn_loss(kwargs, tensors: int, monkeypatch) -> None:
    lean, reference = _losses(**kwargs)
    calls = []
    original = DQNLoss.forward
    monkeypatch.setattr(DQNLoss, "forward", lambda self, td: calls.append(1) or original(self, td))
    lean_batch, reference_batch = _batch(), _batch()
    ours, our_grads = _run(lean, lean_batch)
    assert calls == []  # the lean path ran
    theirs, their_grads = _run(reference, reference_batch)
    assert calls == [1]
    torch.testing.assert_close(ours["loss"], theirs["loss"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(lean_batch["td_error"], reference_batch["td_error"])
    assert set(our_grads) == set(their_grads) and len(our_grads) == tensors
    for name, grad in their_grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=1e-6, atol=1e-6, msg=name)


def test_lean_hard_update_is_hard_update() -> None:
    lean_loss, reference_loss = _losses()
    lean = LeanHardUpdate(lean_loss, value_network_update_interval=3)
    reference = HardUpdate(reference_loss, value_network_update_interval=3)
    for step in range(9):
        with torch.no_grad():
            for a, b in zip(lean_loss.parameters(), reference_loss.parameters(), strict=True):
                noise = torch.randn_like(a)
                a.add_(noise)
                b.add_(noise)
        lean.step()
        reference.step()
        assert lean.counter == reference.counter, step
        ours, theirs = (
            lean_loss.target_value_network_params,
            reference_loss.target_value_network_params,
        )
        for key in theirs.keys(True, True):
            torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0)
