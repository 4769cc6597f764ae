"""``xdrl-report PATH... [--metric KEY] [--out DIR]``: the report of the runs under PATHs."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from xdrl.report import MISSING_EXTRA, make_report, missing_extra, report_dir
from xdrl.report.runs import ReportError

DESCRIPTION = """What a sweep over seeds found. Finds every run under PATHs (single runs and
multirun folders), groups runs whose configs differ only in the seed, and writes report.md,
report.json, curves.png and final.png: per group the final metric's mean, std, median and
interquartile mean (IQM) with 95%% stratified bootstrap intervals, IQM learning curves, and the
probability of improvement between groups (Agarwal et al. 2021), one table and panel per
environment. The report folder is replaced as a whole, or not at all. A PATH holding an Optuna
study (optuna.db, an xdrl search's sweep dir) also gets study.md (trials, Pareto set,
parameter importances) and study-params.png (the objective against each parameter)."""


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
    """Run the command; exit 2 on a missing extra, a missing path, an unknown metric, ``--out``
    a file or no runs found, 1 when the report could not be written (one line each)."""
    args = _parser().parse_args(argv)
    if missing_extra():
        print(f"xdrl-report: {MISSING_EXTRA}", file=sys.stderr)
        return 2
    command = shlex.join(["xdrl-report", *(sys.argv[1:] if argv is None else argv)])
    try:
        report = make_report(args.paths, metric=args.metric, out_dir=args.out, command=command)
    except ReportError as err:
        print(f"xdrl-report: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the folder is written whole or not at all (xdrl.report.publish)
        out = report_dir([Path(p) for p in args.paths], args.out)
        why = err.strerror or str(err)
        print(f"xdrl-report: error: {why}: {out} (nothing written; an earlier report there is "
              "unchanged)", file=sys.stderr)  # fmt: skip
        return 1
    for warning in report.warnings:
        print(f"xdrl-report: warning: {warning}", file=sys.stderr)
    print(report.table)
    if report.short:
        print(f"Short runs (unreadable evaluation records skipped): {', '.join(report.short)}")
    print(f"{report.runs} runs; wrote {', '.join(str(p) for p in report.files)}")
    _report_studies([Path(p) for p in args.paths])
    return 0


def _report_studies(paths: list[Path]) -> None:
    """``study.md`` and ``study-params.png`` beside each Optuna study (``optuna.db``) in
    ``paths``: :func:`xdrl.report.study.report_study`."""
    import importlib.util

    from xdrl.report.study import STUDY_FILE, report_study

    for path in paths:
        if not (path / STUDY_FILE).is_file():
            continue
        if importlib.util.find_spec("optuna") is None:
            print(f"xdrl-report: warning: {path / STUDY_FILE} is an Optuna study; pip install "
                  "'xdrl[sweep]' to report it", file=sys.stderr)  # fmt: skip
            continue
        written = report_study(path)
        if written:
            print(f"Optuna study: wrote {', '.join(str(p) for p in written)}")


if __name__ == "__main__":
    sys.exit(main())
