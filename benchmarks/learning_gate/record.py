"""One gated run: ``xdrl-train`` on a preset's short budget, its curves read back from its CSVs,
and the machine and libraries it ran on.

A record holds what the comparison needs and nothing that moves without cause: the overrides,
the frames, every ``eval/`` curve, a few rows of every ``train/.../loss*`` curve, the versions of
the libraries that shape the numerics and the machine's fingerprint (CPU model, torch's kernel
level, the ISA flags torch's kernels dispatch on). No timestamps, no wall times.
"""

from __future__ import annotations

import csv
import importlib.metadata
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.contenders import xdrl_train
from benchmarks.learning_gate.presets import GatedPreset

ROOT = Path(__file__).resolve().parents[2]
TRAIN_ROWS = 4  # rows kept of each train loss curve: evenly spaced, first and last included
# Packages whose versions change the numbers a run writes.
PACKAGES = (
    "torch",
    "torchrl",
    "tensordict",
    "numpy",
    "gymnasium",
    "box2d",
    "mujoco",
    "ale-py",
    "mo-gymnasium",
)
# CPU features torch's CPU kernels (oneDNN, its vectorized ops, fbgemm) choose their code by.
ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)

Curves = dict[str, list[list[float]]]  # metric -> [[frames, value], ...]


class RunFailed(RuntimeError):
    """xdrl-train exited non-zero or wrote no curves."""


@dataclass
class RunResult:
    """What one gated run wrote: its frames and curves."""

    frames: int
    eval: Curves
    train: Curves
    wall_s: float = field(default=0.0, compare=False)  # shown, never stored in a reference


def fingerprint() -> dict[str, Any]:
    """This machine, as far as fp32 kernels can tell: CPU model, torch's CPU capability (the
    kernel level it dispatches to), the relevant ISA flags, and the architecture."""
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")),
        platform.processor(),
    )
    flags_line = next((ln.split(":", 1)[1] for ln in lines if ln.startswith("flags")), "")
    flags = set(flags_line.split())
    return {
        "cpu": model,
        "machine": platform.machine(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "isa_flags": [f for f in ISA_FLAGS if f in flags],
    }


def versions() -> dict[str, str]:
    """Python's and every installed package of :data:`PACKAGES`' version."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def code_version() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes to tracked files), or
    ``unknown`` outside git."""
    try:
        commit = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def _git(*args: str) -> str:
    """What ``git args`` prints in the checkout, stripped."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run_preset(preset: GatedPreset, run_dir: Path, extra: list[str] | None = None) -> RunResult:
    """Train ``preset`` on its gate budget in ``run_dir`` through the ``xdrl-train`` beside this
    python; ``extra`` overrides go last (the gate's own test changes a loss coefficient so)."""
    args = [
        str(xdrl_train()),
        *preset.all_overrides(),
        *(extra or []),
        f"hydra.run.dir={run_dir}",
    ]
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:]) or "no output"
        raise RunFailed(f"{preset.name}: xdrl-train exited {proc.returncode}:\n{tail}")
    result = read_run(run_dir)
    result.wall_s = time.perf_counter() - start
    return result


def read_run(run_dir: Path) -> RunResult:
    """The curves a finished run dir's CSV logs hold, and its frames from ``summary.json``."""
    import json

    scalars = sorted(run_dir.glob("logs/*/scalars"))
    if len(scalars) != 1:
        raise RunFailed(f"{run_dir}: expected one logs/<name>/scalars folder, found {len(scalars)}")
    summary = json.loads((run_dir / "summary.json").read_text())
    eval_curves = _curves(scalars[0], "eval")
    if not eval_curves:
        raise RunFailed(f"{run_dir}: no eval/ curves (is evaluation enabled?)")
    train = {
        name: _spaced(rows)
        for name, rows in _curves(scalars[0], "train").items()
        if name.rsplit("/", 1)[-1].startswith("loss")
    }
    return RunResult(frames=int(summary["total_frames"]), eval=eval_curves, train=train)


def _curves(scalars: Path, group: str) -> Curves:
    """Every ``<group>/**.csv`` under ``scalars`` as metric -> [[frames, value], ...], the
    values exactly as the CSV wrote them (Python floats round-trip through JSON)."""
    out: Curves = {}
    for path in sorted((scalars / group).rglob("*.csv")):
        with path.open(newline="") as fh:
            rows = [[int(step), float(value)] for step, value in csv.reader(fh)]
        out[path.relative_to(scalars).with_suffix("").as_posix()] = rows
    return out


def _spaced(rows: list[list[float]]) -> list[list[float]]:
    """At most :data:`TRAIN_ROWS` rows, evenly spaced, the first and the last included."""
    if len(rows) <= TRAIN_ROWS:
        return rows
    last = len(rows) - 1
    picks = sorted({round(i * last / (TRAIN_ROWS - 1)) for i in range(TRAIN_ROWS)})
    return [rows[i] for i in picks]
