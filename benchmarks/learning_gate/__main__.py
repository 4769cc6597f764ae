"""``python -m benchmarks.learning_gate {check,update}``: see :mod:`benchmarks.learning_gate`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.learning_gate.compare import Verdict
from benchmarks.learning_gate.gate import JOBS, REFERENCES, check, update
from benchmarks.learning_gate.presets import GATED, SKIPPED


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.learning_gate",
        description="Short same-seed runs of every preset against committed reference curves.",
    )
    parser.add_argument("command", choices=("check", "update", "list"))
    parser.add_argument(
        "--preset",
        nargs="+",
        default=None,
        metavar="NAME",
        help="presets to run (default: every gated one; `list` shows them)",
    )
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"runs at a time (default {JOBS})")
    parser.add_argument(
        "--references", type=Path, default=REFERENCES, help="folder of <preset>.json references"
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        help="check only: an extra xdrl-train override for every run (repeatable); shows "
        "what the gate says about a change without editing code",
    )
    parser.add_argument(
        "--keep-other-machines",
        action="store_true",
        help="update only: keep the records of other machines (default: replace them all)",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.preset or [] if n not in GATED]
    if unknown:
        why = "; ".join(f"{n}: {SKIPPED.get(n, 'not a gated preset')}" for n in unknown)
        parser.error(f"--preset: {why} (gated: {', '.join(sorted(GATED))})")
    if args.override and args.command != "check":
        parser.error("--override: only for check (a reference is the preset as it is)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when every checked preset passed (or was skipped) or every update ran, else 1."""
    args = parse(argv)
    if args.command == "list":
        for name, preset in sorted(GATED.items()):
            print(f"{name}: {' '.join(preset.overrides)}  (band +-{preset.band:g})")
        for name, why in sorted(SKIPPED.items()):
            print(f"{name}: not gated: {why}")
        return 0
    names = args.preset or sorted(GATED)
    start = time.perf_counter()
    if args.command == "check":

        def show(verdict: Verdict) -> None:
            print(verdict.report(), flush=True)

        verdicts = check(names, args.jobs, args.references, args.override, show)
        failed = [v.preset for v in verdicts if not v.passed]
        print(
            f"learning gate: {len(verdicts) - len(failed)}/{len(verdicts)} passed in "
            f"{time.perf_counter() - start:.0f} s"
            + (f"; failed: {', '.join(failed)}" if failed else "")
        )
        return 1 if failed else 0
    outcome = update(
        names,
        args.jobs,
        args.references,
        args.keep_other_machines,
        lambda name, what: print(f"{name}: {what}", flush=True),
    )
    print(f"learning gate update: {len(outcome)} presets in {time.perf_counter() - start:.0f} s")
    return 1 if any(v.startswith("failed") for v in outcome.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
