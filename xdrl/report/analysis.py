"""From runs to numbers: per group the final metric's statistics and learning curve, between
groups of one environment the probability of improvement. Only completed runs are averaged; the
others are kept, with the reason, so the report can list them. Groups are ordered by environment
and ranked within it: runs of different environments are never ranked or compared together.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from xdrl.report.groups import Group, group_runs
from xdrl.report.runs import EVALUATIONS_FILE, ReportError, RunRecord
from xdrl.report.stats import curve, probability_of_improvement, summarize

DEFAULT_METRIC = "eval/deterministic/reward/episode_reward_mean"
SHOWN_METRICS = 6  # metrics named when a requested one is unknown and none is close
REPEATED_SEED = "repeated seed"  # why a second run of one seed in a group is not averaged


def check_metric(runs: list[RunRecord], metric: str | None) -> str:
    """The metric to report: ``metric`` (default :data:`DEFAULT_METRIC`) if a run reports it.

    The default stands when no run reports any metric (runs that all failed before an
    evaluation are still listed).

    Raises:
        ReportError: no run reports it; the message names the closest metric they do report.
    """
    chosen = metric or DEFAULT_METRIC
    present = sorted(set().union(*(run.metrics() for run in runs)))
    if chosen in present or (metric is None and not present):
        return chosen
    what = f"--metric {chosen}" if metric else f"the default metric {chosen}"
    if not present:
        raise ReportError(f"{what}: no run reports any evaluation (evaluations.jsonl, summary)")
    close = difflib.get_close_matches(chosen, present, n=1)
    if close:
        hint = f"did you mean --metric {close[0]}?"
    else:
        more = f" (+{len(present) - SHOWN_METRICS} more)" if len(present) > SHOWN_METRICS else ""
        hint = f"the runs report {', '.join(present[:SHOWN_METRICS])}{more}"
    raise ReportError(f"{what}: no run reports it; {hint}")


@dataclass
class GroupResult:
    """One group's numbers.

    Args:
        group: the group (name, overrides, every run).
        used: completed runs that reported the metric, in seed order.
        excluded: the other runs, each with why it was left out.
        final: :func:`xdrl.report.stats.summarize` of the used runs' final values.
        curve: IQM and interval per frame (:func:`xdrl.report.stats.curve`).
        objectives: per-objective final metric key -> the same summary, multi-objective runs.
    """

    group: Group
    used: list[RunRecord]
    excluded: list[tuple[RunRecord, str]]
    final: dict[str, Any]
    curve: list[dict[str, Any]]
    objectives: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.used if r.seed is not None]

    def to_json(self) -> dict[str, Any]:
        """The group entry of ``report.json``."""
        return {
            "name": self.group.name,
            "env": self.group.env,
            "overrides": dict(self.group.overrides),
            "runs": len(self.used),
            "seeds": self.seeds,
            "final": dict(self.final),
            "curve": list(self.curve),
        }

    def values(self, metric: str) -> list[float]:
        """The used runs' final ``metric``."""
        return [v for r in self.used if (v := r.final(metric)) is not None]


@dataclass
class Analysis:
    """What a set of runs says about ``metric``: groups by environment, best first within it,
    pairwise improvement within an environment, and the runs whose history is short."""

    metric: str
    groups: list[GroupResult]
    improvement: list[dict[str, Any]]
    short: list[dict[str, Any]] = field(default_factory=list)

    @property
    def envs(self) -> list[str | None]:
        """The environments of the groups, in the groups' order."""
        return list(dict.fromkeys(g.group.env for g in self.groups))

    def of_env(self, env: str | None) -> list[GroupResult]:
        """The groups of one environment, best first."""
        return [g for g in self.groups if g.group.env == env]

    def to_json(self) -> dict[str, Any]:
        """``report.json``: metric, groups, probability_of_improvement, short_runs."""
        return {
            "metric": self.metric,
            "groups": [g.to_json() for g in self.groups],
            "probability_of_improvement": list(self.improvement),
            "short_runs": list(self.short),
        }


