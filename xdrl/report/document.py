"""The report as text: the group tables (stdout and ``report.md``), ``report.md`` and
``report.json``. One table per environment: runs of different environments are never ranked
together."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from xdrl.report.analysis import Analysis, GroupResult
from xdrl.report.stats import CONFIDENCE, METHOD, N_RESAMPLES

CURVES_PNG = "curves.png"
FINAL_PNG = "final.png"
REPORT_MD = "report.md"
REPORT_JSON = "report.json"
# Every name a report writes (pareto files by xdrl.pareto): replaced as a set by a new report.
OWN_FILES = (REPORT_MD, REPORT_JSON, CURVES_PNG, FINAL_PNG, "pareto*", "*.tmp")


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


def group_tables(analysis: Analysis) -> str:
    """The group table of each environment, under its name when there are several."""
    if len(analysis.envs) == 1:
        return group_table(analysis.groups)
    return "\n".join(
        f"Environment `{env}`:\n\n{group_table(analysis.of_env(env))}" for env in analysis.envs
    )


def group_table(groups: list[GroupResult]) -> str:
    """One row per group, in the given order (best final IQM first); per-objective IQM (mean)
    columns when any."""
    keys = sorted({k for g in groups for k in g.objectives}, key=_objective_sort)
    header = ["group", "runs", "seeds", "IQM", "IQM 95% CI", "mean", "mean 95% CI", "std"]
    header += ["median", "left out", *(f"{_objective_label(k)} IQM (mean)" for k in keys)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for g in groups:
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
    lines = ["| env | X | Y | P(X > Y) | 95% CI |", "|---|---|---|---|---|"]
    for row in analysis.improvement:
        cells = [f"`{row['env']}`", f"`{row['x']}`", f"`{row['y']}`", _num(row["p"])]
        lines.append("| " + " | ".join([*cells, _ci(row["ci"])]) + " |")
    return "\n".join(lines) + "\n"


def runs_table(analysis: Analysis) -> str:
    """Every run: group, seed, status, frames, final value, whether it was averaged."""
    lines = ["| run | env | group | seed | status | frames | final | averaged |"]
    lines.append("|---|---|---|---|---|---|---|---|")
    for g in analysis.groups:
        rows = [(r, "yes") for r in g.used] + [(r, why) for r, why in g.excluded]
        for run, why in rows:
            resumed = " (resumed)" if (run.summary or {}).get("resumed_from") else ""
            resumed += ", short" if run.skipped else ""
            frames = (run.summary or {}).get("total_frames")
            if frames is None and run.evaluations:
                frames = run.evaluations[-1]["frames"]
            cells = [
                f"`{run.dir.name}`",
                f"`{g.group.env}`",
                f"`{g.group.name}`",
                _num(run.seed),
                run.status + resumed,
                _num(frames),
                _num(run.final(analysis.metric)),
                why,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def short_runs_text(analysis: Analysis) -> str | None:
    """Which runs are short: unreadable lines of ``evaluations.jsonl`` were skipped."""
    if not analysis.short:
        return None
    lines = [
        "Short runs (unreadable lines of `evaluations.jsonl` skipped; their curves lack them):"
    ]
    for short in analysis.short:
        skipped = ", ".join(
            f"line {s['line']} ({s['why']})" if s["line"] else s["why"] for s in short["skipped"]
        )
        last = short["last_frames"]
        end = f"last readable evaluation at {last:,} frames" if last is not None else "none read"
        lines.append(f"- `{short['run']}`: {skipped}; {end}")
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
        "that differ only in the seed, by environment, highest final IQM first within it; runs "
        "of different environments are never ranked or compared together.\n",
        group_tables(analysis),
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
        "IQM over the runs of each group and its 95% interval (a panel per environment), on "
        "the union of the runs' evaluation frames within the span every run covers; a run is "
        "linearly interpolated between its own evaluations, never extrapolated.\n",
        "## Final IQM\n",
        f"![final IQM]({FINAL_PNG})\n",
        "## Runs\n",
        runs_table(analysis),
    ]
    if short := short_runs_text(analysis):
        parts.append(short)
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


def write_text_files(out_dir: Path, analysis: Analysis, md: str) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.json`` into ``out_dir`` (a folder being staged whole:
    :mod:`xdrl.report.publish`)."""
    md_path, json_path = out_dir / REPORT_MD, out_dir / REPORT_JSON
    md_path.write_text(md)
    json_path.write_text(json.dumps(_finite(analysis.to_json()), indent=2, allow_nan=False) + "\n")
    return md_path, json_path
