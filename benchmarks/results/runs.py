"""The seeds' run dirs: what each needs (train, resume, nothing, or a refusal), training them
with ``xdrl-train``, and reading each back into a :class:`~benchmarks.results.data.SeedResult`.

Every seed trains with one command line, the one a user types to run it by hand::

    xdrl-train experiment=P seed=S num_threads=1 logging=csv run_dir=bench-results/runs/P/seedS

plus ``total_frames=<N>`` when a fraction of the budget is asked for. A run dir already there is
adopted: a completed run is read as it is, a stopped one is continued by the same command
(xdrl's exact resume), and one whose saved config differs from the one asked for is refused
with one line before anything trains. A different ``total_frames`` is refused too unless
``--extend``: xdrl would train on under the new budget, re-anchoring the learning-rate and clip
schedules, which is not the preset's run.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.contenders import xdrl_train
from benchmarks.results.data import METRIC, MIN_FINAL_EPISODES, SeedResult, Segment

ROOT = Path(__file__).resolve().parents[2]
RUNS_DIR = Path("bench-results") / "runs"  # relative to the repository, as the lead's runs
EVAL_FILE = "results-final-eval.json"  # xdrl-eval's record, beside the run dir's own files
CURVE_CSV = Path("eval") / "deterministic" / "reward" / "episode_reward_mean.csv"
FIXED = ("num_threads=1", "logging=csv")  # every seed's command, after experiment and seed


class Refused(ValueError):
    """A run dir the command will not adopt: ``key`` and the one line saying why and what to do."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class Preset:
    """What the harness reads of a preset's composed config."""

    name: str
    env: str
    algorithm: str
    budget_frames: int
    eval_enabled: bool
    eval_episodes: int
    eval_deterministic: bool

    @property
    def run_evaluates_enough(self) -> bool:
        """Whether the run's own final evaluation is deterministic with enough episodes."""
        return (
            self.eval_enabled
            and self.eval_deterministic
            and self.eval_episodes >= MIN_FINAL_EPISODES
        )


def compose(overrides: list[str]) -> dict[str, Any]:
    """The config ``xdrl-train overrides`` composes, unresolved (as ``.hydra/config.yaml``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides)
    data = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items()}


def read_preset(name: str) -> Preset:
    """``name``'s env, algorithm, budget and evaluation settings."""
    cfg = compose([f"experiment={name}"])
    build = str(cfg["algorithm"]["build"]["_target_"])  # xdrl.algorithms.<name>.build
    return Preset(
        name=name,
        env=str(cfg["env"]["id"]),
        algorithm=build.rsplit(".", 2)[-2],
        budget_frames=int(cfg["total_frames"]),
        eval_enabled=bool(cfg["eval"]["enabled"]),
        eval_episodes=int(cfg["eval"]["episodes"]),
        eval_deterministic=bool(cfg["eval"]["deterministic"]),
    )


def run_dir_of(runs_dir: Path, preset: str, seed: int) -> Path:
    """Seed ``seed``'s run dir under ``runs_dir`` (relative: to the repository)."""
    return runs_dir / preset / f"seed{seed}"


def overrides(preset: Preset, seed: int, run_dir: Path, frames: int) -> list[str]:
    """The seed's ``xdrl-train`` overrides; ``total_frames`` only for a fraction of the budget."""
    budget = [] if frames == preset.budget_frames else [f"total_frames={frames}"]
    return [f"experiment={preset.name}", f"seed={seed}", *FIXED, f"run_dir={run_dir}", *budget]


@dataclass
class Plan:
    """What one seed needs: ``train`` (a fresh run dir), ``resume`` (a stopped run, same
    budget), ``extend`` (a run trained towards another budget, with ``--extend``) or ``adopt``
    (a completed run of this budget: nothing runs)."""

    seed: int
    run_dir: Path
    args: list[str]
    action: str
    extended_from: int | None = None

    @property
    def command(self) -> str:
        """The command line as a user types it."""
        return " ".join(["xdrl-train", *self.args])


def plan(preset: Preset, seed: int, runs_dir: Path, frames: int, extend: bool = False) -> Plan:
    """What ``seed``'s run dir needs for ``frames`` frames.

    Raises:
        Refused: the run dir holds a run of another config, of more frames than asked, or (without
            ``extend``) of another budget.
    """
    from xdrl.config.resume import config_changes
    from xdrl.config.spec import load_saved_config
    from xdrl.run.layout import HYDRA_CONFIG_FILE, HYDRA_DIR, SUMMARY_FILE

    run_dir = run_dir_of(runs_dir, preset.name, seed)
    args = overrides(preset, seed, run_dir, frames)
    saved_file = in_repo(run_dir) / HYDRA_DIR / HYDRA_CONFIG_FILE
    if not saved_file.is_file():
        return Plan(seed, run_dir, args, "train")
    changes = config_changes(load_saved_config(saved_file), compose(args))
    budget = changes.pop("total_frames", None)
    if changes:
        diff = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in list(changes.items())[:4])
        more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
        raise Refused(
            "run_dir",
            f"seed {seed}: {run_dir} was trained under another config ({diff}{more}); move it "
            "aside (or pass --runs-dir) to train the preset as it is",
        )
    summary = _read_json(in_repo(run_dir) / SUMMARY_FILE)
    done = summary.get("status") == "completed"
    if budget is None:
        return Plan(seed, run_dir, args, "adopt" if done else "resume")
    was = int(budget[0])
    if done and was > frames:
        raise Refused(
            "--frames",
            f"seed {seed}: {run_dir} is a completed run of total_frames={was}, more than the "
            f"{frames} asked; pass --frames {was} to record it",
        )
    if not extend:
        state = "a completed" if done else "a stopped"
        raise Refused(
            "--frames",
            f"seed {seed}: {run_dir} is {state} run towards total_frames={was}, not {frames}; "
            f"pass --frames {was} to {'record' if done else 'finish'} it as it was started, or "
            "--extend to train it on to the new budget (its schedules are re-anchored: not the "
            "preset's own run)",
        )
    return Plan(seed, run_dir, args, "extend", extended_from=was)


