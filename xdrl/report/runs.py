"""Find run folders and read back what each run left on disk (no torch, no Hydra).

A run folder holds Hydra's ``.hydra/config.yaml``; a finished one also ``summary.json`` (written
by ``xdrl.run``) and, when it evaluated, ``evaluations.jsonl`` (``xdrl.evaluation_history``). A
folder with a config but neither file is listed as ``incomplete`` (it failed before training,
was killed, or is still running).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from xdrl.evaluation_history import EVALUATIONS_FILE, read_evaluations
from xdrl.files import SUMMARY_FILE

CONFIG_FILE = Path(".hydra") / "config.yaml"
OVERRIDES_FILE = Path(".hydra") / "overrides.yaml"
INCOMPLETE = "incomplete"


@dataclass
class RunRecord:
    """One run as read back from its folder.

    Args:
        dir: the run folder.
        config: the composed config Hydra saved (``.hydra/config.yaml``, interpolations as
            written).
        overrides: the command-line overrides of the run (``.hydra/overrides.yaml``).
        summary: ``summary.json``, or None when the run wrote none.
        evaluations: the records of ``evaluations.jsonl``, by frames (empty without the file).
        status: ``summary.json``'s status (``completed``, ``stopped``, ``failed``,
            ``interrupted``), or ``incomplete`` without a summary.

    Example:
        >>> [run.status for run in find_runs(["multirun/2026-11-23/05-00-00"])]
        ['completed', 'completed']
    """

    dir: Path
    config: dict[str, Any]
    overrides: list[str]
    summary: dict[str, Any] | None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    status: str = INCOMPLETE

    @property
    def seed(self) -> int | None:
        """The run's ``seed`` (None when the config has none)."""
        seed = self.config.get("seed")
        return int(seed) if isinstance(seed, int) else None

    @property
    def completed(self) -> bool:
        """Whether the run trained its whole budget (only those enter the statistics)."""
        return self.status == "completed"

    def final(self, metric: str) -> float | None:
        """``metric`` at the run's last evaluation (summary first, else the history)."""
        value = ((self.summary or {}).get("eval") or {}).get(metric)
        if value is None and self.evaluations:
            value = self.evaluations[-1].get(metric)
        return float(value) if isinstance(value, int | float) else None


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds a Hydra run config (``.hydra/config.yaml``)."""
    return (path / CONFIG_FILE).is_file()


def _walk(root: Path) -> Iterable[Path]:
    """Run folders under ``root``, not descending into a run or into hidden folders."""
    if is_run_dir(root):
        yield root
        return
    for current, dirs, _files in os.walk(root):
        here = Path(current)
        keep = []
        for name in sorted(dirs):
            if name.startswith("."):
                continue
            if is_run_dir(here / name):
                yield here / name
            else:
                keep.append(name)
        dirs[:] = keep


def _read_yaml(path: Path, default: Any) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return default


def read_run(path: Path) -> RunRecord:
    """Read one run folder; unreadable files count as missing."""
    config = _read_yaml(path / CONFIG_FILE, {}) or {}
    overrides = _read_yaml(path / OVERRIDES_FILE, []) or []
    summary: dict[str, Any] | None = None
    try:
        data = json.loads((path / SUMMARY_FILE).read_text())
        summary = data if isinstance(data, dict) else None
    except (OSError, json.JSONDecodeError):
        summary = None
    evaluations: list[dict[str, Any]] = []
    if (path / EVALUATIONS_FILE).is_file():
        evaluations = sorted(read_evaluations(path / EVALUATIONS_FILE), key=lambda r: r["frames"])
    status = str(summary.get("status", "failed")) if summary is not None else INCOMPLETE
    return RunRecord(
        dir=path,
        config=config if isinstance(config, dict) else {},
        overrides=[str(o) for o in overrides] if isinstance(overrides, list) else [],
        summary=summary,
        evaluations=evaluations,
        status=status,
    )


def find_runs(paths: Iterable[str | Path]) -> list[RunRecord]:
    """Every run folder under ``paths`` (single runs and multirun folders), read, by path.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    found: dict[Path, None] = {}
    for raw in paths:
        root = Path(raw).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist")
        for run_dir in _walk(root):
            found.setdefault(run_dir.resolve(), None)
    return [read_run(path) for path in sorted(found)]
