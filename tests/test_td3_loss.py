"""LeanTD3Loss against TorchRL's TD3Loss: same values and gradients on fixed batches."""

from __future__ import annotations

import pytest
import torch
from torchrl.objectives import TD3Loss

from tests.conftest import pendulum_transitions
from xdrl.algorithms import td3
from xdrl.envs.factory import make_env
from xdrl.lean.td3_loss import LeanTD3Loss


def _pair(**kwargs):
    torch.manual_seed(0)
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    cells = {"actor_cells": (32, 24), "critic_cells": (32, 24)}
    lean = td3.build(env, frames_per_batch=64, **cells, **kwargs).loss_module
    assert isinstance(lean, LeanTD3Loss)
    reference = TD3Loss(
        lean.actor_network,
        lean.qvalue_network,
        action_spec=env.full_action_spec_unbatched["action"],
        num_qvalue_nets=2,
        policy_noise=lean.policy_noise,
        noise_clip=lean.noise_clip,
        loss_function=lean.loss_function,
        delay_actor=True,
        delay_qvalue=True,
        deactivate_vmap=True,
    )
    reference.make_value_estimator(gamma=0.99)
    reference.load_state_dict(lean.state_dict())
    with torch.no_grad():  # targets differ from the online networks, as after some training
        for name in ("target_actor_network_params", "target_qvalue_network_params"):
            for p in getattr(lean, name).values(True, True):
                p.add_(0.05 * torch.randn_like(p))
            getattr(reference, name).update_(getattr(lean, name))
    env.close()
    return lean, reference


def _run(loss, batch, method):
    for p in loss.parameters():
        p.grad = None
    torch.manual_seed(7)
    if method == "forward":
        out = loss(batch)
        total = out["loss_actor"] + out["loss_qvalue"]
        values = dict(out.items())
    elif method == "actor_only_loss":  # TorchRL's counterpart: actor_loss without metadata
        total = loss.actor_only_loss(batch) if hasattr(loss, method) else loss.actor_loss(batch)[0]
        values = {"loss": total}
    else:
        total, metadata = getattr(loss, method)(batch)
        values = {"loss": total, **metadata}
    total.backward()
    grads = {name: p.grad.clone() for name, p in loss.named_parameters() if p.grad is not None}
    return values, grads


@pytest.mark.parametrize("method", ["value_loss", "actor_loss", "actor_only_loss", "forward"])
@pytest.mark.parametrize("kwargs", [{}, {"loss_function": "smooth_l1", "policy_noise": 0.5}])
def test_same_values_and_gradients_as_td3_loss(method, kwargs, monkeypatch) -> None:
    lean, reference = _pair(**kwargs)
    calls = []
    for name in ("actor_loss", "value_loss"):
        original = getattr(TD3Loss, name)
        monkeypatch.setattr(
            TD3Loss, name, lambda self, td, f=original, n=name: calls.append(n) or f(self, td)
        )
    lean_batch, reference_batch = pendulum_transitions(), pendulum_transitions()
    ours, our_grads = _run(lean, lean_batch, method)
    assert calls == []  # the lean path ran
    theirs, their_grads = _run(reference, reference_batch, method)
    assert calls
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        torch.testing.assert_close(ours[key], value, rtol=1e-6, atol=1e-6, msg=key)
    if method == "forward":
        torch.testing.assert_close(lean_batch["td_error"], reference_batch["td_error"])
    assert set(our_grads) == set(their_grads) and our_grads
    for name, grad in their_grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=1e-6, atol=1e-6, msg=name)


def test_the_stepper_skips_the_actor_metadata_and_updates_the_same() -> None:
    """DelayedActorStepper asks a lean loss for ``actor_only_loss`` and any other for
    ``actor_loss``; both updates are the same (same parameters after an actor step)."""
    from types import SimpleNamespace

    results = {}
    for method in ("actor_only_loss", "actor_loss"):
        lean, _ = _pair()
        calls: list[str] = []

        def compute_loss(batch, method, loss=lean, calls=calls):
            calls.append(method)
            return getattr(loss, method)(batch)

        trainer = SimpleNamespace(
            compute_loss=compute_loss,
            # a loss module without actor_only_loss sends the stepper to actor_loss
            loss_module=lean if method == "actor_only_loss" else SimpleNamespace(),
            optimizer=torch.optim.Adam(lean.parameters(), lr=1e-2),
            clip_grad_norm=True,
            clip_norm=None,
        )
        torch.manual_seed(3)
        td3.DelayedActorStepper(policy_delay=1).step(trainer, pendulum_transitions(32))
        results[method] = [p.detach().clone() for p in lean.parameters()]
        assert calls == ["value_loss", method]
    for ours, theirs in zip(results["actor_only_loss"], results["actor_loss"], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
