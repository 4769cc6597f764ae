"""``<sweep dir>/study.md``: the study as a person reads it, written after every batch.

One row per launched trial (state, value and interval, each seed's value, parameters, why it
failed, after which seeds or at how many frames it was pruned), best first, then Optuna's
parameter importances (``optuna.importance.get_param_importances``, fANOVA on the complete
trials). The same study
opens in ``optuna-dashboard sqlite:///<sweep dir>/optuna.db`` for plots.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from hydra_plugins.xdrl_optuna.objectives import FRAMES_TO_ATTR, FRAMES_TO_NAME, pareto_rows
from hydra_plugins.xdrl_optuna.pruning import PRUNED_AT_ATTR
from hydra_plugins.xdrl_optuna.seeds import INTERVAL_ATTR, PRUNED_ATTR, SEED_VALUES_ATTR
from xdrl.run.layout import write_atomically

log = logging.getLogger(__name__)

STUDY_TABLE = "study.md"
DUPLICATE_ATTR = "duplicate_of"  # user attribute of an ask that repeated a trial's configuration
MIN_TRIALS_FOR_IMPORTANCE = 4  # fANOVA on fewer complete trials says nothing


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _first(trial: Any) -> float | None:
    """The trial's (first) objective value; None before it has one."""
    return None if trial.values is None else float(trial.values[0])


def _row(trial: Any) -> str:
    attrs = trial.user_attrs
    value = "-" if _first(trial) is None else _num(_first(trial))
    bounds = attrs.get(INTERVAL_ATTR)
    if bounds:
        value += f" [{_num(bounds[0])}, {_num(bounds[1])}]"
    if trial.values is not None and len(trial.values) > 1:
        value += f"; {FRAMES_TO_NAME} {_num(float(trial.values[1]))}"
    seeds = ", ".join(f"{s}: {_num(v)}" for s, v in attrs.get(SEED_VALUES_ATTR, {}).items())
    if FRAMES_TO_ATTR in attrs:
        frames = ", ".join(f"{s}: {_num(v)}" for s, v in attrs[FRAMES_TO_ATTR].items())
        seeds += f" ({FRAMES_TO_NAME}: {frames})"
    note = attrs.get("error") or (
        f"pruned after seeds {attrs[PRUNED_ATTR]}" if PRUNED_ATTR in attrs else ""
    )
    if attrs.get(PRUNED_AT_ATTR) is not None:
        note = f"pruned at {attrs[PRUNED_AT_ATTR]:,} frames"
    params = ", ".join(f"{k}={_num(v)}" for k, v in trial.params.items())
    state = trial.state.name.lower()
    return f"| {trial.number} | {state} | {value} | {seeds or '-'} | {params} | {note} |"


def _importances(study: Any, complete: int) -> list[str]:
    if complete < MIN_TRIALS_FOR_IMPORTANCE:
        return [f"Parameter importances need {MIN_TRIALS_FOR_IMPORTANCE} complete trials."]
    import optuna

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importances = optuna.importance.get_param_importances(
                study,
                target=lambda t: t.values[0],  # the (first) objective
            )
    except (RuntimeError, ValueError) as err:  # e.g. every trial the same value
        return [f"Parameter importances: not computed ({err})."]
    lines = ["| parameter | importance (fANOVA) |", "| --- | --- |"]
    return lines + [f"| {k} | {v:.3f} |" for k, v in importances.items()]


def _pareto(study: Any) -> list[str]:
    """The Pareto set of a two-objective study: no other trial is better on both."""
    lines = [
        f"## Pareto set (objective, {FRAMES_TO_NAME} the threshold)",
        "",
        f"| trial | objective | {FRAMES_TO_NAME} | parameters |",
        "| --- | --- | --- | --- |",
    ]
    for row in pareto_rows(study):
        params = ", ".join(f"{k}={_num(v)}" for k, v in row["params"].items())
        first, frames = row["values"]
        lines.append(f"| {row['trial']} | {_num(first)} | {_num(frames)} | {params} |")
    return [*lines, ""]


def write_study_report(study: Any, sweep_dir: Path) -> Path:
    """Write ``study.md`` (atomic); returns its path."""
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False) if DUPLICATE_ATTR not in t.user_attrs]
    sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
    trials.sort(key=lambda t: (_first(t) is None, sign * (_first(t) or 0.0), t.number))
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    directions = ", ".join(d.name.lower() for d in study.directions)
    lines = [
        f"# Optuna study {study.study_name} ({directions})",
        "",
        "| trial | state | value [95% CI] | seed: value | parameters | note |",
        "| --- | --- | --- | --- | --- | --- |",
        *(_row(t) for t in trials),
        "",
        *(_pareto(study) if len(study.directions) > 1 else []),
        *_importances(study, complete),
    ]
    return write_atomically(sweep_dir / STUDY_TABLE, "\n".join(lines) + "\n")
