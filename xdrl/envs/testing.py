"""Test envs for parallel collection, registered with gymnasium on import.

``SleepyCartPole-v1``: CartPole-v1 whose every step first sleeps ``step_sleep_s`` (2 ms by
default): a stand-in for a remote simulator or an emulator, whose step costs wall time rather
than this process's CPU. It shows where ``collector=multiprocess`` pays back: the workers' waits
overlap, even on 2 cores. With ``fail_seed`` set, the sub-env reset with that seed raises once
it has taken ``fail_after_steps`` steps in this process (a simulator that crashes some time after
it started: restored from a checkpoint in a new process, it counts again from 0), for the worker
fault tests.

Use it by its module-qualified id, so that any process (a collector worker too) registers it:

    xdrl-train env=gym env.id=xdrl.envs.testing:SleepyCartPole-v1 collector=multiprocess
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

SLEEPY_ID = "SleepyCartPole-v1"
_STEPS_IN_PROCESS: dict[int, int] = {}  # steps per env object in this process (not pickled)


class SimulatorCrash(RuntimeError):
    """What :class:`SleepyCartPole` raises where it was asked to fail."""


class SleepyCartPole(CartPoleEnv):
    """CartPole-v1 with a fixed wait per step, and optionally a crash.

    Args:
        step_sleep_s: seconds each ``step`` waits before stepping.
        fail_seed: the reset seed of the sub-env that crashes (None: none does).
        fail_after_steps: steps after that reset before it raises :class:`SimulatorCrash`.

    Example:
        >>> env = gym.make("xdrl.envs.testing:SleepyCartPole-v1", step_sleep_s=0.002)
    """

    def __init__(
        self,
        step_sleep_s: float = 0.002,
        fail_seed: int | None = None,
        fail_after_steps: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.step_sleep_s = step_sleep_s
        self.fail_seed = fail_seed
        self.fail_after_steps = fail_after_steps
        self._doomed = False

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        if seed is not None:
            self._doomed = self.fail_seed is not None and seed == self.fail_seed
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        time.sleep(self.step_sleep_s)
        steps = _STEPS_IN_PROCESS[id(self)] = _STEPS_IN_PROCESS.get(id(self), 0) + 1
        if self._doomed and steps > self.fail_after_steps:
            raise SimulatorCrash(f"simulated crash of the sub-env seeded {self.fail_seed}")
        return super().step(action)


if SLEEPY_ID not in gym.registry:
    gym.register(SLEEPY_ID, entry_point=SleepyCartPole, max_episode_steps=500,
                 reward_threshold=475.0)  # fmt: skip
