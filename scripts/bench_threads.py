"""Measure a preset's training speed at several ``num_threads`` values, on a quiet machine and
beside a busy process, so that a preset pins a thread count only where ``auto`` does worse.

Each round runs every value once (alternated, order rotated by round) with the same seed and
frame budget; beside-a-job rounds start one busy loop (``python -c 'while 1: pass'``) first and
stop it after. Each row records frames/s (``summary.json``, training time only), the thread count
the run used (``torch_threads``: what ``auto`` resolved to) and the 1-minute load average before
the run. The machine's other work is not controlled: read the load averages before the ratios.

Usage:
    python scripts/bench_threads.py --experiment atari_ppo --values 2,auto --reps 3
    python scripts/bench_threads.py --frames 8192 --conditions busy --json out.json
    python scripts/bench_threads.py --experiment atari_dqn --frames 8192 \
        --override algorithm.build.init_random_frames=4096
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

XDRL_TRAIN = Path(sys.executable).with_name("xdrl-train")
CONDITIONS = ("quiet", "busy")  # busy: one busy loop beside the run


def train(
    experiment: str, value: str, frames: int, seed: int, overrides: list[str]
) -> dict[str, Any]:
    """One ``xdrl-train`` run without evaluation, logging or checkpoints; its summary."""
    run_dir = Path(tempfile.mkdtemp(prefix="xdrl-threads-"))
    cmd = [
        str(XDRL_TRAIN),
        f"experiment={experiment}",
        f"total_frames={frames}",
        f"num_threads={value}",
        f"seed={seed}",
        "eval=none",
        "logging=none",
        "checkpoint=none",
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        summary_path = run_dir / "summary.json"
        if proc.returncode or not summary_path.exists():
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
        return json.loads(summary_path.read_text())
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def measure(
    experiment: str,
    values: list[str],
    frames: int,
    reps: int,
    condition: str,
    seed: int,
    overrides: list[str],
) -> list[dict[str, Any]]:
    """``reps`` rounds of every value under ``condition``; one row per run."""
    spinner = None
    if condition == "busy":
        spinner = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    rows = []
    try:
        for rep in range(reps):
            order = values[rep % len(values) :] + values[: rep % len(values)]
            for value in order:
                load = os.getloadavg()[0]
                summary = train(experiment, value, frames, seed, overrides)
                segment = summary["segments"][-1] if "segments" in summary else {}
                row = {
                    "condition": condition,
                    "rep": rep,
                    "num_threads": value,
                    "torch_threads": segment.get("torch_threads"),
                    "frames_per_second": summary["frames_per_second"],
                    "load_average_before": round(load, 2),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return rows


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median frames/s and load average per (condition, value)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["condition"], row["num_threads"]), []).append(row)
    return [
        {
            "condition": condition,
            "num_threads": value,
            "threads_used": sorted({r["torch_threads"] for r in group}, key=str),
            "median_frames_per_second": statistics.median(r["frames_per_second"] for r in group),
            "frames_per_second": [r["frames_per_second"] for r in group],
            "load_averages": [r["load_average_before"] for r in group],
        }
        for (condition, value), group in groups.items()
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="atari_ppo", help="a conf/experiment preset")
    parser.add_argument("--values", default="2,auto", help="num_threads values, comma-separated")
    parser.add_argument("--frames", type=int, default=16_384, help="total_frames per run")
    parser.add_argument("--reps", type=int, default=3, help="rounds per condition")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--conditions", default="quiet,busy", help="quiet and/or busy (one busy loop beside)"
    )
    parser.add_argument(
        "--override", action="append", default=[], help="an extra xdrl-train override (repeat)"
    )
    parser.add_argument("--json", type=Path, help="write rows and medians here")
    args = parser.parse_args(argv)
    values = args.values.split(",")
    conditions = args.conditions.split(",")
    unknown = set(conditions) - set(CONDITIONS)
    if unknown:
        parser.error(f"--conditions: unknown {sorted(unknown)}; choose from {CONDITIONS}")
    rows = []
    for condition in conditions:
        rows += measure(
            args.experiment, values, args.frames, args.reps, condition, args.seed, args.override
        )
    result = {"command": sys.argv, "cpus": os.cpu_count(), "rows": rows, "medians": medians(rows)}
    for line in result["medians"]:
        print(json.dumps(line))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
