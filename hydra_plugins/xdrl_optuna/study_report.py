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

from hydra_plugins.xdrl_optuna.pruning import PRUNED_AT_ATTR
from hydra_plugins.xdrl_optuna.seeds import INTERVAL_ATTR, PRUNED_ATTR, SEED_VALUES_ATTR
from xdrl.run.layout import write_atomically

log = logging.getLogger(__name__)

STUDY_TABLE = "study.md"
DUPLICATE_ATTR = "duplicate_of"  # user attribute of an ask that repeated a trial's configuration
MIN_TRIALS_FOR_IMPORTANCE = 4  # fANOVA on fewer complete trials says nothing


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _row(trial: Any) -> str:
    attrs = trial.user_attrs
    value = "-" if trial.value is None else _num(trial.value)
    bounds = attrs.get(INTERVAL_ATTR)
    if bounds:
        value += f" [{_num(bounds[0])}, {_num(bounds[1])}]"
    seeds = ", ".join(f"{s}: {_num(v)}" for s, v in attrs.get(SEED_VALUES_ATTR, {}).items())
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
            importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError) as err:  # e.g. every trial the same value
        return [f"Parameter importances: not computed ({err})."]
    lines = ["| parameter | importance (fANOVA) |", "| --- | --- |"]
    return lines + [f"| {k} | {v:.3f} |" for k, v in importances.items()]


def write_study_report(study: Any, sweep_dir: Path) -> Path:
    """Write ``study.md`` (atomic); returns its path."""
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False) if DUPLICATE_ATTR not in t.user_attrs]
    sign = -1.0 if study.direction == StudyDirection.MAXIMIZE else 1.0
    trials.sort(key=lambda t: (t.value is None, sign * (t.value or 0.0), t.number))
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    lines = [
        f"# Optuna study {study.study_name} ({study.direction.name.lower()})",
        "",
        "| trial | state | value [95% CI] | seed: value | parameters | note |",
        "| --- | --- | --- | --- | --- | --- |",
        *(_row(t) for t in trials),
        "",
        *_importances(study, complete),
    ]
    return write_atomically(sweep_dir / STUDY_TABLE, "\n".join(lines) + "\n")
