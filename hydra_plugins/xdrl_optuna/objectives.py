"""A second objective: how many frames a trial's runs needed to reach a threshold.

With ``hydra.sweeper.frames_to_reach: <value>`` the study has two objectives, the run's
``objective`` (``direction``) and the frames until its evaluations first reached ``<value>``
(minimized; ``inf`` when a run never did), read from each job's ``evaluations.jsonl``. A fast
configuration that ends a little lower and a slow one that ends higher are then both kept: the
study's result is its Pareto set (:func:`xdrl.report.study.pareto_rows`), in ``study.md`` and
``optimization_results.yaml``. With several seeds per trial both values are the trial's aggregate
of its seeds' values (``iqm`` ...; one seed that never reaches the threshold makes the mean
``inf``, not the median).
"""

from __future__ import annotations

import math
from pathlib import Path

from hydra_plugins.xdrl_optuna.pruning import objective_values


def frames_to_reach(folder: Path, objective: str, threshold: float, maximize: bool) -> float:
    """The frames of the first evaluation in ``folder`` whose ``objective`` reached
    ``threshold`` (at or above it when maximizing, at or below when minimizing); ``inf`` if
    none did."""
    for frames, value in sorted(objective_values(folder, objective).items()):
        if (value >= threshold) if maximize else (value <= threshold):
            return float(frames)
    return math.inf
