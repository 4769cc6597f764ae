"""``time-to-475``, as a user feels it: the whole ``xdrl-train experiment=cartpole_ppo`` command
(start-up, evaluations, its whole budget; final deterministic eval mean >= 475) against SB3 with
RL-Zoo's settings from process start (imports included) to its first 20-episode deterministic
eval >= 475, evaluating every 10k frames."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks import contenders as c
from benchmarks.modes.ppo_throughput import PRESET
from benchmarks.report import check, fmt, row
from benchmarks.runner import Options, Row, alternated, median


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    sb3_budget = 50_000 if options.quick else 100_000
    rows = []
    sb3_args = ["--frames", str(sb3_budget), "--eval-interval", "10000", "--episodes", "20"]
    for seed in seeds:
        contenders: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.sb3(
                options.sb3_python, "time-to-475", s, *sb3_args, "--launched-at", repr(time.time())
            ),
            "xdrl": lambda s=seed: _xdrl_whole_command(s),
        }
        out = alternated(
            contenders,
            seed,
            reps=1,  # whole commands with their evaluation timelines: one each
        )
        s, x = out["sb3"], out["xdrl"]
        rows.append(
            {
                "seed": seed,
                "sb3_time_s": s["time_to_475_wall_s"],
                "sb3_frames": s["frames_to_475"],
                "xdrl_time_s": x["wall_s"],
                "xdrl_frames": x["frames"],
                "xdrl_final_eval_mean": x["final_eval_mean"],
            }
        )
        print(f"  time-to-475 seed {seed}: {rows[-1]}", flush=True)
    return {"sb3_budget_frames": sb3_budget, "runs": rows, **summary(rows)}


def _xdrl_whole_command(seed: int) -> dict[str, Any]:
    """Wall time of ``xdrl-train experiment=cartpole_ppo seed=N`` and its final eval mean."""
    start = time.perf_counter()
    out = c.xdrl(PRESET, seed, checkpoint=True)
    return {
        "wall_s": time.perf_counter() - start,
        "frames": out["total_frames"],
        "final_eval_mean": (out.get("eval") or {}).get(c.EVAL_KEY),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds; an SB3 seed that never reached 475 counts as infinite time, an xdrl
    seed whose final eval mean is below 475 makes the target unmet."""
    sb3_t = statistics.median(
        [r["sb3_time_s"] if r["sb3_time_s"] is not None else float("inf") for r in rows]
    )
    sb3_time = None if sb3_t == float("inf") else sb3_t
    x_t = median(r["xdrl_time_s"] for r in rows)
    solved = [(r.get("xdrl_final_eval_mean") or 0.0) >= 475 for r in rows]
    return {
        "sb3_time_s": sb3_time,
        "xdrl_time_s": x_t,
        "ratio": x_t / sb3_time if sb3_time and x_t else None,
        "xdrl_all_solved": all(solved),
        "unreached": {
            "sb3": sum(r["sb3_time_s"] is None for r in rows),
            "xdrl": solved.count(False),
        },
        "note": "xdrl: the whole command (start-up, evals, every frame of the preset's budget) "
        "and its final deterministic eval mean; SB3: process start to its first 20-episode "
        "eval >= 475 (eval every 10k frames), a seed that never reached it counts as infinite",
    }


def _met(t: dict[str, Any], targets: dict[str, Any]) -> tuple[str, bool | None]:
    """Every xdrl seed solved and the ratio within its target (met where SB3 never got there)."""
    text, met = check(targets, "ratio", t["ratio"])
    if not t.get("xdrl_all_solved", False) or t["xdrl_time_s"] is None:
        return text, False
    return text, True if t["sb3_time_s"] is None else met


def rows(t: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    unreached = t.get("unreached", {})
    return [
        row(
            "time to 475, s: the whole `xdrl-train experiment=cartpole_ppo` (final eval mean "
            f"< 475 on {unreached.get('xdrl', '?')} seeds) vs SB3 from process start to its "
            f"first 20-episode eval >= 475, eval every 10k (never on {unreached.get('sb3', '?')}); "
            "medians",
            fmt(t["sb3_time_s"]) if t["sb3_time_s"] is not None else "not reached",
            fmt(t["xdrl_time_s"]),
            fmt(t["ratio"]),
            _met(t, targets),
        )
    ]
