"""``ppo-throughput``: RL-Zoo's CartPole PPO workload (8 envs x 32 steps, 20 epochs of 256, no
eval): SB3, xdrl (vector and serial batching), the bare TorchRL tutorial loop and the lean
plain-PyTorch floor of ``scripts/bench_loops.py``."""

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
    baseline_columns,
    baseline_keys,
    medians,
)

PRESET = ["experiment=cartpole_ppo"]


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    frames = 5_120 if options.quick else 10_240
    xdrl_overrides = [*PRESET, f"total_frames={frames}", "eval=none"]
    rows = []
    for seed in seeds:
        contenders: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.sb3(
                options.sb3_python, "ppo-throughput", s, "--frames", str(frames)
            )["frames_per_second"],
            "xdrl": lambda s=seed: c.xdrl(xdrl_overrides, s)["frames_per_second"],
            "xdrl_serial": lambda s=seed: c.xdrl([*xdrl_overrides, "env.batching=serial"], s)[
                "frames_per_second"
            ],
            "torchrl_loop": lambda s=seed: c.loop("torchrl", s, frames),
            "torch_loop": lambda s=seed: c.loop("torch", s, frames),
        }
        add_baseline(contenders, options, xdrl_overrides, seed)
        fps = alternated(contenders, seed, options.reps)
        rows.append(_row(seed, fps))
        print(f"  ppo-throughput seed {seed}: {rows[-1]}", flush=True)
    extra = ("xdrl_serial_fps", "torchrl_loop_fps", "torchrl_loop_ratio", "xdrl_vs_torch_loop")
    return {"frames": frames, "runs": rows, **medians(rows, *extra, *baseline_keys(rows))}


def _row(seed: int, fps: dict[str, float]) -> dict[str, Any]:
    out = {
        "seed": seed,
        **{f"{name}_fps": value for name, value in fps.items()},
        "torchrl_loop_ratio": fps["torchrl_loop"] / fps["sb3"],
        "torch_loop_ratio": fps["torch_loop"] / fps["sb3"],
        "ratio": fps["xdrl"] / fps["sb3"],
        "xdrl_vs_torch_loop": fps["xdrl"] / fps["torch_loop"],
    }
    out.update(baseline_columns(fps, fps["sb3"]))
    return out


def rows(p: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    sb3 = fmt(p["sb3_fps"], 0)
    floor = fmt(p.get("torch_loop_fps"), 0)
    return [
        row(
            "PPO CartPole frames/s (8 envs x 32 steps, 20 epochs of 256; no eval, logging on)",
            sb3,
            f"{fmt(p['xdrl_fps'], 0)} (batching=serial: {fmt(p.get('xdrl_serial_fps'), 0)})",
            fmt(p["ratio"]),
            check(targets, "ratio", p["ratio"]),
        ),
        *baseline_rows("PPO", p),
        row(
            "same workload, bare TorchRL loop (tutorial style, no Trainer) frames/s",
            sb3,
            fmt(p.get("torchrl_loop_fps"), 0),
            fmt(p.get("torchrl_loop_ratio")),
            check(targets, "torchrl_loop_ratio", p.get("torchrl_loop_ratio")),
        ),
        row(
            "same workload, lean hand-written PyTorch + gymnasium loop (the floor) frames/s, "
            "ratio floor/SB3",
            sb3,
            floor,
            fmt(p.get("torch_loop_ratio")),
            check(targets, "torch_loop_ratio", p.get("torch_loop_ratio")),
        ),
        row(
            "xdrl vs the floor, same workload (ratio xdrl/floor)",
            "-",
            f"{fmt(p['xdrl_fps'], 0)} vs {floor}",
            fmt(p.get("xdrl_vs_torch_loop")),
            check(targets, "xdrl_vs_torch_loop", p.get("xdrl_vs_torch_loop")),
        ),
    ]
