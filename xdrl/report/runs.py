"""Find run folders and read back what each run left on disk (no torch, no Hydra).

A run folder holds Hydra's ``.hydra/config.yaml``; a finished one also ``summary.json`` (written
by ``xdrl.run.lifecycle``) and, when it evaluated, ``evaluations.jsonl``
(``xdrl.trainer_hooks.evaluation_history``). A
folder with a config but neither file is listed as ``incomplete`` (it failed before training,
was killed, or is still running). A line of ``evaluations.jsonl`` that cannot be read (random
bytes, a non-numeric value, a torn last line) is skipped and kept in :attr:`RunRecord.skipped`,
so the report can say which runs are short instead of stopping or cutting a curve in silence.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from xdrl.config.errors import ConfigError
from xdrl.config.spec import RunSpec, load_saved_config
from xdrl.run.layout import (
    EVALUATIONS_FILE,
    HYDRA_CONFIG_FILE,
    HYDRA_DIR,
    HYDRA_OVERRIDES_FILE,
    SUMMARY_FILE,
)

CONFIG_FILE = Path(HYDRA_DIR) / HYDRA_CONFIG_FILE
OVERRIDES_FILE = Path(HYDRA_DIR) / HYDRA_OVERRIDES_FILE
INCOMPLETE = "incomplete"


class ReportError(ValueError):
    """A report the runs cannot give (no runs, an unknown metric, ``--out`` a file): the
    command prints its one line and exits 2."""


RECORD_KEYS = frozenset({"frames", "time", "wall_time_s"})  # an evaluation record's non-metrics


@dataclass
class RunRecord:
    """One run as read back from its folder.

    Args:
        dir: the run folder.
        config: the composed config Hydra saved (``.hydra/config.yaml``, interpolations as
            written), as plain data (groups compare it whole).
        overrides: the command-line overrides of the run (``.hydra/overrides.yaml``).
        summary: ``summary.json``, or None when the run wrote none.
        evaluations: the records of ``evaluations.jsonl``, by frames (empty without the file).
        status: ``summary.json``'s status (``completed``, ``stopped``, ``failed``,
            ``interrupted``), or ``incomplete`` without a summary.
        skipped: the lines of ``evaluations.jsonl`` that could not be read, as (line number,
            why); a run with any is *short*: its curve lacks those evaluations.
        spec: ``config`` read back as the run's typed spec
            (:meth:`~xdrl.config.spec.RunSpec.from_saved`); None for a config xdrl cannot read
            as a run's (other code's).

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
    skipped: list[tuple[int, str]] = field(default_factory=list)
    spec: RunSpec | None = None

    @property
    def seed(self) -> int | None:
        """The run's ``seed`` (None when its config is not a run config xdrl reads)."""
        return None if self.spec is None else self.spec.seed

    @property
    def env(self) -> str | None:
        """The run's environment id (None when its config is not a run config xdrl reads)."""
        return None if self.spec is None else self.spec.env_id

    @property
    def completed(self) -> bool:
        """Whether the run trained its whole budget (only those enter the statistics)."""
        return self.status == "completed"

    def final(self, metric: str) -> float | None:
        """``metric`` at the run's last evaluation (summary first, else the history)."""
        value = ((self.summary or {}).get("eval") or {}).get(metric)
        if value is None and self.evaluations:
            value = self.evaluations[-1].get(metric)
        return float(value) if _is_number(value) else None

    def metrics(self) -> set[str]:
        """Every metric key the run reports (its evaluations and its summary's ``eval``)."""
        final = ((self.summary or {}).get("eval") or {}).items()
        keys = {k for record in self.evaluations for k in record}
        keys |= {k for k, v in final if _is_number(v)}
        return keys - RECORD_KEYS


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """One line of ``evaluations.jsonl`` as a record, or None and why it cannot be read."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, "not JSON"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    frames: Any = record.get("frames")
    if not _is_number(frames) or not math.isfinite(frames) or frames < 0 or frames != int(frames):
        return None, f"frames is {frames!r}, not a count"
    bad = [k for k, v in record.items() if k not in RECORD_KEYS and not _is_number(v)]
    if bad:
        return None, f"{bad[0]} is {record[bad[0]]!r}, not a number"
    return {**record, "frames": int(frames)}, ""


def read_evaluation_file(path: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """The readable records of an ``evaluations.jsonl`` by frames, and the skipped lines.

    A line is skipped whole when it is not a JSON object, lacks a frame count, or holds a value
    that is not a number: half a record would pair a metric with the wrong evaluation.
    """
    records, skipped = [], []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        record, why = _parse_line(raw)
        if record is None:
            skipped.append((number, why))
        else:
            records.append(record)
    return sorted(records, key=lambda r: r["frames"]), skipped


def skipped_warning(run: RunRecord) -> str | None:
    """One line naming ``run``'s ``evaluations.jsonl`` and the lines skipped in it, if any."""
    if not run.skipped:
        return None
    lines = ", ".join(f"line {n} ({why})" if n else why for n, why in run.skipped[:3])
    more = f" and {len(run.skipped) - 3} more lines" if len(run.skipped) > 3 else ""
    return f"{run.dir / EVALUATIONS_FILE}: skipped {lines}{more}"


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


def _read_overrides(path: Path) -> list[str]:
    try:
        overrides = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return []
    return [str(o) for o in overrides] if isinstance(overrides, list) else []


def _read_config(path: Path) -> tuple[dict[str, Any], RunSpec | None]:
    """A run's saved config as plain data and as its spec (unreadable: empty, None)."""
    try:
        config = load_saved_config(path)
    except (OSError, ValueError):
        return {}, None
    try:
        return config, RunSpec.from_saved(config, str(path))
    except ConfigError:
        return config, None


def read_run(path: Path) -> RunRecord:
    """Read one run folder; unreadable files count as missing."""
    config, spec = _read_config(path / CONFIG_FILE)
    summary: dict[str, Any] | None = None
    try:
        data = json.loads((path / SUMMARY_FILE).read_text())
        summary = data if isinstance(data, dict) else None
    except (OSError, json.JSONDecodeError):
        summary = None
    evaluations: list[dict[str, Any]] = []
    skipped: list[tuple[int, str]] = []
    if (path / EVALUATIONS_FILE).is_file():
        try:
            evaluations, skipped = read_evaluation_file(path / EVALUATIONS_FILE)
        except OSError as err:
            skipped = [(0, f"cannot be read: {err.strerror or err}")]
    status = str(summary.get("status", "failed")) if summary is not None else INCOMPLETE
    return RunRecord(
        dir=path,
        config=config,
        overrides=_read_overrides(path / OVERRIDES_FILE),
        summary=summary,
        evaluations=evaluations,
        status=status,
        skipped=skipped,
        spec=spec,
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
