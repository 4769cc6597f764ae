"""Target-network updates: when they happen and what they compute."""

from __future__ import annotations

import torch

from xdrl.algorithms import td3
from xdrl.algorithms.off_policy import TargetUpdateHook
from xdrl.envs import make_env


def test_td3_targets_move_with_the_actor_every_policy_delay_steps() -> None:
    """As in the TD3 paper and SB3: Polyak steps of both targets only on the optimizer steps
    that update the actor (every ``policy_delay``-th), the same phase as the actor's."""
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    cells = {"actor_cells": (8,), "critic_cells": (8,)}
    parts = td3.build(env, frames_per_batch=8, policy_delay=3, tau=0.1, **cells)
    env.close()
    (hook,) = [h for _, h in parts.hooks if isinstance(h, TargetUpdateHook)]
    loss, stepper = parts.loss_module, parts.optimization_stepper
    names = ("qvalue_network_params", "actor_network_params")
    with torch.no_grad():  # online weights away from the targets, as after training
        for name in names:
            for p in getattr(loss, name).values(True, True):
                if p.requires_grad:  # weights, not buffers such as the action bounds
                    p.add_(torch.randn_like(p))

    def flat(kind: str) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in getattr(loss, kind).values(True, True)])

    online = torch.cat([flat(n) for n in names])
    start = torch.cat([flat("target_" + n) for n in names])
    expected, seen = start.clone(), []
    for step in range(1, 7):
        hook()
        if step % stepper.policy_delay == 0:  # the stepper's actor steps: 3 and 6
            expected = expected + 0.1 * (online - expected)
        seen.append(torch.cat([flat("target_" + n) for n in names]))
        torch.testing.assert_close(seen[-1], expected)
    assert torch.equal(seen[0], start) and torch.equal(seen[1], start)
    assert not torch.equal(seen[2], start)

    restored = TargetUpdateHook(hook.target_params_updater, every=3)
    restored.load_state_dict(hook.state_dict())
    assert restored.steps == 6  # the phase survives a resume


def test_other_off_policy_methods_update_targets_every_step() -> None:
    from xdrl.algorithms import sac

    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    parts = sac.build(env, frames_per_batch=8, actor_cells=(8,), critic_cells=(8,))
    env.close()
    (hook,) = [h for _, h in parts.hooks if isinstance(h, TargetUpdateHook)]
    assert hook.every == 1
