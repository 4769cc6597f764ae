"""``python -m benchmarks --mode results ...`` (= ``python -m benchmarks.results run ...``) and
``python -m benchmarks.results page``: see :mod:`benchmarks.results`.

Usage:
    python -m benchmarks --mode results --preset hopper_ppo --seeds 0 1 2
    python -m benchmarks --mode results --preset hopper_ppo --frames 200000 --parallel 2
    python -m benchmarks --mode results --preset hopper_sac --seeds 0 1 2 --frames 100000 \\
        --contender sb3 --sb3-args "sac --sac-env-id Hopper-v5 --learning-starts 10000"
    python -m benchmarks.results page
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmarks.contenders import SB3_PYTHON
from benchmarks.results import data, page, runs, sb3

PROG = "python -m benchmarks --mode results"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Train (or adopt) a preset's seeds, evaluate each at the end over >= 10 "
        "deterministic episodes and write its data file of the results page.",
    )
    p.add_argument("--preset", required=True, help="a preset of conf/experiment/ (its name)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="default: 0 1 2")
    p.add_argument(
        "--frames",
        type=int,
        default=None,
        help="frames per seed, a fraction of the preset's budget (default: the whole budget); "
        "stated in the output and the data file",
    )
    p.add_argument("--parallel", type=int, default=1, help="seeds at a time (each 1 thread)")
    p.add_argument("--contender", choices=data.CONTENDERS, default="xdrl")
    p.add_argument(
        "--sb3-args",
        default=None,
        help="--contender sb3: scripts/bench_sb3.py's mode and options, without --seed, "
        "--frames, --threads, --final-eval (the harness adds them)",
    )
    p.add_argument("--sb3-python", type=Path, default=SB3_PYTHON, help="SB3's python")
    p.add_argument(
        "--extend",
        action="store_true",
        help="train on a run dir trained towards another budget (its schedules are re-anchored)",
    )
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=runs.RUNS_DIR,
        help=f"where the run dirs are (relative: to the repository; default {runs.RUNS_DIR})",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=data.DATA_DIR,
        help="where the data file goes (default: benchmarks/results/, which also rewrites the "
        "results page)",
    )
    return p


def _fail(key: str, message: str) -> int:
    print(f"{PROG}: config error: {key}: {message}", file=sys.stderr)
    return 2


def _check(args: argparse.Namespace, preset: runs.Preset) -> str | None:
    """The first bad option as ``key: what; fix`` (None: none)."""
    if args.frames is not None and not 0 < args.frames <= preset.budget_frames:
        return (
            f"--frames: {args.frames} is not a fraction of {preset.name}'s budget of "
            f"{preset.budget_frames:,} frames; give 1 to {preset.budget_frames}"
        )
    if args.parallel < 1:
        return "--parallel: must be at least 1; e.g. --parallel 2"
    if len(set(args.seeds)) != len(args.seeds):
        return f"--seeds: {args.seeds} names a seed twice; name each once"
    if args.contender == "sb3" and not args.sb3_args:
        return (
            "--sb3-args: --contender sb3 needs the script's mode and options, e.g. "
            '--sb3-args "sac --sac-env-id Hopper-v5"'
        )
    if args.contender == "xdrl" and args.sb3_args:
        return "--sb3-args: only with --contender sb3"
    return None


def run(argv: list[str] | None = None) -> int:
    """Train or adopt every seed, read them back and write the data file; 0 when every seed
    completed, 2 on bad input or a refused run dir (nothing trained), 1 when a seed failed or
    stopped (the same command continues it)."""
    args = parser().parse_args(argv)
    try:
        preset = runs.read_preset(args.preset)
    except Exception as err:  # noqa: BLE001 - Hydra's composition errors: one line
        return _fail("--preset", f"{args.preset!r} does not compose ({str(err).splitlines()[0]})")
    problem = _check(args, preset)
    if problem is not None:
        key, _, message = problem.partition(": ")
        return _fail(key, message)
    frames = args.frames or preset.budget_frames
    budget = f"{frames:,} of {preset.budget_frames:,} frames ({frames / preset.budget_frames:.1%})"
    print(f"{preset.name} ({preset.env}, {preset.algorithm}), {args.contender}: {budget}, seeds "
          f"{' '.join(map(str, args.seeds))}", flush=True)  # fmt: skip
    command = " ".join([PROG, *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    code = runs.code_state()  # the code the seeds train with: read before, not after, they run
    if args.contender == "sb3":
        seeds = _sb3_seeds(args, preset, frames)
    else:
        seeds = _xdrl_seeds(args, preset, frames)
    if isinstance(seeds, int):
        return seeds
    result = _result(preset, args.contender, frames, command, code, seeds)
    path = data.write(result, args.out)
    for s in seeds:
        wall = "?" if s.wall_time_s is None else f"{s.wall_time_s:,.0f}"
        print(f"seed {s.seed}: final {s.final:,.2f} over {s.final_episodes} deterministic "
              f"episodes at {s.frames:,} frames; wall time {wall} s")  # fmt: skip
    print(f"wrote {path}")
    if args.out.resolve() == data.DATA_DIR:
        written = page.generate(readme=page.README)
        print("rewrote " + ", ".join(str(p.relative_to(runs.ROOT)) for p in written))
    return 0


def _xdrl_seeds(
    args: argparse.Namespace, preset: runs.Preset, frames: int
) -> list[data.SeedResult] | int:
    """Plan every seed (refusing before anything trains), train those that need it, read all."""
    plans = []
    for seed in args.seeds:
        try:
            plans.append(runs.plan(preset, seed, args.runs_dir, frames, args.extend))
        except runs.Refused as err:
            return _fail(err.key, str(err).partition(": ")[2])
    for item in plans:
        if item.action == "adopt":
            print(f"seed {item.seed}: {item.run_dir} is complete; read as it is", flush=True)

    def log_of(item: runs.Plan) -> Path:
        return runs.in_repo(item.run_dir).with_name(f"{item.run_dir.name}.out")

    try:
        codes = runs.run_all(plans, args.parallel, log_of, lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the runs checkpointed where they stopped: the same "
              "command continues them", file=sys.stderr)  # fmt: skip
        return 130
    failed = [item for item in plans if codes[item.seed]]
    for item in failed:
        code, log = codes[item.seed], log_of(item)
        print(f"{PROG}: seed {item.seed}: xdrl-train exited {code}; see {log}; the same "
              "command continues a stopped run", file=sys.stderr)  # fmt: skip
    if failed:
        return 1
    return [runs.gather(preset, p, trained_here=p.action != "adopt") for p in plans]


def _sb3_seeds(
    args: argparse.Namespace, preset: runs.Preset, frames: int
) -> list[data.SeedResult] | int:
    """Run (or read back) every SB3 seed, ``--parallel`` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks.contenders import check_sb3_venv

    check_sb3_venv(args.sb3_python)
    sb3_args = shlex.split(args.sb3_args)
    items = [sb3.seed_plan(sb3_args, s, frames, args.runs_dir, preset.name) for s in args.seeds]

    def one(item: sb3.Sb3Seed) -> data.SeedResult:
        kept = sb3.done(item)
        if kept is not None:
            print(f"seed {item.seed}: {item.record} holds this command's result; read as it is")
            return sb3.seed_result(item, kept, trained_here=False)
        print(f"seed {item.seed}: {item.command}", flush=True)
        return sb3.seed_result(item, sb3.run(item, args.sb3_python), trained_here=True)

    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        return list(pool.map(one, items))


