"""Optuna's Wilcoxon pruner on the evaluations of running jobs: each (seed, evaluation) pair is
one instance, so a clearly worse trial stops part-way through its runs.

``hydra/sweeper/pruner=wilcoxon`` judges a trial between its seeds: with 3 seeds the exact
one-sided signed-rank test cannot go below p = 0.25 after 2 of them, so it either never prunes
or prunes on two values (measured in docs/optuna.md: 13% of the wall time saved, a worse
result), and a trial's last seed, the only one it can save, is a third of the trial at most.
Here every evaluation a job writes while it trains (``eval.interval_frames``) is an instance
(:func:`~.pruning.instance_step` numbers them): after 3 evaluations of 2 seeds there are 6 pairs
with the best trial's same seed at the same frames (minimum p 1/64), so a trial whose runs are
behind the best's on every instance stops after a quarter of its frames
(:class:`~.pruning.EvaluationWatcher` reports the instances and writes the stop requests).

The assumption this makes: the signed-rank test takes its instances as independent, and two
evaluations of one run are not (a run that is behind at 4,096 frames is likely behind at 6,144
too), so its p-value is smaller than the evidence warrants: read ``p_threshold`` as a knob of
how readily a trial is stopped, not as an error rate. Early evaluations also rank a
configuration by how fast it learns, not by where it ends; the re-check on fresh test seeds
(``recheck``) is what keeps a search pruned this way honest.

Optuna is imported only when the class is used (``EvaluationWilcoxonPruner`` is looked up on
first use, from :mod:`._wilcoxon_pruner`): Hydra's plugin scan imports this module at every start
of ``xdrl-train``, ``xdrl-eval`` and ``xdrl-export``, and without the ``sweep`` extra an import of
Optuna here printed Hydra's five-line "Error importing ... No module named 'optuna'" each time.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``EvaluationWilcoxonPruner`` (imports Optuna); any other name is missing."""
    if name == "EvaluationWilcoxonPruner":
        from hydra_plugins.xdrl_optuna._wilcoxon_pruner import EvaluationWilcoxonPruner

        return EvaluationWilcoxonPruner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
