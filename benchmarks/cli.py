"""Benchmark xdrl-train against Stable-Baselines3 on the same workloads, side by side.

SB3 runs in its own venv (``.venv-sb3``: ``make bench-venv``) through ``scripts/bench_sb3.py``;
xdrl runs as ``xdrl-train`` subprocesses (the one beside this python) and, for the hook-overhead
and evaluation modes, in this process. For every seed the contenders run one after the other,
the order rotated with the seed, so machine load hits all alike; the ratios are the figures to
read. Each mode is a module of ``benchmarks/modes/``; the targets are ``benchmarks/targets.yaml``.

Usage:
    .venv/bin/python -m benchmarks --mode all --seeds 3      # ~30 min on 2 quiet cores
    .venv/bin/python -m benchmarks --mode ppo-throughput --quick
    make bench ARGS="--mode sac,td3,dqn,ppo-throughput --seeds 3 --reps 3"
Writes ``bench-results/bench.json`` and ``bench-results/bench.md``.

``--mode results`` is a command of its own (:mod:`benchmarks.results`: a preset's seeds trained,
evaluated and written as a data file of the results page), with its own options:
    .venv/bin/python -m benchmarks --mode results --preset hopper_ppo --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from benchmarks import contenders
from benchmarks.modes import MODES, time_to_475
from benchmarks.report import TARGETS_FILE, load_targets, markdown
from benchmarks.runner import Options, run_modes


def machine(sb3_python: Path) -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
        platform.processor(),
    )
    versions = contenders.versions(
        sys.executable, ["torch", "torchrl", "tensordict", "gymnasium"]
    ) | contenders.versions(sb3_python, ["stable_baselines3"])
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "versions": versions,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--mode",
        default="all",
        help=f"'all' or a comma list of: {', '.join(MODES)}; or 'results' (a command of its own: "
        "--mode results --help)",
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds per mode (0, 1, ...)")
    p.add_argument("--quick", action="store_true", help="smaller workloads (smoke test)")
    p.add_argument(
        "--reps",
        type=int,
        default=1,
        help="rounds of every contender per seed, alternated; each figure is the median of its "
        "rounds (a busy or noisy machine: 3)",
    )
    p.add_argument(
        "--threads",
        default=None,
        help="thread counts SB3 (and the SAC floor) try where the mode takes their best, e.g. "
        "'1' on a machine whose other work makes 2 threads crawl (default: 1,2)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="another checkout's xdrl-train (e.g. main's .venv/bin/xdrl-train), run alongside "
        "in the throughput modes: before/after figures from one run",
    )
    p.add_argument(
        "--baseline-overrides",
        default="",
        help="space-separated overrides added to the baseline's runs (e.g. 'num_threads=1')",
    )
    p.add_argument(
        "--sb3-python",
        default=str(contenders.SB3_PYTHON),
        help="the python with stable-baselines3 (default: .venv-sb3's, from `make bench-venv`)",
    )
    p.add_argument("--targets", default=str(TARGETS_FILE), help="the targets file (YAML)")
    p.add_argument("--out", default="bench-results", help="output folder")
    p.add_argument(
        "--report-only", action="store_true", help="rewrite bench.md from bench.json (no runs)"
    )
    return p


def _options(args: argparse.Namespace, p: argparse.ArgumentParser) -> Options:
    if args.reps < 1:
        p.error("--reps must be at least 1")
    return Options(
        reps=args.reps,
        quick=args.quick,
        sb3_threads=tuple(int(n) for n in args.threads.split(",")) if args.threads else None,
        baseline=Path(args.baseline) if args.baseline else None,
        baseline_overrides=args.baseline_overrides.split(),
        sb3_python=Path(args.sb3_python),
    )


def _write(out: Path, results: dict[str, Any], targets: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    report = markdown(results, results.get("command", ""), MODES, targets)
    (out / "bench.md").write_text(report)
    print(report)


def _results_argv(argv: list[str]) -> list[str] | None:
    """The options of ``--mode results`` (the rest of the line), or None for another mode."""
    for i, arg in enumerate(argv):
        if arg == "--mode" and argv[i + 1 : i + 2] == ["results"]:
            return argv[:i] + argv[i + 2 :]
        if arg == "--mode=results":
            return argv[:i] + argv[i + 1 :]
    return None


def main(argv: list[str] | None = None) -> None:
    results_argv = _results_argv(sys.argv[1:] if argv is None else argv)
    if results_argv is not None:
        from benchmarks.results.cli import run

        raise SystemExit(run(results_argv))
    p = parser()
    args = p.parse_args(argv)
    out = Path(args.out)
    targets = load_targets(Path(args.targets))
    if args.report_only:
        saved = json.loads((out / "bench.json").read_text())
        if "time-to-475" in saved["modes"]:
            t = saved["modes"]["time-to-475"]
            t.update(time_to_475.summary(t["runs"]))
        _write(out, saved, saved.get("targets", targets))
        return
    names = list(MODES) if args.mode == "all" else [m.strip() for m in args.mode.split(",")]
    unknown = [m for m in names if m not in MODES]
    if unknown:
        p.error(f"unknown mode(s) {unknown}; choose from {list(MODES)} or 'all'")
    options = _options(args, p)
    if any(MODES[n].needs_sb3 for n in names):
        contenders.check_sb3_venv(options.sb3_python)
    contenders.xdrl_train()  # fails now, not after the first mode, where none is beside python
    results: dict[str, Any] = {
        "command": "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(options.sb3_python),
        "quick": args.quick,
        "reps": args.reps,
        "targets": targets,
    }
    results["modes"] = run_modes({n: MODES[n] for n in names}, options, list(range(args.seeds)))
    results["load_average_end"] = os.getloadavg()
    _write(out, results, targets)


if __name__ == "__main__":
    main()