def _result(
    preset: runs.Preset,
    contender: str,
    frames: int,
    command: str,
    code: dict[str, Any],
    seeds: list[data.SeedResult],
) -> data.Result:
    """The data file's content, with the checkout's ``code`` state and this machine."""
    from benchmarks.learning_gate.record import fingerprint, versions

    return data.Result(
        preset=preset.name,
        contender=contender,
        env=preset.env,
        algorithm=preset.algorithm,
        budget_frames=preset.budget_frames,
        frames=frames,
        command=command,
        code=code,
        machine={"cpu": fingerprint()["cpu"], "cores": os.cpu_count()},
        seeds=seeds,
        versions=versions(),
    )


def page_main(argv: list[str] | None = None) -> int:
    """``page``: rewrite the results table and figures from the committed data files."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.results page",
        description="Rewrite docs/results.md's table, README's short one and docs/results/*.svg "
        "from the data files.",
    )
    p.add_argument("--data", type=Path, default=data.DATA_DIR, help="folder of the data files")
    p.add_argument("--page", type=Path, default=page.PAGE, help="the Markdown page")
    p.add_argument("--figures", type=Path, default=page.FIGURES, help="folder of the figures")
    p.add_argument("--readme", type=Path, default=page.README, help="README with the short table")
    args = p.parse_args(argv)
    for path in page.generate(args.data, args.page, args.figures, readme=args.readme):
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``run ...`` or ``page ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("run", "page"):
        print("usage: python -m benchmarks.results {run,page} ...", file=sys.stderr)
        return 2
    return run(argv[1:]) if argv[0] == "run" else page_main(argv[1:])
