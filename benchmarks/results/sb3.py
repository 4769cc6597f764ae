"""The Stable-Baselines3 side of a comparison, recorded in the same format as xdrl's seeds.

Each seed runs ``scripts/bench_sb3.py <--sb3-args> --seed <s> --frames <N> --threads 1
--final-eval 10`` with SB3's python (``.venv-sb3``); its JSON line is kept as
``<runs>/<preset>/sb3/seed<s>.json`` with the command, and a seed whose file holds the same
command is read back instead of trained again. The final value is the script's
``final_eval_mean`` (10 deterministic episodes at the end); the curve is its ``evals``
(``frames``, ``mean``) where the script's mode records them, else empty.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.contenders import SB3_DRIVER
from benchmarks.results.data import MIN_FINAL_EPISODES, SeedResult
from benchmarks.results.runs import ROOT, in_repo, shown


@dataclass
class Sb3Seed:
    """One SB3 seed: its command and where its JSON line is kept."""

    seed: int
    args: list[str]
    record: Path

    @property
    def command(self) -> str:
        """The command line, as a user types it (the script relative to the repository)."""
        script = SB3_DRIVER.relative_to(ROOT)
        return " ".join(["python", str(script), *self.args])


def seed_plan(sb3_args: list[str], seed: int, frames: int, runs_dir: Path, preset: str) -> Sb3Seed:
    """Seed ``seed``'s SB3 command and record file."""
    args = [*sb3_args, "--seed", str(seed), "--frames", str(frames), "--threads", "1"]
    args += ["--final-eval", str(MIN_FINAL_EPISODES)]
    return Sb3Seed(seed, args, runs_dir / preset / "sb3" / f"seed{seed}.json")


def done(item: Sb3Seed) -> dict[str, Any] | None:
    """The seed's kept record, where it holds the same command (None: it must run)."""
    path = in_repo(item.record)
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return kept if isinstance(kept, dict) and kept.get("command") == item.command else None


def run(item: Sb3Seed, python: Path) -> dict[str, Any]:
    """Run the seed's SB3 command; its JSON line with the command and the process's wall time,
    kept in its record file.

    Raises:
        RuntimeError: the script failed or printed no final evaluation.
    """
    start = time.perf_counter()
    proc = subprocess.run(
        [str(python), str(SB3_DRIVER), *item.args], cwd=ROOT, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"SB3 seed {item.seed} failed:\n{proc.stderr[-3000:]}")
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    if "final_eval_mean" not in line:
        raise RuntimeError(
            f"SB3 seed {item.seed}: bench_sb3.py printed no final_eval_mean (does its mode take "
            "--final-eval?)"
        )
    record = {**line, "command": item.command, "wall_time_s": round(wall, 3)}
    path = in_repo(item.record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def seed_result(item: Sb3Seed, record: dict[str, Any], trained_here: bool) -> SeedResult:
    """The record read as a :class:`SeedResult`."""
    curve = [[int(e["frames"]), float(e["mean"])] for e in record.get("evals", [])]
    return SeedResult(
        seed=item.seed,
        command=item.command,
        frames=int(record["frames"]),
        final=float(record["final_eval_mean"]),
        final_episodes=MIN_FINAL_EPISODES,
        final_source="bench_sb3",
        curve=curve,
        wall_time_s=record.get("wall_time_s"),
        run_dir=shown(item.record),
        trained_here=trained_here,
    )
