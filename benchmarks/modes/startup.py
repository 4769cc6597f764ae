"""``startup``: ``xdrl-train --help`` and ``--cfg job`` (median seconds) and the peak memory of
the default run."""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks import contenders as c
from benchmarks.report import check, fmt, row
from benchmarks.runner import Options, Row


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    reps = 3 if options.quick else 5
    out: dict[str, Any] = {}
    for name, args in {"help": ["--help"], "cfg_job": ["--cfg", "job"]}.items():
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            c.timed_command(args)
            times.append(time.perf_counter() - start)
        out[f"{name}_median_s"] = statistics.median(times)
    frames = 4_096 if options.quick else 8_192
    x = c.xdrl([f"total_frames={frames}"], seeds[0])
    out.update(default_run_frames=frames, default_run_peak_rss_mb=x["peak_rss_mb"])
    return out


def rows(s: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    frames = s["default_run_frames"]
    figures = [
        ("help_median_s", "`xdrl-train --help`, s (median)", 2),
        ("cfg_job_median_s", "`xdrl-train --cfg job`, s (median)", 2),
        ("default_run_peak_rss_mb", f"peak RSS of the default run ({frames:,} frames), MB", 0),
    ]
    return [
        row(title, "-", fmt(s[key], digits), "-", check(targets, key, s[key]))
        for key, title, digits in figures
    ]
