"""``recurrent``: recurrent PPO on CartPole without velocity with RL-Zoo's ``ppo_lstm``
CartPoleNoVel settings (8 envs x 32 steps, batch 256, 20 epochs, LSTM 64 with a critic LSTM,
normalized observations): xdrl's ``experiment=cartpole_novel_lstm`` against sb3-contrib's
``RecurrentPPO``, 1 thread each, training frames/s (no evaluation)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import contenders as c
from benchmarks.report import baseline_rows, check, fmt, row
from benchmarks.runner import (
    Options,
    Row,
    add_baseline,
    alternated,
    baseline_keys,
    medians,
    sb3_xdrl_row,
)


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    c.check_sb3_venv(options.sb3_python, "sb3_contrib")
    frames = 5_120 if options.quick else 10_240
    common = [
        "experiment=cartpole_novel_lstm",
        # RL-Zoo's values where the preset departs from them, as sb3-contrib's side runs
        "algorithm.optimizer.lr=1e-3",
        "algorithm.build.gamma=0.98",
        "algorithm.build.lmbda=0.8",
        f"total_frames={frames}",
        "num_threads=1",
        "eval=none",
        "logging=none",
    ]
    rows = []
    for seed in seeds:
        contenders: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.sb3(
                options.sb3_python, "recurrent", s, "--frames", str(frames), "--threads", "1"
            )["frames_per_second"],
            "xdrl": lambda s=seed: c.xdrl(common, s)["frames_per_second"],
        }
        add_baseline(contenders, options, common, seed)
        fps = alternated(contenders, seed, options.reps)
        rows.append(sb3_xdrl_row(seed, fps))
        print(f"  recurrent seed {seed}: {rows[-1]}", flush=True)
    return {"frames": frames, "runs": rows, **medians(rows, *baseline_keys(rows))}


def rows(r: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    return [
        row(
            f"Recurrent PPO frames/s (CartPole without velocity, RL-Zoo ppo_lstm settings, "
            f"LSTM 64 + critic LSTM, {r['frames']} frames, 1 thread each; SB3 = sb3-contrib "
            "RecurrentPPO)",
            fmt(r["sb3_fps"], 0),
            fmt(r["xdrl_fps"], 0),
            fmt(r["ratio"]),
            check(targets, "ratio", r["ratio"]),
        ),
        *baseline_rows("Recurrent PPO", r),
    ]
