"""Front metrics for maximized objectives: dominance filter, hypervolume, IGD, expected utility
(EUM), maximum utility loss, cardinality.

Hypervolume and IGD come from pymoo's indicators (``pymoo.indicators.hv.HV``,
``pymoo.indicators.igd.IGD``), which minimize: points and reference are negated on the way in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Points = Sequence[Sequence[float]]


def _array(points: Points) -> np.ndarray:
    arr = np.asarray(points, dtype=float)
    return arr.reshape(len(arr), -1) if arr.size else np.zeros((0, 0))


def non_dominated(points: Points) -> list[list[float]]:
    """The points no other point dominates (>= in every objective, > in one), duplicates once,
    sorted by the first objective.

    Example:
        >>> non_dominated([(1, 2), (2, 1), (1, 1), (2, 1)])
        [[1.0, 2.0], [2.0, 1.0]]
    """
    from pymoo.util.nds.non_dominated_sorting import find_non_dominated

    arr = np.unique(_array(points), axis=0) if len(points) else _array(points)
    front = arr[find_non_dominated(-arr)] if len(arr) else arr  # pymoo minimizes
    front = front[np.lexsort(front.T[::-1])] if len(front) else front
    return [[float(x) for x in row] for row in front]


def hypervolume(points: Points, ref_point: Sequence[float]) -> float:
    """Volume dominated by ``points`` and dominating ``ref_point`` (points not above the
    reference in every objective add nothing)."""
    from pymoo.indicators.hv import HV

    arr, ref = _array(points), np.asarray(ref_point, dtype=float)
    if not len(arr):
        return 0.0
    arr = arr[np.all(arr > ref, axis=1)]
    if not len(arr):
        return 0.0
    return float(HV(ref_point=-ref)(-arr))


def igd(points: Points, true_front: Points) -> float:
    """Inverted generational distance: mean distance from each true-front point to the nearest
    point found (0 when the front was found exactly)."""
    from pymoo.indicators.igd import IGD

    return float(IGD(-_array(true_front))(-_array(points)))


def utilities(points: Points, weights: Points) -> np.ndarray:
    """For each weight vector, the best scalarized value ``max_p w . p``."""
    return (_array(weights) @ _array(points).T).max(axis=1)


def expected_utility(points: Points, weights: Points) -> float:
    """EUM: the mean over ``weights`` of the best scalarized value among ``points``."""
    return float(utilities(points, weights).mean())


def max_utility_loss(points: Points, true_front: Points, weights: Points) -> float:
    """The largest loss of scalarized value against the true front, over ``weights``."""
    return float((utilities(true_front, weights) - utilities(points, weights)).max())


def mean_ci95(values: Sequence[float]) -> list[float] | None:
    """A 95% Student-t interval for the mean of ``values`` (None with fewer than 2)."""
    if len(values) < 2:
        return None
    from scipy import stats

    arr = np.asarray(values, dtype=float)
    low, high = stats.t.interval(0.95, len(arr) - 1, loc=arr.mean(), scale=stats.sem(arr))
    return [float(low), float(high)]
