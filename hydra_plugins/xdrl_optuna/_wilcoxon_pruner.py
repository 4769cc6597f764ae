"""The class behind :mod:`.wilcoxon` (its docstring says what it does and assumes), in a module
whose name starts with ``_``: Hydra's plugin scan imports every other ``hydra_plugins`` module at
each start, and this one imports Optuna, which only the ``sweep`` extra installs."""

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
    # executes ``hydra_plugins`` modules again, and a class tested by identity does not survive
    # that (an instance made before the scan is not one of the class a module holds after it).
    judges_evaluations = True
