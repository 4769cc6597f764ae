"""A second objective: how many frames a trial's runs needed to reach a threshold.

With ``hydra.sweeper.frames_to_reach: <value>`` the study has two objectives, the run's
``objective`` (``direction``) and the frames until its evaluations first reached ``<value>``
(minimized; ``inf`` when a run never did), read from each job's ``evaluations.jsonl``. A fast
configuration that ends a little lower and a slow one that ends higher are then both kept: the
study's result is its Pareto set (``study.best_trials``), listed in ``study.md`` and
``optimization_results.yaml``. With several seeds per trial both values are the trial's aggregate
of its seeds' values (``iqm`` ...; one seed that never reaches the threshold makes the mean
``inf``, not the median).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hydra_plugins.xdrl_optuna.pruning import objective_values

FRAMES_TO_ATTR = "seed_frames_to"  # trial user attribute: {seed: frames to reach the threshold}
FRAMES_TO_NAME = "frames to reach"  # the second objective's name in study.md


def frames_to_reach(folder: Path, objective: str, threshold: float, maximize: bool) -> float:
    """The frames of the first evaluation in ``folder`` whose ``objective`` reached
    ``threshold`` (at or above it when maximizing, at or below when minimizing); ``inf`` if
    none did."""
    for frames, value in sorted(objective_values(folder, objective).items()):
        if (value >= threshold) if maximize else (value <= threshold):
            return float(frames)
    return math.inf


def pareto_rows(study: Any) -> list[dict[str, Any]]:
    """The study's Pareto set (complete trials no other trial beats on both objectives), best
    first objective first: ``{trial, values, params}`` each."""
    from optuna.study import StudyDirection

    sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
    front = sorted(study.best_trials, key=lambda t: (sign * t.values[0], t.values[1], t.number))
    return [
        {"trial": t.number, "values": [float(v) for v in t.values], "params": dict(t.params)}
        for t in front
    ]
