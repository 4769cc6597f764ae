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
"""

from __future__ import annotations

from optuna.pruners import WilcoxonPruner


class EvaluationWilcoxonPruner(WilcoxonPruner):
    """``WilcoxonPruner`` whose instances are a trial's (seed, evaluation frames) pairs.

    The pruning rule is Optuna's own (one-sided signed-rank test of the trial's instances
    against the same instances of the best trial, ``p_threshold``, ``n_startup_steps``); the
    class only tells the sweeper to report each seed's evaluation while the runs train instead
    of each seed's final value between runs.

    Args:
        p_threshold: prune when the one-sided p-value is below this.
        n_startup_steps: instances a trial has before it can be pruned.

    Example:
        >>> pruner = EvaluationWilcoxonPruner(p_threshold=0.1, n_startup_steps=6)
    """

    # What :func:`~.pruning.pruner_kind` reads, rather than this class: Hydra's plugin scan
    # executes every ``hydra_plugins`` module again, so an instance made before the scan is not
    # an instance of the class the module holds after it.
    judges_evaluations = True
