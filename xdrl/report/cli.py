"""``xdrl-report PATH... [--metric KEY] [--out DIR]``: the report of the runs under PATHs."""

from __future__ import annotations

import argparse
import shlex
import sys

from xdrl.report import MISSING_EXTRA, make_report, missing_extra

DESCRIPTION = """What a sweep over seeds found. Finds every run under PATHs (single runs and
multirun folders), groups runs whose configs differ only in the seed, and writes report.md,
report.json, curves.png and final.png: per group the final metric's mean, std, median and
interquartile mean (IQM) with 95%% stratified bootstrap intervals, IQM learning curves, and the
probability of improvement between groups (Agarwal et al. 2021)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xdrl-report", description=DESCRIPTION)
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run or sweep folders")
    parser.add_argument(
        "--metric",
        default=None,
        help="evaluation key to compare (default: eval/deterministic/reward/episode_reward_mean)",
    )
    parser.add_argument("--out", default=None, help="output folder (default: <first PATH>/report)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; exit 2 on a missing extra or path, 1 when no run is found."""
    args = _parser().parse_args(argv)
    if missing_extra():
        print(f"xdrl-report: {MISSING_EXTRA}", file=sys.stderr)
        return 2
    command = shlex.join(["xdrl-report", *(sys.argv[1:] if argv is None else argv)])
    try:
        report = make_report(args.paths, metric=args.metric, out_dir=args.out, command=command)
    except FileNotFoundError as err:
        print(f"xdrl-report: {err}", file=sys.stderr)
        return 2
    except LookupError as err:
        print(f"xdrl-report: {err}", file=sys.stderr)
        return 1
    print(report.table)
    print(f"{report.runs} runs; wrote {', '.join(str(p) for p in report.files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