def in_repo(path: Path) -> Path:
    """``path``, relative ones taken from the repository root (where the runs are started)."""
    return path if path.is_absolute() else ROOT / path


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# What the results commands write themselves: their changes do not make the code dirty.
OWN_OUTPUTS = ("benchmarks/results/*.json", "docs/results.md", "docs/results")


def code_state() -> dict[str, Any]:
    """``{"commit": ..., "dirty": ...}`` of the checkout: the short commit, and whether a tracked
    file other than the data files and the results page has uncommitted changes (None: not a
    git checkout)."""
    excluded = [f":(exclude){path}" for path in OWN_OUTPUTS]
    try:
        commit = _git("rev-parse", "--short=12", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *excluded)
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit, "dirty": bool(changed)}


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def train(item: Plan, log: Path) -> int:
    """Run ``item``'s ``xdrl-train`` from the repository root, its output into ``log``; its
    exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        proc = subprocess.run(
            [str(xdrl_train()), *item.args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc.returncode


def final_eval(run_dir: Path, frames: int) -> tuple[float, int]:
    """Mean return and episodes of ``xdrl-eval`` over :data:`MIN_FINAL_EPISODES` deterministic
    episodes of the run's last checkpoint, for presets whose own evaluation has fewer; kept in
    the run dir (``results-final-eval.json``) and reused while it is of the run's last frames."""
    record_file = in_repo(run_dir) / EVAL_FILE
    record = _read_json(record_file)
    if record.get("frames") != frames or record.get("episodes", 0) < MIN_FINAL_EPISODES:
        script = Path(xdrl_train()).with_name("xdrl-eval")
        cmd = [str(script), str(in_repo(run_dir)), "--episodes", str(MIN_FINAL_EPISODES)]
        cmd += ["--deterministic", "--json", str(record_file)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"xdrl-eval {run_dir} failed:\n{proc.stderr[-2000:]}")
        record = _read_json(record_file)
    return float(record["return_mean"]), int(record["episodes"])


def read_curve(run_dir: Path) -> list[list[float]]:
    """The run's deterministic evaluation means as ``[frames, mean]``, from its CSV log."""
    files = sorted(in_repo(run_dir).glob(f"logs/*/scalars/{CURVE_CSV.as_posix()}"))
    if len(files) != 1:
        raise RuntimeError(f"{run_dir}: expected one {CURVE_CSV} under logs/*/scalars/")
    with files[0].open(newline="") as fh:
        return [[int(float(step)), float(value)] for step, value in csv.reader(fh)]


def gather(preset: Preset, item: Plan, trained_here: bool) -> SeedResult:
    """``item``'s completed run read back: curve, final evaluation, frames, segments.

    Raises:
        RuntimeError: the run is not complete or its record is not what a completed run writes.
    """
    summary = _read_json(in_repo(item.run_dir) / "summary.json")
    if summary.get("status") != "completed":
        raise RuntimeError(f"{item.run_dir}: not complete (status {summary.get('status')!r})")
    frames = int(summary["total_frames"])
    curve = read_curve(item.run_dir)
    if preset.run_evaluates_enough:
        if not curve or curve[-1][0] != frames:
            raise RuntimeError(f"{item.run_dir}: its last evaluation is not at {frames} frames")
        final, episodes, source = float(summary["eval"][METRIC]), preset.eval_episodes, "run"
    else:
        final, episodes = final_eval(item.run_dir, frames)
        source = "xdrl-eval"
    segments = [
        Segment(
            frames=[int(f) for f in s["frames"]],
            started=s.get("started"),
            wall_time_s=s.get("wall_time_s"),
            status=s.get("status"),
            budget_frames=s.get("budget_frames"),
        )
        for s in summary.get("segments", [])
    ]
    return SeedResult(
        seed=item.seed,
        command=item.command,
        frames=frames,
        final=final,
        final_episodes=episodes,
        final_source=source,
        curve=curve,
        wall_time_s=summary.get("wall_time_s"),
        segments=segments,
        run_dir=shown(item.run_dir),
        trained_here=trained_here,
        resume_exact=summary.get("resume_exact"),
        extended_from=item.extended_from,
    )


def shown(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it."""
    absolute = Path(os.path.abspath(in_repo(path)))
    return str(absolute.relative_to(ROOT)) if absolute.is_relative_to(ROOT) else str(absolute)


def run_all(
    items: list[Plan], parallel: int, log_of: Callable[[Plan], Path], say: Callable[[str], None]
) -> dict[int, int]:
    """Train every item that needs it, ``parallel`` at a time: seed -> exit status (0 for an
    adopted run)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(item: Plan) -> tuple[int, int]:
        if item.action == "adopt":
            return item.seed, 0
        say(f"seed {item.seed}: {item.action}: {item.command} (output: {log_of(item)})")
        code = train(item, log_of(item))
        say(f"seed {item.seed}: xdrl-train exited {code}")
        return item.seed, code

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return dict(pool.map(one, items))
