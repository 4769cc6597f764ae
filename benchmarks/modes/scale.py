"""``scale``: the PPO CartPole workload at 8, 32 and 128 envs, 32 steps each, whole-batch
steps: SB3, xdrl and the floor (~5 min with one seed). Its own table, no summary rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import contenders as c
from benchmarks.modes.ppo_throughput import PRESET
from benchmarks.report import fmt
from benchmarks.runner import Options, Row, alternated, median

ENVS = {8: 10_240, 32: 32_768, 128: 65_536}  # envs -> frame budget (40, 32, 16 batches)
WORKLOAD = (
    "CartPole-v1, N envs x 32 steps, 20 epochs of one whole-batch (32 N) step, eval off, 1 thread"
)


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    rows = []
    for seed in seeds:
        for envs, budget in ENVS.items():
            frames = budget // 2 if options.quick else budget
            batch = 32 * envs
            overrides = [
                *PRESET,
                "eval=none",
                f"env.num_envs={envs}",
                f"frames_per_batch={batch}",
                f"algorithm.build.minibatch_size={batch}",
                f"total_frames={frames}",
            ]
            args = ("--frames", str(frames), "--envs", str(envs))
            contenders: dict[str, Callable[..., Any]] = {
                "sb3": lambda s=seed, a=args: c.sb3(options.sb3_python, "ppo-throughput", s, *a)[
                    "frames_per_second"
                ],
                "xdrl": lambda s=seed, o=overrides: c.xdrl(o, s)["frames_per_second"],
                "torch_loop": lambda s=seed, e=envs, f=frames: c.loop(
                    "torch", s, f, "--envs", str(e)
                ),
            }
            fps = alternated(contenders, seed + envs, options.reps)
            rows.append({"seed": seed, "envs": envs, "frames": frames, **fps})
            print(f"  scale seed {seed}: {rows[-1]}", flush=True)
    return {"runs": rows, "table": [_table_row(rows, envs) for envs in ENVS], "workload": WORKLOAD}


def _table_row(rows: list[dict[str, Any]], envs: int) -> dict[str, Any]:
    mine = [r for r in rows if r["envs"] == envs]
    sb, xd, fl = (median(r[k] for r in mine) for k in ("sb3", "xdrl", "torch_loop"))
    return {
        "envs": envs,
        "frames_per_batch": 32 * envs,
        "frames": mine[0]["frames"],
        "sb3_fps": sb,
        "xdrl_fps": xd,
        "torch_loop_fps": fl,
        "ratio": xd / sb if xd and sb else None,
        "xdrl_vs_torch_loop": xd / fl if xd and fl else None,
        "torch_loop_ratio": fl / sb if fl and sb else None,
    }


def rows(result: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    return []


def lines(s: dict[str, Any]) -> list[str]:
    """The scale mode's own table: one row per env count."""
    out = [
        "",
        f"PPO CartPole frames/s by number of envs ({s['workload']}; medians over seeds):",
        "",
        "| envs | frames/batch | frames | SB3 | xdrl | floor | xdrl/SB3 | xdrl/floor | floor/SB3 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in s["table"]:
        out.append(
            f"| {t['envs']} | {t['frames_per_batch']:,} | {t['frames']:,} | "
            f"{fmt(t['sb3_fps'], 0)} | {fmt(t['xdrl_fps'], 0)} | {fmt(t['torch_loop_fps'], 0)} "
            f"| {fmt(t['ratio'])} | {fmt(t['xdrl_vs_torch_loop'])} | "
            f"{fmt(t['torch_loop_ratio'])} |"
        )
    return out
