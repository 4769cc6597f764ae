"""The one alternate-and-median runner, the options of a bench run, and the loop over modes.

Every mode hands :func:`alternated` one callable per contender; each runs ``reps`` times, round by
round, the order rotated by seed and round so no contender always goes first (machine load hits
all alike), and each contender's figure is the median of its rounds (:func:`median_result`).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import contenders
from benchmarks.contenders import SB3_PYTHON

Row = tuple[str, str, str, str, str, "bool | None"]  # measure, SB3, xdrl, ratio, target, met


@dataclass
class Options:
    """What the command line sets for every mode (no module-level globals)."""

    reps: int = 1  # rounds of every contender per seed (--reps)
    quick: bool = False  # smaller workloads (--quick)
    sb3_threads: tuple[int, ...] | None = None  # --threads: replaces the counts SB3 tries
    baseline: Path | None = None  # --baseline: another checkout's xdrl-train, run alongside
    baseline_overrides: list[str] = field(default_factory=list)
    sb3_python: Path = SB3_PYTHON  # --sb3-python: the python with stable-baselines3


@dataclass
class Mode:
    """One benchmark mode: ``run(options, seeds) -> results``, ``rows(results, targets)`` for the
    summary table, and optionally ``lines(results)``: Markdown of its own after the table."""

    run: Callable[[Options, list[int]], dict[str, Any]]
    rows: Callable[[dict[str, Any], dict[str, Any]], list[Row]]
    lines: Callable[[dict[str, Any]], list[str]] | None = None
    needs_sb3: bool = True  # False: runs without SB3's venv (startup, hook-overhead)


def alternated(runs: Mapping[str, Callable[..., Any]], seed: int, reps: int = 1) -> dict[str, Any]:
    """Run each callable ``reps`` times, round by round, the order rotated by seed and round;
    each result is its median over the rounds (:func:`median_result`)."""
    names = list(runs)
    results: dict[str, list[Any]] = {name: [] for name in names}
    for round_ in range(reps):
        shift = (seed + round_) % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(runs[name]())
    return {name: median_result(results[name]) for name in names}


def median_result(values: list[Any]) -> Any:
    """The median of one contender's repeated results: of the numbers; of SB3's frames/s per
    thread count, then the best of those medians; of a run summary's ``frames_per_second`` (the
    rest of the summary from the run nearest below that median)."""
    if len(values) == 1:
        return values[0]
    first = values[0]
    if isinstance(first, int | float):
        return statistics.median(values)
    if "best" in first:
        per_thread = {k: statistics.median(v[k] for v in values) for k in first if k != "best"}
        return {"best": max(per_thread.values()), **per_thread}
    fps = statistics.median(v["frames_per_second"] for v in values)
    below = [v for v in values if v["frames_per_second"] <= fps]
    return {**max(below, key=lambda v: v["frames_per_second"]), "frames_per_second": fps}


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None (None when none is)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def medians(rows: list[dict[str, Any]], *extra: str) -> dict[str, float | None]:
    """Per-seed medians of the fps and ratio columns every throughput mode reports."""
    keys = ("sb3_fps", "xdrl_fps", "torch_loop_fps", "ratio", "torch_loop_ratio", *extra)
    return {key: median(r.get(key) for r in rows) for key in keys}


def baseline_keys(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """The baseline's columns, where ``--baseline`` ran."""
    return ("baseline_fps", "baseline_ratio") if rows and "baseline_fps" in rows[0] else ()


def add_baseline(
    runs: dict[str, Callable[..., Any]], options: Options, overrides: list[str], seed: int
) -> None:
    """With ``--baseline``: add the other checkout's ``xdrl-train`` on ``overrides`` (and
    ``--baseline-overrides``) to ``runs``, as a contender giving its frames/s."""
    if options.baseline:
        baseline = [*overrides, *options.baseline_overrides]
        runs["baseline"] = lambda: contenders.xdrl(baseline, seed, executable=options.baseline)[
            "frames_per_second"
        ]


def baseline_columns(fps: Mapping[str, Any], sb3_fps: float) -> dict[str, float]:
    """The baseline's row columns (none where ``--baseline`` did not run)."""
    if "baseline" not in fps:
        return {}
    return {"baseline_fps": fps["baseline"], "baseline_ratio": fps["baseline"] / sb3_fps}


def sb3_xdrl_row(seed: int, fps: Mapping[str, float]) -> dict[str, Any]:
    """A seed's row where SB3 and xdrl race without a torch loop: their frames/s and ratio, the
    load, and the baseline's columns."""
    return {
        "seed": seed,
        "sb3_fps": fps["sb3"],
        "xdrl_fps": fps["xdrl"],
        "ratio": fps["xdrl"] / fps["sb3"],
        "torch_loop_fps": None,
        "torch_loop_ratio": None,
        "load_average": os.getloadavg()[0],
        **baseline_columns(fps, fps["sb3"]),
    }


def run_modes(
    modes: dict[str, Mode], options: Options, seeds: list[int], log: Callable[[str], None] = print
) -> dict[str, dict[str, Any]]:
    """Each mode's results, in order, with the seconds it took as ``bench_seconds``."""
    out: dict[str, dict[str, Any]] = {}
    for name, mode in modes.items():
        log(f"[{name}]")
        start = time.perf_counter()
        out[name] = mode.run(options, seeds)
        out[name]["bench_seconds"] = round(time.perf_counter() - start, 1)
    return out
