"""``atari``: xdrl's ``atari_ppo`` (its default precision, fp32, and bf16) against SB3's PPO with
RL-Zoo's Atari settings on Breakout, 2 torch threads each, the same number of agent steps;
frames/s count emulator frames (4 per agent step), training time only."""

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
    c.check_sb3_venv(options.sb3_python, "ale_py", "cv2")  # SB3's AtariWrapper needs OpenCV
    steps = 2_048 if options.quick else 8_192  # agent steps: 2 or 8 batches of 8 envs x 128
    common = [
        "experiment=atari_ppo",
        "env.id=ALE/Breakout-v5",
        f"total_frames={4 * steps}",
        "num_threads=2",
        "eval=none",
        "logging=none",
    ]
    sb3_args = ["--frames", str(steps), "--threads", "2"]
    rows = []
    for seed in seeds:
        contenders: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.sb3(options.sb3_python, "atari", s, *sb3_args)[
                "frames_per_second"
            ],
            "xdrl": lambda s=seed: c.xdrl(common, s)["frames_per_second"],
            "xdrl_bf16": lambda s=seed: c.xdrl([*common, "precision=bf16"], s)["frames_per_second"],
        }
        add_baseline(contenders, options, common, seed)
        rows.append(_row(seed, alternated(contenders, seed, options.reps)))
        print(f"  atari seed {seed}: {rows[-1]}", flush=True)
    return {
        "agent_steps": steps,
        "runs": rows,
        **medians(rows, "xdrl_bf16_fps", "bf16_ratio", *baseline_keys(rows)),
        "workload": "Breakout, RL-Zoo atari PPO: 8 envs x 128 steps, 4 epochs x 4 minibatches, "
        f"Nature CNN, {steps} agent steps ({4 * steps} frames)",
    }


def _row(seed: int, fps: dict[str, float]) -> dict[str, Any]:
    return {
        **sb3_xdrl_row(seed, fps),
        "xdrl_bf16_fps": fps["xdrl_bf16"],
        "bf16_ratio": fps["xdrl_bf16"] / fps["sb3"],
    }


def rows(a: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    return [
        row(
            f"Atari PPO frames/s (Breakout, RL-Zoo atari settings, {a['agent_steps']} agent "
            "steps, 2 threads each; xdrl at its default fp32, precision=bf16 in brackets)",
            fmt(a["sb3_fps"], 0),
            f"{fmt(a['xdrl_fps'], 0)} ({fmt(a.get('xdrl_bf16_fps'), 0)})",
            f"{fmt(a['ratio'])} ({fmt(a.get('bf16_ratio'))})",
            check(targets, "ratio", a["ratio"]),
        ),
        *baseline_rows("Atari", a),
    ]