def short_runs(runs: list[RunRecord]) -> list[dict[str, Any]]:
    """Runs with unreadable lines in ``evaluations.jsonl``: which file, which lines, and the
    frames of the last evaluation that could be read."""
    return [
        {
            "run": str(run.dir),
            "file": str(run.dir / EVALUATIONS_FILE),
            "skipped": [{"line": line, "why": why} for line, why in run.skipped],
            "last_frames": run.evaluations[-1]["frames"] if run.evaluations else None,
        }
        for run in runs
        if run.skipped
    ]


def objective_keys(metric: str, runs: list[RunRecord]) -> list[str]:
    """Per-objective variants of ``metric`` the runs report (``.../objective_<i>/<name>``)."""
    head, _, name = metric.rpartition("/")
    pattern = re.compile(re.escape(f"{head}/objective_") + r"(\d+)/" + re.escape(name) + "$")
    found: dict[int, str] = {}
    for run in runs:
        for key in ((run.summary or {}).get("eval") or {}) | (run.evaluations or [{}])[-1]:
            if match := pattern.match(key):
                found[int(match.group(1))] = key
    return [found[i] for i in sorted(found)]


def _split(group: Group, metric: str) -> tuple[list[RunRecord], list[tuple[RunRecord, str]]]:
    """The runs a group averages and the others with why. A seed counts once: a second completed
    run of a seed (the same run again, a copy) is one sample twice, and averaging both as
    independent narrows the interval; the first by folder name is kept, whatever its value."""
    used, excluded = [], []
    first_of_seed: dict[int, RunRecord] = {}
    for run in sorted(group.runs, key=lambda r: str(r.dir)):
        if not run.completed:
            excluded.append((run, f"{run.status}: not averaged"))
        elif run.final(metric) is None:
            excluded.append((run, f"no {metric}: not averaged"))
        elif run.seed is not None and run.seed in first_of_seed:
            first = first_of_seed[run.seed].dir.name
            excluded.append((run, f"{REPEATED_SEED} {run.seed} (as {first}): not averaged"))
        else:
            if run.seed is not None:
                first_of_seed[run.seed] = run
            used.append(run)
    used.sort(key=lambda r: (r.seed is None, r.seed or 0, str(r.dir)))
    return used, excluded


def repeated_seed_warnings(analysis: Analysis) -> list[str]:
    """One line per run left out of its group's statistics for repeating a seed."""
    return [
        f"{result.group.name}: {run.dir}: {why} (one seed is one sample; give each run its own "
        "seed)"
        for result in analysis.groups
        for run, why in result.excluded
        if why.startswith(REPEATED_SEED)
    ]


def _history(run: RunRecord, metric: str) -> tuple[list[float], list[float]]:
    points = [(r["frames"], r[metric]) for r in run.evaluations if metric in r]
    return [float(f) for f, _ in points], [float(v) for _, v in points]


def analyze_group(group: Group, metric: str) -> GroupResult:
    """The statistics of one group's completed runs."""
    used, excluded = _split(group, metric)
    values = [v for r in used if (v := r.final(metric)) is not None]
    histories = [h for r in used if (h := _history(r, metric))[0]]
    objectives = {
        key: summarize([v for r in used if (v := r.final(key)) is not None])
        for key in objective_keys(metric, used)
    }
    return GroupResult(
        group=group,
        used=used,
        excluded=excluded,
        final=summarize(values),
        curve=curve(histories),
        objectives=objectives,
    )


def _rank(result: GroupResult) -> tuple[bool, str, bool, float]:
    env, iqm = result.group.env, result.final["iqm"]
    return (env is None, env or "", iqm is None, -iqm if iqm is not None else 0.0)


def analyze(runs: list[RunRecord], metric: str = DEFAULT_METRIC) -> Analysis:
    """Group ``runs``, summarize each group (by env, best final IQM first), compare groups of
    one env."""
    results = sorted((analyze_group(g, metric) for g in group_runs(runs)), key=_rank)
    improvement = []
    for x, y in combinations(results, 2):
        if x.group.env != y.group.env or not x.used or not y.used:
            continue
        poi = probability_of_improvement(x.values(metric), y.values(metric))
        improvement.append({"env": x.group.env, "x": x.group.name, "y": y.group.name, **poi})
    return Analysis(metric=metric, groups=results, improvement=improvement, short=short_runs(runs))
