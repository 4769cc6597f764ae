"""Read offline W&B runs back with wandb's own reader (`wandb leet inspect --json`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# `python -m wandb`: works whether or not the venv has the `wandb` console script.
WANDB = [sys.executable, "-m", "wandb"]


def offline_runs(save_dir: Path) -> list[Path]:
    """The offline run folders under ``save_dir/wandb``, oldest first."""
    return sorted((save_dir / "wandb").glob("offline-run-*"))


def read_records(run: Path) -> list[dict]:
    """Every record of one run's ``.wandb`` transaction log, as wandb decodes it."""
    out = subprocess.run(
        [*WANDB, "leet", "inspect", "--json", str(run)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def read_history(run: Path) -> list[dict]:
    """The run's history rows; each dict has the logged keys plus ``_step``."""
    rows = []
    for record in read_records(run):
        if record.get("type") == "history":
            item = dict(record["history"]["item"])
            item["_step"] = int(record["history"].get("step", {}).get("num", item.get("_step", 0)))
            rows.append(item)
    return rows


def read_config(run: Path) -> dict:
    """The run's config, merged over its config records."""
    config: dict = {}
    for record in read_records(run):
        if record.get("type") == "config":
            config.update(record["config"].get("update", {}))
    return config
