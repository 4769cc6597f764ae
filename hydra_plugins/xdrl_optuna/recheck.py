"""Re-check the winners of a search on fresh test seeds, and write the best as a preset.

A search's best value is an over-estimate: of many trials, the one whose seeds happened to run
well wins. ``hydra.sweeper.recheck.top: N`` re-runs the N best complete trials on
``recheck.seeds`` test seeds (``first_seed`` on, disjoint from the tuning seeds: checked before
anything runs), in ``<sweep dir>/recheck/<trial>_seed<seed>/``. The recommended configuration is
the best after re-check; it is written as an experiment preset
(``<sweep dir>/presets/experiment/<study>_best.yaml``, ``# @package _global_`` overrides, its
measured result and interval in the header), which
``xdrl-train --config-dir <sweep dir>/presets experiment=<study>_best`` runs (or copy it into
``conf/experiment/``). The table of search value against re-check value per trial goes to the
study's user attributes, ``optimization_results.yaml`` and ``<sweep dir>/recheck.md``.

The re-checked seeds are kept in the study's user attribute ``recheck``, so a re-check stopped
by Ctrl-C continues with the seeds it lacks when the command runs again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.xdrl_optuna.seeded import outcome
from hydra_plugins.xdrl_optuna.seeds import aggregate, interval, recheck_seeds
from xdrl.report.study import (
    INTERVAL_ATTR,
    RECHECK_TABLE,  # the sweep table prints it
)
from xdrl.run.layout import write_atomically

log = logging.getLogger(__name__)

RECHECK_DIR = "recheck"  # under the sweep dir: one folder per (trial, test seed)
RECHECK_ATTR = "recheck"  # study user attribute: {trial number: {seed: value}}
PRESETS_DIR = "presets"  # under the sweep dir: a config dir (--config-dir) holding experiment/
# Keys a preset leaves out: per run (seed, paths), or not part of what was measured.
PRESET_SKIP = ("seed", "run_dir", "exp_name", "resume", "logging", "checkpoint", "num_threads")
PRESET_GROUPS = ("env", "algorithm", "eval")  # groups a preset selects in its defaults list


def top_trials(study: Any, count: int) -> list[Any]:
    """The ``count`` complete trials with the best values (the study's direction)."""
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    best_first = study.direction == StudyDirection.MAXIMIZE
    return sorted(complete, key=lambda t: (t.value, -t.number), reverse=best_first)[:count]


def run_recheck(
    study: Any,
    *,
    settings: dict[str, int],
    aggregate_name: str,
    fixed: list[str],
    launch: Callable[[list[tuple[Any, int]]], Sequence[JobReturn]],
    compose: Callable[[list[str]], DictConfig],
    sweep_dir: Path,
    interrupted: Callable[[], bool],
) -> list[dict[str, Any]]:
    """Launch the test seeds the top trials lack (one launch), then write the table and the
    preset of the best after re-check. Returns the table's rows (best after re-check first)."""
    trials = top_trials(study, settings["top"])
    if not trials:
        log.error(
            "hydra.sweeper.recheck: no trial finished with a value, nothing to re-check; "
            "see the sweep table"
        )
        return []
    seeds = recheck_seeds(settings["first_seed"], settings["seeds"])
    measured = _measured(study)
    jobs = [(t, s) for t in trials for s in seeds if s not in measured.get(t.number, {})]
    if jobs:
        log.info("Re-checking trials %s on test seeds %s", [t.number for t in trials], seeds)
        for (trial, seed), ret in zip(jobs, launch(jobs), strict=True):
            kind, result = outcome(ret)
            if kind == "value":
                measured.setdefault(trial.number, {})[seed] = result
            else:
                log.warning("Re-check of trial %d seed %d: %s", trial.number, seed, result)
        study.set_user_attr(
            RECHECK_ATTR,
            {str(n): {str(s): v for s, v in vals.items()} for n, vals in measured.items()},
        )
    if interrupted():
        return []
    rows = _rows(study, trials, seeds, measured, aggregate_name)
    _write_table(rows, sweep_dir, aggregate_name)
    if rows and rows[0]["recheck_value"] is not None:
        best = next(t for t in trials if t.number == rows[0]["trial"])
        path = write_preset(best, rows[0], fixed, compose, sweep_dir, study.study_name)
        rows[0]["preset"] = str(path)
        log.info(
            "Best after re-check: trial %d, %s %.4g on test seeds (search: %.4g); run it with "
            "xdrl-train --config-dir %s experiment=%s",
            best.number,
            aggregate_name,
            rows[0]["recheck_value"],
            rows[0]["search_value"],
            path.parent.parent,
            path.stem,
        )
    return rows


def _measured(study: Any) -> dict[int, dict[int, float]]:
    saved = study.user_attrs.get(RECHECK_ATTR, {})
    return {int(n): {int(s): float(v) for s, v in vals.items()} for n, vals in saved.items()}


def _rows(
    study: Any,
    trials: list[Any],
    seeds: list[int],
    measured: dict[int, dict[int, float]],
    aggregate_name: str,
) -> list[dict[str, Any]]:
    """One row per re-checked trial: search value and interval, re-check value and interval,
    and how much the search over-estimated; best after re-check first."""
    from optuna.study import StudyDirection

    rows = []
    for trial in trials:
        values = [measured.get(trial.number, {}).get(s) for s in seeds]
        done = [v for v in values if v is not None]
        full = len(done) == len(seeds)
        value = aggregate(done, aggregate_name) if full else None
        rows.append(
            {
                "trial": trial.number,
                "params": dict(trial.params),
                "search_value": float(trial.value),
                "search_interval": trial.user_attrs.get(INTERVAL_ATTR),
                "recheck_value": value,
                "recheck_interval": interval(done, aggregate_name) if full else None,
                "recheck_seeds": dict(zip(seeds, values, strict=True)),
                "overestimate": float(trial.value) - value if value is not None else None,
            }
        )
    sign = 1.0 if study.direction == StudyDirection.MAXIMIZE else -1.0
    rows.sort(key=lambda r: -sign * r["recheck_value"] if r["recheck_value"] is not None else 1e300)
    return rows


def _fmt(value: float | None, bounds: list[float] | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" + (f" [{bounds[0]:.4g}, {bounds[1]:.4g}]" if bounds else "")


def _write_table(rows: list[dict[str, Any]], sweep_dir: Path, aggregate_name: str) -> None:
    """``recheck.md``: search vs re-check per trial, the recommended one first."""
    lines = [
        f"# Re-check of the best trials ({aggregate_name}, 95% bootstrap intervals)",
        "",
        "| trial | search value | re-check value | over-estimate | parameters |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        params = ", ".join(f"{k}={_fmt_param(v)}" for k, v in row["params"].items())
        lines.append(
            f"| {row['trial']} | {_fmt(row['search_value'], row['search_interval'])} | "
            f"{_fmt(row['recheck_value'], row['recheck_interval'])} | "
            f"{_fmt(row['overestimate'])} | {params} |"
        )
    write_atomically(sweep_dir / RECHECK_TABLE, "\n".join(lines) + "\n")


def _fmt_param(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def write_preset(
    trial: Any,
    row: dict[str, Any],
    fixed: list[str],
    compose: Callable[[list[str]], DictConfig],
    sweep_dir: Path,
    study_name: str,
) -> Path:
    """``<sweep dir>/presets/experiment/<study>_best.yaml``: the trial's configuration as an
    experiment preset: its groups in the defaults list, then every key whose value differs from
    what those groups give (per-run keys and logging aside)."""
    params = [f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in trial.params.items()]
    measured = compose([*fixed, *params])
    choices = measured.hydra.runtime.choices
    groups = [f"{g}={choices[g]}" for g in PRESET_GROUPS if choices.get(g) is not None]
    base = compose([*groups, "hydra/sweeper=optuna"])  # the command's sweeper keys need it
    diff = _diff(_plain(measured), _plain(base))
    seeds = list(row["recheck_seeds"])
    header = [
        "# @package _global_",
        f"# Best of Optuna study {study_name} after re-check (trial {trial.number}), written by "
        "the xdrl sweeper.",
        f"# Search value {_fmt(row['search_value'], row['search_interval'])} on the tuning seeds;"
        f" re-check {_fmt(row['recheck_value'], row['recheck_interval'])} on test seeds "
        f"{seeds[0]}..{seeds[-1]} (n={len(seeds)}; 95% bootstrap interval).",
        f"# Run: xdrl-train --config-dir {sweep_dir / PRESETS_DIR} experiment={study_name}_best",
    ]
    defaults = ["defaults:", *(f"  - override /{g.replace('=', ': ')}" for g in groups)]
    body = OmegaConf.to_yaml(OmegaConf.create(diff)) if diff else ""
    path = sweep_dir / PRESETS_DIR / "experiment" / f"{study_name}_best.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, "\n".join([*header, *defaults, ""]) + "\n" + body)
    return path


def _plain(config: DictConfig) -> dict[str, Any]:
    data = OmegaConf.to_container(config, resolve=False)
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items() if k != "hydra" and k not in PRESET_SKIP}


def _diff(measured: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The leaves of ``measured`` that ``base`` lacks or holds with another value (nested)."""
    out: dict[str, Any] = {}
    for key, value in measured.items():
        other = base.get(key)
        if isinstance(value, dict) and isinstance(other, dict):
            inner = _diff(value, other)
            if inner:
                out[key] = inner
        elif value != other:
            out[key] = value
    return out
