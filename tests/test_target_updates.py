"""Target-network updates: when they happen and what they compute."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tests.conftest import pendulum_transitions
from xdrl.algorithms import td3
from xdrl.algorithms.off_policy import TargetUpdateHook
from xdrl.envs.factory import make_env


def _flat(loss, *names: str) -> torch.Tensor:
    return torch.cat(
        [p.detach().flatten() for n in names for p in getattr(loss, n).values(True, True)]
    )


def test_td3_targets_move_on_the_optimizer_steps_that_update_the_actor() -> None:
    """As in the TD3 paper and SB3: both targets take a Polyak step exactly on the steps whose
    optimizer update moved the actor (every ``policy_delay``-th), also across a resume."""
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    cells = {"actor_cells": (8,), "critic_cells": (8,)}
    parts = td3.build(env, frames_per_batch=8, policy_delay=3, tau=0.1, **cells)
    env.close()
    (hook,) = [h for _, h in parts.hooks if isinstance(h, TargetUpdateHook)]
    loss, stepper = parts.loss_module, parts.optimization_stepper
    trainer = SimpleNamespace(  # what DelayedActorStepper.step reads of a Trainer
        compute_loss=lambda batch, method: getattr(loss, method)(batch),
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2),
        clip_grad_norm=True,
        clip_norm=None,
    )
    online = ("qvalue_network_params", "actor_network_params")
    targets = tuple("target_" + name for name in online)
    actor_moved, expected = [], _flat(loss, *targets)
    for step in range(1, 8):
        if step == 5:  # a resume: a fresh stepper and hook from their checkpointed state
            state = (stepper.state_dict(), hook.state_dict())
            stepper = td3.DelayedActorStepper(policy_delay=3)
            stepper.load_state_dict(state[0])
            hook = TargetUpdateHook(hook.target_params_updater, clock=stepper)
            hook.load_state_dict(state[1])
        actor_before = _flat(loss, "actor_network_params")
        stepper.step(trainer, pendulum_transitions(32))
        hook()
        actor_moved.append(not torch.equal(actor_before, _flat(loss, "actor_network_params")))
        if actor_moved[-1]:
            expected = expected + 0.1 * (_flat(loss, *online) - expected)
        torch.testing.assert_close(_flat(loss, *targets), expected)
    assert actor_moved == [False, False, True, False, False, True, False]


def test_other_off_policy_methods_update_targets_every_step() -> None:
    from xdrl.algorithms import sac

    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    parts = sac.build(env, frames_per_batch=8, actor_cells=(8,), critic_cells=(8,))
    env.close()
    (hook,) = [h for _, h in parts.hooks if isinstance(h, TargetUpdateHook)]
    before = _flat(parts.loss_module, "target_qvalue_network_params")
    with torch.no_grad():
        for p in parts.loss_module.qvalue_network_params.values(True, True):
            p.add_(1.0)
    hook()
    assert not torch.equal(before, _flat(parts.loss_module, "target_qvalue_network_params"))
