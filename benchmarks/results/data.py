"""The committed data files of the results page, and the references they are compared with.

A data file, ``benchmarks/results/<preset>.json`` (xdrl) or ``<preset>.<contender>.json``
(``sb3``), holds one command's seeds of one preset: what was asked (frames, the preset's budget,
the fraction), how each seed was evaluated at the end, the code version and the machine, and per
seed its curve, final value, frames, wall time and command. Written with sorted keys and one
curve point per line, so a re-run's diff in review shows what moved. Torch-free.

``references.yaml`` holds the published results each preset is compared with: the first entry
of a preset is its named reference (drawn in its figure), the others are listed beside it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parent
REFERENCES_FILE = DATA_DIR / "references.yaml"
SCHEMA = 1
METRIC = "eval/deterministic/reward/episode_reward_mean"
MIN_FINAL_EPISODES = 10  # the final evaluation's deterministic episodes, at least
CONTENDERS = ("xdrl", "sb3")


@dataclass
class Segment:
    """One process's part of a run (``summary.json``'s ``segments``): frames ``[start, end]``,
    when it started, its wall time, how it ended, and the budget it trained towards."""

    frames: list[int]
    started: str | None
    wall_time_s: float | None
    status: str | None
    budget_frames: int | None = None


@dataclass
class SeedResult:
    """One seed of a result.

    Args:
        seed: the seed.
        command: the command that trains it (``xdrl-train ...``; SB3: its ``bench_sb3.py`` line).
        frames: frames it trained (whole batches: can exceed the frames asked).
        final: its final evaluation's mean return.
        final_episodes: the episodes of that evaluation.
        final_source: ``run`` (the run's own last evaluation), ``xdrl-eval`` or ``bench_sb3``.
        curve: its evaluations as ``[frames, mean return]``, from the run's logs.
        wall_time_s: its wall time, summed over its segments (start-up and evaluations
            included; SB3: the process's).
        segments: its segments (xdrl; empty for SB3).
        run_dir: where it trained, relative to the repository where it can be.
        trained_here: whether the command that wrote the file trained any of its frames (False:
            it adopted a run completed before).
        resume_exact: ``summary.json``'s ``resume_exact`` where the run was resumed.
        extended_from: the budget a run was first trained towards, where ``--extend`` trained it
            on to a larger one (its schedules were re-anchored).

    Example:
        >>> SeedResult(0, "xdrl-train experiment=cartpole_ppo seed=0", 12288, 500.0, 20, "run")
    """

    seed: int
    command: str
    frames: int
    final: float
    final_episodes: int
    final_source: str
    curve: list[list[float]] = field(default_factory=list)
    wall_time_s: float | None = None
    segments: list[Segment] = field(default_factory=list)
    run_dir: str = ""
    trained_here: bool = True
    resume_exact: bool | None = None
    extended_from: int | None = None


@dataclass
class Result:
    """One command's seeds of one preset: the content of a data file.

    Args:
        preset: the preset (``conf/experiment/<preset>.yaml``).
        contender: ``xdrl`` or ``sb3``.
        env: the environment id.
        algorithm: the algorithm's config name.
        budget_frames: the preset's ``total_frames``.
        frames: the frames asked (the budget, or ``--frames``).
        command: the harness command that wrote the file.
        code: ``{"commit": ..., "dirty": ...}`` of the checkout that wrote it.
        machine: ``{"cpu": ..., "cores": ...}``.
        seeds: one :class:`SeedResult` per seed, by seed.
        versions: the library versions of the python that wrote it.
        metric: the evaluation metric of curves and finals.
    """

    preset: str
    contender: str
    env: str
    algorithm: str
    budget_frames: int
    frames: int
    command: str
    code: dict[str, Any]
    machine: dict[str, Any]
    seeds: list[SeedResult]
    versions: dict[str, str] = field(default_factory=dict)
    metric: str = METRIC
    schema: int = SCHEMA

    @property
    def fraction(self) -> float:
        """The share of the preset's budget asked for."""
        return self.frames / self.budget_frames

    @property
    def finals(self) -> list[float]:
        """Each seed's final value, by seed."""
        return [s.final for s in self.seeds]

    def to_json(self) -> dict[str, Any]:
        """Plain data, ``fraction`` included (it is stated in the file, not only derived)."""
        return {**asdict(self), "fraction": round(self.fraction, 6)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        """A result read back from :meth:`to_json`'s data."""
        fields = {k: v for k, v in data.items() if k not in ("fraction", "seeds")}
        seeds = [
            SeedResult(
                **{k: v for k, v in s.items() if k != "segments"},
                segments=[Segment(**seg) for seg in s.get("segments", [])],
            )
            for s in data["seeds"]
        ]
        return cls(**fields, seeds=seeds)


def data_path(preset: str, contender: str = "xdrl", folder: Path = DATA_DIR) -> Path:
    """Where ``preset``'s data file of ``contender`` lives."""
    return folder / (f"{preset}.json" if contender == "xdrl" else f"{preset}.{contender}.json")


# A [frames, value] pair that json.dumps spread over four lines.
_PAIR = re.compile(r"\[\s+(-?[\d.e+-]+),\s+([^\s\[\]{},]+)\s+\]")


def dumps(result: Result) -> str:
    """The stable text of a data file: 2-space indent, sorted keys, one curve point or segment
    frame pair per line, a final newline."""
    text = json.dumps(result.to_json(), indent=2, sort_keys=True)
    return _PAIR.sub(r"[\1, \2]", text) + "\n"


def write(result: Result, folder: Path = DATA_DIR) -> Path:
    """Write ``result`` to its data file in ``folder``; returns the path."""
    path = data_path(result.preset, result.contender, folder)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(result))
    return path


def load(path: Path) -> Result:
    """A data file read back."""
    return Result.from_json(json.loads(path.read_text()))


def load_all(folder: Path = DATA_DIR) -> dict[str, dict[str, Result]]:
    """Every data file in ``folder``: preset -> contender -> result, presets sorted."""
    out: dict[str, dict[str, Result]] = {}
    for path in sorted(folder.glob("*.json")):
        result = load(path)
        out.setdefault(result.preset, {})[result.contender] = result
    return {p: dict(sorted(out[p].items(), key=lambda kv: CONTENDERS.index(kv[0]))) for p in out}


@dataclass(frozen=True)
class Reference:
    """A published result: its value (± what the source gives), source and budget.

    Args:
        source: who published it (``RL-Zoo``, ``CleanRL``).
        url: where.
        value: the published final return.
        budget_frames: the frames it trained.
        env: the environment id it ran (often ``-v3``/``-v4`` where xdrl runs ``-v5``).
        plus_minus: the published spread, or None.
        spread: what ``plus_minus`` is (std over seeds, over one run's evaluation episodes).
    """

    source: str
    url: str
    value: float
    budget_frames: int
    env: str
    plus_minus: float | None = None
    spread: str = ""

    def label(self) -> str:
        """``RL-Zoo 2,410 ± 10 (Hopper-v3, 1M)``."""
        pm = "" if self.plus_minus is None else f" ± {self.plus_minus:,.0f}"
        return (
            f"{self.source} {self.value:,.0f}{pm} ({self.env}, {short_frames(self.budget_frames)})"
        )


def load_references(path: Path = REFERENCES_FILE) -> dict[str, list[Reference]]:
    """preset -> its references, the named one first."""
    raw = yaml.safe_load(path.read_text()) or {}
    return {preset: [Reference(**entry) for entry in entries] for preset, entries in raw.items()}


def short_frames(frames: int) -> str:
    """1000000 -> ``1M``, 100000 -> ``100k``, 12288 -> ``12,288``."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if frames >= size and frames % (size // 10 if unit == "M" else size) == 0:
            return f"{frames / size:g}{unit}"
    return f"{frames:,}"
