"""A torch-free reader of sweep job folders: ``<job>/.hydra/config.yaml`` and ``summary.json``.

Its records have the fields :func:`xdrl.pareto.report.pareto_report` reads (``dir``, ``config``,
``summary``, ``status``), the same as ``xdrl.report``'s ``RunRecord``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xdrl.config.spec import load_saved_config
from xdrl.run.layout import HYDRA_CONFIG_FILE, HYDRA_DIR, SUMMARY_FILE


@dataclass
class JobRecord:
    """One finished (or failed) job of a sweep: its saved config as plain data (read it with
    :func:`xdrl.pareto.report.run_spec`), its ``summary.json`` and that file's status."""

    dir: Path
    config: dict[str, Any]
    summary: dict[str, Any] | None
    status: str


def read_job(job_dir: Path) -> JobRecord | None:
    """The record of one job folder (None when it holds no readable ``.hydra/config.yaml``)."""
    try:
        config = load_saved_config(job_dir / HYDRA_DIR / HYDRA_CONFIG_FILE)
    except (OSError, ValueError):
        return None
    try:
        summary = json.loads((job_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        summary = None
    status = str(summary.get("status", "failed")) if isinstance(summary, dict) else "failed"
    return JobRecord(dir=job_dir, config=config, summary=summary, status=status)


def read_sweep(sweep_dir: str | Path) -> list[JobRecord]:
    """Every job folder directly under ``sweep_dir``, in name order."""
    root = Path(sweep_dir)
    if not root.is_dir():
        return []
    records = (read_job(d) for d in sorted(root.iterdir()) if d.is_dir())
    return [r for r in records if r is not None]
