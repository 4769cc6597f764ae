"""``python -m xdrl.pareto SWEEP_OR_RUN_DIR ... [--out DIR]``: the Pareto report of runs from
any number of sweeps or single runs (e.g. a plain ``env.reward_weights=...`` sweep)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xdrl.pareto.report import pareto_report
from xdrl.pareto.runs import read_job, read_sweep


def main(argv: list[str] | None = None) -> int:
    """Write ``pareto.json``/``pareto.png`` and print the Markdown section; 1 when no front."""
    parser = argparse.ArgumentParser(prog="python -m xdrl.pareto", description=__doc__)
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep folders or run folders")
    parser.add_argument(
        "--out", type=Path, default=None, help="report folder (default: <first dir>/report)"
    )
    args = parser.parse_args(argv)
    runs = []
    for folder in args.dirs:
        single = read_job(folder)
        runs += [single] if single is not None else read_sweep(folder)
    text = pareto_report(runs, args.out or args.dirs[0] / "report")
    if text is None:
        print("no multi-objective weight sweep among these runs", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
