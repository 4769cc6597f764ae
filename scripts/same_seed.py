"""Same seed, same numbers: train short runs with two installs of xdrl and compare their CSVs.

A refactor must not change what a run learns. This trains each workload below once with
``--before`` (another checkout's ``xdrl-train``, e.g. the commit before a change) and once with
this checkout's, same seed and overrides, and compares every CSV the runs log, value for value,
except ``timers/`` (wall-clock figures). Prints one line per workload and exits 1 on a difference.

Usage::

    git worktree add ../xdrl-before c1ccce2 && make -C ../xdrl-before install
    python scripts/same_seed.py --before ../xdrl-before/.venv/bin/xdrl-train
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

XDRL_TRAIN = str(Path(sys.executable).with_name("xdrl-train"))
COMMON = ["seed=3", "checkpoint=none", "logging=csv", "num_threads=1"]
WORKLOADS = {
    "cartpole_ppo": ["experiment=cartpole_ppo", "total_frames=8192", "eval.interval_frames=4096"],
    "pendulum_sac": ["experiment=pendulum_sac", "total_frames=2048", "eval.interval_frames=1024"],
    "cartpole_dqn": ["experiment=cartpole_dqn", "total_frames=4096", "eval.interval_frames=2048"],
    "atari_ppo": ["experiment=atari_ppo", "total_frames=8192", "eval=none"],
}


def train(executable: str, overrides: list[str], run_dir: Path) -> dict[str, str]:
    """Run one job; ``{csv path relative to the scalars folder: its text}``, timers left out."""
    command = [executable, *overrides, *COMMON, f"run_dir={run_dir}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return {
        str(path.relative_to(scalars)): path.read_text()
        for scalars in run_dir.glob("logs/*/scalars")
        for path in sorted(scalars.rglob("*.csv"))
        if not path.relative_to(scalars).parts[0] == "timers"
    }


def compare(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two runs' CSVs (missing files, then differing ones)."""
    missing = sorted(before.keys() ^ after.keys())
    differing = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    return [f"only in one run: {k}" for k in missing] + [f"differs: {k}" for k in differing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the other checkout's xdrl-train")
    parser.add_argument("--after", default=XDRL_TRAIN, help="this checkout's xdrl-train")
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS), help=", ".join(WORKLOADS))
    args = parser.parse_args()
    if unknown := [w for w in args.workloads if w not in WORKLOADS]:
        parser.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    failed = False
    with tempfile.TemporaryDirectory(prefix="xdrl-same-seed-") as tmp:
        for name in args.workloads:
            runs = [
                train(exe, WORKLOADS[name], Path(tmp) / f"{name}-{side}")
                for side, exe in (("before", args.before), ("after", args.after))
            ]
            problems = compare(*runs)
            failed |= bool(problems)
            verdict = "identical" if not problems else "DIFFERENT: " + "; ".join(problems)
            print(f"{name}: {len(runs[1])} CSV files {verdict}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
