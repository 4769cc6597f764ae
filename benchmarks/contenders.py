"""How each contender runs: xdrl-train, SB3 in its own venv, the reference loops.

``xdrl-train`` is the one beside ``sys.executable`` (the venv that runs the harness), so any
install of xdrl can be measured; SB3 runs with ``.venv-sb3``'s python (``make bench-venv`` makes
it; ``--sb3-python`` points elsewhere) through ``scripts/bench_sb3.py``, so nothing of SB3 enters
xdrl's venv.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SB3_VENV = ROOT / ".venv-sb3"
SB3_DRIVER = ROOT / "scripts" / "bench_sb3.py"
LOOPS_DRIVER = ROOT / "scripts" / "bench_loops.py"
EVAL_KEY = "eval/deterministic/reward/episode_reward_mean"
SB3_PYTHON = SB3_VENV / "bin" / "python"  # the default of --sb3-python


def xdrl_train(python: str | Path | None = None) -> Path:
    """The ``xdrl-train`` console script beside ``python`` (default: ``sys.executable``)."""
    script = Path(python or sys.executable).with_name("xdrl-train")
    if not script.exists():
        raise FileNotFoundError(
            f"no xdrl-train beside {python or sys.executable}: run the harness with the python "
            "of the venv xdrl is installed in (e.g. .venv/bin/python -m benchmarks)"
        )
    return script


def check_sb3_venv(python: Path, *modules: str) -> None:
    """Fail with the command that fixes it unless SB3's ``python`` imports ``modules``."""
    needed = ", ".join(("stable_baselines3", *modules))
    if not python.exists() or _run([str(python), "-c", f"import {needed}"]).returncode:
        raise SystemExit(
            f"{python} cannot import {needed}: run `make bench-venv` (creates .venv-sb3 with "
            "stable-baselines3, sb3-contrib, ale-py, OpenCV and MuJoCo) or pass --sb3-python"
        )


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kwargs)


def _timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``cmd`` under /usr/bin/time; returns the process and its peak RSS in MB."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        wrapped = (
            ["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd] if shutil.which("time") else cmd
        )
        proc = _run(wrapped)
        text = Path(rss.name).read_text().strip().splitlines()
    peak = float(text[-1]) / 1024 if text and text[-1].isdigit() else float("nan")
    return proc, peak


def timed_command(args: list[str]) -> None:
    """Run ``xdrl-train <args>`` (its exit status is not checked: ``--help`` timing)."""
    _run([str(xdrl_train()), *args])


def sb3(python: Path, mode: str, seed: int, *args: str) -> dict[str, Any]:
    """One run of ``scripts/bench_sb3.py <mode>`` with SB3's ``python``: its JSON line."""
    proc = _run([str(python), str(SB3_DRIVER), mode, "--seed", str(seed), *args])
    if proc.returncode:
        raise RuntimeError(f"SB3 {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_sb3(
    python: Path, mode: str, seed: int, threads: tuple[int, ...], *args: str
) -> dict[str, float]:
    """SB3's frames/s at each thread count and the best of them."""
    fps = {
        n: sb3(python, mode, seed, *args, "--threads", str(n))["frames_per_second"] for n in threads
    }
    return {"best": max(fps.values()), **{f"threads_{n}": v for n, v in fps.items()}}


def loop(name: str, seed: int, frames: int, *args: str) -> float:
    """frames/s of a reference loop (``scripts/bench_loops.py``) in this python's venv."""
    cmd = [sys.executable, str(LOOPS_DRIVER), name, "--seed", str(seed), "--frames", str(frames)]
    proc = _run([*cmd, *args])
    if proc.returncode:
        raise RuntimeError(f"{name} loop failed:\n{proc.stderr[-3000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["frames_per_second"])


def xdrl(
    overrides: list[str], seed: int, checkpoint: bool = False, executable: Path | None = None
) -> dict[str, Any]:
    """One xdrl-train run; summary.json plus the CSV scalars and the peak RSS.

    ``checkpoint=False`` adds ``checkpoint=none``; True keeps the preset's own checkpointing.
    ``executable`` (``--baseline``) replaces the xdrl-train beside ``sys.executable``.
    """
    run_dir = Path(tempfile.mkdtemp(prefix="xdrl-bench-"))
    cmd = [
        str(executable or xdrl_train()),
        f"seed={seed}",
        *([] if checkpoint else ["checkpoint=none"]),
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    proc, peak = _timed(cmd)
    summary_path = run_dir / "summary.json"
    if proc.returncode or not summary_path.exists():
        raise RuntimeError(f"xdrl-train {' '.join(overrides)} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads(summary_path.read_text())
    summary["scalars"] = _scalars(run_dir)
    summary["peak_rss_mb"] = peak
    shutil.rmtree(run_dir, ignore_errors=True)
    return summary


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for path in run_dir.glob("logs/*/scalars/**/*.csv"):
        name = str(path.relative_to(next(run_dir.glob("logs/*/scalars")))).removesuffix(".csv")
        with path.open() as f:
            out[name] = [(int(float(r[0])), float(r[1])) for r in csv.reader(f) if r]
    return out


def versions(python: str | Path, packages: list[str]) -> dict[str, str]:
    """``{package: version}`` as ``python`` imports them (none where it cannot)."""
    code = "import importlib;" + ";".join(
        f"print('{p}', importlib.import_module('{p}').__version__)" for p in packages
    )
    out = {}
    for line in _run([str(python), "-c", code]).stdout.splitlines():
        name, version = line.split()
        out[name] = version
    return out
