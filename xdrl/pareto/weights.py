"""Scalarization weights: evenly spread over the simplex, and the corner weights of optimistic
linear support (OLS, Roijers et al. 2015) for two objectives."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)

_EPS = 1e-9


def simplex_weights(num: int, dim: int, seed: int = 1) -> list[list[float]]:
    """``num`` weight vectors of ``dim`` objectives spread evenly over the simplex.

    Two objectives: the lattice ``w0 = i / (num - 1)`` from ``[0, 1]`` to ``[1, 0]``. More:
    pymoo's Riesz s-energy directions (``get_reference_directions("energy", ...)``), which spread
    any number of points evenly (a Das-Dennis lattice only takes binomial counts).

    Example:
        >>> simplex_weights(3, 2)
        [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]
    """
    if num < 1 or dim < 2:
        raise ValueError(f"need num >= 1 and dim >= 2, got num={num}, dim={dim}")
    if num == 1:
        return [[1.0 / dim] * dim]
    if dim == 2:
        return [[i / (num - 1), 1.0 - i / (num - 1)] for i in range(num)]
    from pymoo.util.ref_dirs import get_reference_directions

    dirs = get_reference_directions("energy", dim, num, seed=seed)
    dirs = np.clip(dirs, 0.0, None)
    dirs = dirs / dirs.sum(axis=1, keepdims=True)
    return [[float(x) for x in row] for row in dirs]


def inside_simplex(weights: Sequence[float], margin: float) -> list[float]:
    """``weights`` with every component at least ``margin``: the shortfall of the small ones
    is taken from the others in proportion to what they have above ``margin`` (a vector
    already inside is unchanged).

    Example:
        >>> inside_simplex([1.0, 0.0], 0.01)
        [0.99, 0.01]
        >>> inside_simplex([0.5, 0.5, 0.0], 0.01)
        [0.495, 0.495, 0.01]
    """
    w = [float(x) for x in weights]
    short = sum(margin - x for x in w if x < margin)
    if short <= 0:
        return w
    room = sum(x - margin for x in w if x >= margin)
    return [margin if x < margin else x - short * (x - margin) / room for x in w]


def weights_of_w0(w0: float) -> list[float]:
    """The two-objective weight vector ``[w0, 1 - w0]``."""
    return [float(w0), 1.0 - float(w0)]


def _slope(point: Sequence[float]) -> float:
    return float(point[0]) - float(point[1])


def scalarized(point: Sequence[float], w0: float) -> float:
    """``w . point`` for ``w = [w0, 1 - w0]``."""
    return w0 * float(point[0]) + (1.0 - w0) * float(point[1])


def upper_value(points: Sequence[Sequence[float]], w0: float) -> float:
    """The best scalarized value among ``points`` at ``[w0, 1 - w0]`` (the upper surface)."""
    return max(scalarized(p, w0) for p in points)


def corner_weights(points: Sequence[Sequence[float]]) -> list[float]:
    """The ``w0`` values in (0, 1) where the best point of ``points`` changes (two objectives).

    The upper surface ``max_p w . p`` over ``w = [w0, 1 - w0]`` is piecewise linear; a corner
    is where two of its lines meet (``w . a == w . b``). Points never best at any weight have
    no corner.

    Example:
        >>> corner_weights([(0.7, -1.0), (8.2, -3.0)])  # (-3 + 1) / ((0.7 - 8.2) - (-1 + 3))
        [0.21052631578947367]
    """
    pts = {(float(p[0]), float(p[1])) for p in points}
    if not pts:
        return []
    current = max(pts, key=lambda p: (p[1], _slope(p)))  # best at w0 = 0
    w, corners = 0.0, list[float]()
    while True:
        step: tuple[float, tuple[float, float]] | None = None
        for p in pts:
            ds = _slope(p) - _slope(current)
            if ds <= _EPS:
                continue
            x = (current[1] - p[1]) / ds
            if x < w - _EPS or x > 1.0 + _EPS:
                continue
            tie = step is not None and abs(x - step[0]) <= _EPS and _slope(p) > _slope(step[1])
            if step is None or x < step[0] - _EPS or tie:
                step = (x, p)  # the nearest crossing; on a tie the steepest line
        if step is None:
            return corners
        w, current = step
        if _EPS < w < 1.0 - _EPS:
            corners.append(w)


def ols_candidates(
    evaluated: dict[float, Sequence[float] | None], tolerance: float
) -> list[tuple[float, float]]:
    """The corner weights OLS should try next, as ``(w0, optimistic improvement)``, best first.

    ``evaluated`` maps each ``w0`` already trained (the extremes 0 and 1 first) to the point it
    gave (None: the job failed). The scalarized optimum ``V*(w)`` is convex in ``w`` and exact at
    trained weights, so at a corner between trained weights ``lo < c < hi`` it lies at most on
    the chord between ``V(lo)`` and ``V(hi)``: the optimistic improvement is that chord minus the
    current surface at ``c``. Corners already trained, or whose improvement is at most
    ``tolerance``, are dropped; an empty list means OLS is done.
    """
    points = [p for p in evaluated.values() if p is not None]
    if not points:
        return []
    trained = sorted(evaluated)
    out = []
    for c in corner_weights(points):
        if any(abs(c - t) <= 1e-6 for t in trained):
            continue
        lower = [t for t in trained if t < c]
        upper = [t for t in trained if t > c]
        if not lower or not upper:
            continue
        lo, hi = lower[-1], upper[0]
        lam = (hi - c) / (hi - lo)
        chord = lam * upper_value(points, lo) + (1.0 - lam) * upper_value(points, hi)
        gain = chord - upper_value(points, c)
        if gain > tolerance:
            out.append((c, gain))
    return sorted(out, key=lambda item: -item[1])


def optimistic_linear_support(
    evaluate: Callable[[list[float]], list[Sequence[float] | None]],
    *,
    tolerance: float,
    max_evals: int,
    cost: int = 1,
    w0_range: tuple[float, float] = (0.0, 1.0),
    spent: Callable[[], int] | None = None,
) -> dict[float, Sequence[float] | None]:
    """OLS for two objectives in rounds: train at the ends of ``w0_range``, then at every
    corner weight whose optimistic improvement exceeds ``tolerance`` (best first), until none
    is left or the next round would pass ``max_evals``.

    Args:
        evaluate: trains at each ``w0`` of a round, returns its point (None: failed).
        tolerance: smallest optimistic improvement of the scalarized value still worth a job.
        max_evals: budget in jobs; a round is cut to what is left.
        cost: jobs per weight (seeds x other sweep values).
        w0_range: the first objective's weights to search; corners outside are not tried.
        spent: jobs spent so far, when ``evaluate`` may spend more than ``cost`` per weight
            (e.g. re-runs of suspect points); None: ``cost`` per weight evaluated.

    Returns:
        every ``w0`` tried, with its point.

    Example:
        >>> ccs = [(0.7, -1.0), (23.7, -19.0)]
        >>> best = lambda ws: [max(ccs, key=lambda p: scalarized(p, w)) for w in ws]
        >>> sorted(optimistic_linear_support(best, tolerance=1e-6, max_evals=10))
        [0.0, 0.43902439024390244, 1.0]
    """
    evaluated: dict[float, Sequence[float] | None] = {}
    batch, used = [float(w0_range[0]), float(w0_range[1])], 0
    while batch:
        for w, point in zip(batch, evaluate(batch), strict=True):
            evaluated[w] = point
        used += len(batch) * cost
        if spent is not None:
            used = spent()
        candidates = ols_candidates(evaluated, tolerance)
        room = max((max_evals - used) // cost, 0)
        if len(candidates) > room:
            log.info(
                "OLS: budget of %d jobs spent, %d corners left", max_evals, len(candidates) - room
            )
        batch = [w for w, _ in candidates[:room]]
    return evaluated
