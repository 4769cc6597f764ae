"""Agent steps/s of the two Atari backends xdrl could use (the measurement behind
``xdrl/envs/atari.py``): gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation`` on 8 games
stepped in one Python loop (what xdrl's ``VectorGymEnv`` does), and ale-py's C++
``AtariVectorEnv`` of 8 games at 1 and 2 threads; Breakout, random actions, sticky actions on,
alternated twice in one process.

Usage:
    .venv/bin/python scripts/atari_backends.py
"""

from __future__ import annotations

import time

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

gym.register_envs(ale_py)
N, STEPS = 8, 400


def gym_env() -> gym.Env:
    env = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.25)
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    return FrameStackObservation(env, 4)


def run_gym() -> float:
    envs = [gym_env() for _ in range(N)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(STEPS):
        actions = rng.integers(0, 4, N)
        for env, action in zip(envs, actions, strict=True):
            _obs, _reward, terminated, truncated, _info = env.step(action)
            if terminated or truncated:
                env.reset()
    return N * STEPS / (time.perf_counter() - start)


def run_vector(threads: int) -> float:
    env = ale_py.vector_env.AtariVectorEnv(
        game="breakout", num_envs=N, num_threads=threads, repeat_action_probability=0.25
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(STEPS):
        env.step(rng.integers(0, 4, N))
    rate = N * STEPS / (time.perf_counter() - start)
    env.close()
    return rate


if __name__ == "__main__":
    for _ in range(2):
        print(f"gymnasium wrappers, 8 games in a loop: {run_gym():,.0f} agent steps/s")
        print(f"AtariVectorEnv, 1 thread: {run_vector(1):,.0f} agent steps/s")
        print(f"AtariVectorEnv, 2 threads: {run_vector(2):,.0f} agent steps/s")
