"""Several seeds per trial: which seeds, how their values become the trial's, and the checks.

A trial scored on one run rewards a lucky seed (Eimer, Lindauer and Raileanu, ICML 2023, show
tuning results swing with the tuning seed). With ``hydra.sweeper.seeds_per_trial: k`` each trial
runs the tuning seeds ``seed, seed + 1, ..., seed + k - 1`` (``seed`` is the config's, 0 by
default) and its value is an aggregate of their final objectives; the re-check stage runs the
winners on the test seeds ``recheck.first_seed, ...`` (1000 on by default). The two ranges are
checked disjoint before anything runs, so no winner is re-checked on a seed it was tuned on.

The statistics are :mod:`xdrl.report.stats`' (SciPy's ``trim_mean`` and percentile bootstrap),
so a trial's IQM and interval are the numbers ``xdrl-report`` gives for the same runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdrl.config.errors import ConfigError

AGGREGATES = ("iqm", "mean", "median", "min")  # hydra.sweeper.aggregate


def tuning_seeds(base: int, count: int) -> list[int]:
    """The seeds every trial runs: ``base, base + 1, ..., base + count - 1``."""
    return list(range(base, base + count))


def recheck_seeds(first: int, count: int) -> list[int]:
    """The seeds the re-check runs the winners on: ``first, ..., first + count - 1``."""
    return list(range(first, first + count))


def statistic(name: str) -> Any:
    """The NumPy/SciPy function behind an aggregate's name (``axis`` keyword, as bootstrap
    wants)."""
    import numpy as np

    from xdrl.report.stats import iqm

    return {"iqm": iqm, "mean": np.mean, "median": np.median, "min": np.min}[name]


def aggregate(values: Sequence[float], name: str) -> float:
    """The trial's value from its seeds' values (``iqm``: mean of the middle half)."""
    return float(statistic(name)(list(values), axis=-1))


def interval(values: Sequence[float], name: str) -> list[float] | None:
    """The 95% percentile-bootstrap interval of the aggregate (None below two values)."""
    from xdrl.report.stats import stratified_interval

    bounds = stratified_interval([list(values)], statistic(name))
    return None if bounds is None else [float(bounds[0]), float(bounds[1])]


def check_seed_settings(
    *, seeds_per_trial: int, aggregate_name: str, base_seed: int, recheck: dict[str, int]
) -> None:
    """Raise :class:`ConfigError` for a setting that cannot run: fewer than one seed per trial,
    an unknown aggregate, a negative re-check, or test seeds that overlap the tuning seeds."""
    if not isinstance(seeds_per_trial, int) or seeds_per_trial < 1:
        raise ConfigError(
            "hydra.sweeper.seeds_per_trial",
            f"got {seeds_per_trial!r}; set a whole number >= 1 (e.g. 3)",
        )
    if aggregate_name not in AGGREGATES:
        raise ConfigError(
            "hydra.sweeper.aggregate",
            f"got {aggregate_name!r}; set one of {', '.join(AGGREGATES)}",
        )
    for key in ("top", "seeds"):
        if not isinstance(recheck[key], int) or recheck[key] < 0:
            raise ConfigError(
                f"hydra.sweeper.recheck.{key}", f"got {recheck[key]!r}; set a whole number >= 0"
            )
    if recheck["top"] and recheck["seeds"] < 1:
        raise ConfigError(
            "hydra.sweeper.recheck.seeds", "a re-check needs seeds >= 1; set e.g. 10 (or top=0)"
        )
    tuning = set(tuning_seeds(base_seed, seeds_per_trial))
    test = set(recheck_seeds(recheck["first_seed"], recheck["seeds"] if recheck["top"] else 0))
    if tuning & test:
        raise ConfigError(
            "hydra.sweeper.recheck.first_seed",
            f"test seeds {min(test)}..{max(test)} overlap the tuning seeds {min(tuning)}.."
            f"{max(tuning)}; set first_seed above {max(tuning)}",
        )
