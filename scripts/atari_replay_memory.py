"""Peak memory of the ``atari_dqn`` preset's replay buffer when full (issue 21: < 4 GB).

Builds the preset's env and DQN parts (100,000 transitions, Breakout, 1 env), collects one real
batch of ``--batch`` agent steps with random actions, then extends the buffer with it until it
holds ``--transitions`` (the bytes per transition do not depend on the frames' content), samples
and takes a few DQN loss steps, and prints one JSON line: the buffer's bytes, bytes per
transition, what TorchRL's ``LazyTensorStorage`` would hold for the same transitions
(observation and next observation stacks), and the process's peak RSS.

Usage:
    .venv/bin/python scripts/atari_replay_memory.py            # ~1-2 min
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import torch

from xdrl.algorithms.dqn import build
from xdrl.envs.atari import make_atari_env
from xdrl.lean.collector import VectorCollector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    args = parser.parse_args()
    start = time.perf_counter()
    env = make_atari_env("ALE/Breakout-v5", num_envs=1, seed=0)
    parts = build(
        env,
        frames_per_batch=args.batch,
        buffer_size=args.transitions,
        batch_size=32,
        encoder="cnn",
        loss_function="smooth_l1",
    )
    replay = parts.modules["replay_buffer"]
    collector = VectorCollector(
        env, parts.policy, frames_per_batch=args.batch, total_frames=args.batch,
        init_random_frames=10**9,
    )  # fmt: skip
    batch = next(iter(collector))
    for _ in range(-(-args.transitions // args.batch)):
        replay.extend(batch)
    optimizer = torch.optim.Adam(parts.loss_module.parameters(), lr=1e-4)
    for _ in range(10):
        loss = parts.loss_module(replay.sample())["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    stack = batch["observation"][0, 0]
    torchrl_bytes = 2 * stack.numel() * stack.element_size() * len(replay)
    print(
        json.dumps(
            {
                "transitions": len(replay),
                "buffer_bytes": replay.nbytes(),
                "bytes_per_transition": round(replay.nbytes() / len(replay), 1),
                "torchrl_storage_bytes_for_the_stacks": torchrl_bytes,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
