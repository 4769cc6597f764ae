"""The report as text: the group table (stdout and ``report.md``), ``report.md`` and
``report.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from xdrl.files import write_atomically
from xdrl.report.analysis import Analysis, GroupResult
from xdrl.report.stats import CONFIDENCE, METHOD, N_RESAMPLES

CURVES_PNG = "curves.png"
FINAL_PNG = "final.png"
REPORT_MD = "report.md"
REPORT_JSON = "report.json"


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _ci(bounds: list[float] | None) -> str:
    return "- (one run)" if bounds is None else f"[{_num(bounds[0])}, {_num(bounds[1])}]"


def _objective_label(key: str) -> str:
    return next(p for p in key.split("/") if p.startswith("objective_"))


def _objective_cells(result: GroupResult, keys: list[str]) -> list[str]:
    cells = []
    for key in keys:
        s = result.objectives.get(key)
        cells.append("-" if s is None else f"{_num(s['iqm'])} ({_num(s['mean'])})")
    return cells


def group_table(analysis: Analysis) -> str:
    """One row per group, best final IQM first; per-objective IQM (mean) columns when any."""
    keys = sorted({k for g in analysis.groups for k in g.objectives}, key=_objective_sort)
    header = ["group", "runs", "seeds", "IQM", "IQM 95% CI", "mean", "mean 95% CI", "std"]
    header += ["median", "left out", *(f"{_objective_label(k)} IQM (mean)" for k in keys)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for g in analysis.groups:
        final = g.final
        cells = [
            f"`{g.group.name}`",
            str(len(g.used)),
            ",".join(map(str, g.seeds)) or "-",
            _num(final["iqm"]),
            _ci(final["iqm_ci"]) if g.used else "-",
            _num(final["mean"]),
            _ci(final["mean_ci"]) if g.used else "-",
            _num(final["std"]),
            _num(final["median"]),
            str(len(g.excluded)),
            *_objective_cells(g, keys),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _objective_sort(key: str) -> int:
    return int(_objective_label(key).split("_", 1)[1])


def improvement_table(analysis: Analysis) -> str:
    """P(X > Y) per pair of groups on one env, with its interval."""
    if not analysis.improvement:
        return "No two groups on the same environment with completed runs: nothing to compare.\n"
    lines = ["| X | Y | P(X > Y) | 95% CI |", "|---|---|---|---|"]
    for row in analysis.improvement:
        lines.append(f"| `{row['x']}` | `{row['y']}` | {_num(row['p'])} | {_ci(row['ci'])} |")
    return "\n".join(lines) + "\n"


def runs_table(analysis: Analysis) -> str:
    """Every run: group, seed, status, frames, final value, whether it was averaged."""
    lines = ["| run | group | seed | status | frames | final | averaged |"]
    lines.append("|---|---|---|---|---|---|---|")
    for g in analysis.groups:
        rows = [(r, "yes") for r in g.used] + [(r, why) for r, why in g.excluded]
        for run, why in rows:
            resumed = " (resumed)" if (run.summary or {}).get("resumed_from") else ""
            frames = (run.summary or {}).get("total_frames")
            if frames is None and run.evaluations:
                frames = run.evaluations[-1]["frames"]
            cells = [
                f"`{run.dir.name}`",
                f"`{g.group.name}`",
                _num(run.seed),
                run.status + resumed,
                _num(frames),
                _num(run.final(analysis.metric)),
                why,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(
    analysis: Analysis, command: str, extra: str | None = None, note: str | None = None
) -> str:
    """``report.md``: the command, the tables, the plots, how the numbers were made."""
    pct = int(CONFIDENCE * 100)
    one_run = [g.group.name for g in analysis.groups if len(g.used) == 1]
    parts = [
        "# Report\n",
        f"Made by `{command}`." + (f" {note}" if note else "") + "\n",
        f"Metric: `{analysis.metric}` at each run's last evaluation. Groups are configurations "
        "that differ only in the seed, highest final IQM first.\n",
        group_table(analysis),
        f"IQM: interquartile mean (`scipy.stats.trim_mean(x, 0.25)`). Intervals: {pct}% "
        f"stratified {METHOD} bootstrap over runs ({N_RESAMPLES:,} resamples, "
        "`scipy.stats.bootstrap`); std uses n-1. Only completed runs are averaged.\n",
    ]
    if one_run:
        parts.append(f"One run only (no interval): {', '.join(f'`{n}`' for n in one_run)}.\n")
    parts += [
        "## Probability of improvement\n",
        "P(X > Y): the chance that a run of X ends above a run of Y (ties count one half), "
        "with its stratified bootstrap interval.\n",
        improvement_table(analysis),
        "## Learning curves\n",
        f"![learning curves]({CURVES_PNG})\n",
        "IQM over the runs of each group and its 95% interval, on the union of the runs' "
        "evaluation frames within the span every run covers; a run is linearly interpolated "
        "between its own evaluations, never extrapolated.\n",
        "## Final IQM\n",
        f"![final IQM]({FINAL_PNG})\n",
        "## Runs\n",
        runs_table(analysis),
    ]
    if extra:
        parts.append(extra.rstrip() + "\n")
    return "\n".join(parts)


def _finite(node: Any) -> Any:
    """NaN and infinities as null: ``report.json`` stays strict JSON."""
    if isinstance(node, dict):
        return {k: _finite(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_finite(v) for v in node]
    if isinstance(node, float) and not math.isfinite(node):
        return None
    return node


def _write(path: Path, text: str) -> None:
    write_atomically(path, text)


def write_text_files(out_dir: Path, analysis: Analysis, md: str) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.json`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / REPORT_MD, out_dir / REPORT_JSON
    _write(md_path, md)
    _write(json_path, json.dumps(_finite(analysis.to_json()), indent=2, allow_nan=False) + "\n")
    return md_path, json_path
