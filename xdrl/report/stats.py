"""Aggregate statistics after Agarwal et al. 2021, "Deep RL at the edge of the statistical
precipice": the interquartile mean (IQM), stratified bootstrap confidence intervals, and the
probability of improvement.

Everything is SciPy: ``stats.trim_mean(x, 0.25)`` is the IQM (the mean of the middle half of the
runs) and ``stats.bootstrap`` draws the intervals. Given one sample per task (stratum), SciPy
resamples each independently, which is the stratified bootstrap; a group here is one
configuration on one environment, so a group is one stratum. The intervals are percentile
intervals (as rliable's default): BCa, SciPy's default, is undefined when every run scores the
same (CartPole's 500 on every seed) and returns NaN there. SciPy is imported where a statistic
is computed, not with this module: ``scipy.stats`` takes 0.6 s to import, and ``xdrl-report``
refuses bad input (no runs, an unknown ``--metric``) before it computes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

CONFIDENCE = 0.95
N_RESAMPLES = 10_000
BATCH = 1_000  # resamples drawn at once: bounds memory for long curves of many runs
METHOD = "percentile"
SEED = 0  # the bootstrap's random stream: a report is reproducible

Interval = list[float] | None


def iqm(values: Any, axis: int = -1) -> Any:
    """Interquartile mean: the mean of the values left after cutting 25% at each end."""
    from scipy import stats

    return stats.trim_mean(values, 0.25, axis=axis)


def _pooled(statistic: Callable[..., Any]) -> Callable[..., Any]:
    """``statistic`` over every stratum's runs together (the strata are resampled apart)."""

    def pooled(*strata: Any, axis: int = -1) -> Any:
        return statistic(np.concatenate(strata, axis=axis), axis=axis)

    return pooled


def stratified_interval(
    strata: Sequence[Any], statistic: Callable[..., Any], *, axis: int = 0
) -> Any:
    """The 95% stratified percentile-bootstrap interval of ``statistic`` over ``strata``.

    Each stratum (a task's runs, along ``axis``) is resampled with replacement on its own;
    ``statistic(x, axis=...)`` sees the resampled strata joined. Returns ``(low, high)`` arrays
    (one value each for 1-D strata), or None when a stratum has fewer than two runs.
    """
    arrays = [np.asarray(s, dtype=float) for s in strata]
    if any(a.shape[axis] < 2 for a in arrays):
        return None
    from scipy import stats

    result = stats.bootstrap(
        tuple(arrays),
        _pooled(statistic),
        n_resamples=N_RESAMPLES,
        batch=BATCH,
        vectorized=True,
        axis=axis,
        confidence_level=CONFIDENCE,
        method=METHOD,
        rng=np.random.default_rng(SEED),
    )
    return result.confidence_interval.low, result.confidence_interval.high


def _as_interval(bounds: Any) -> Interval:
    if bounds is None:
        return None
    return [float(bounds[0]), float(bounds[1])]


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Mean, standard deviation (n-1), median, IQM, and the 95% intervals of IQM and mean.

    With one run the standard deviation and both intervals are None; with none, everything.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return {k: None for k in ("mean", "std", "median", "iqm", "iqm_ci", "mean_ci")}
    return {
        "mean": float(np.mean(x)),
        "std": float(np.std(x, ddof=1)) if x.size > 1 else None,
        "median": float(np.median(x)),
        "iqm": float(iqm(x)),
        "iqm_ci": _as_interval(stratified_interval([x], iqm)),
        "mean_ci": _as_interval(stratified_interval([x], np.mean)),
    }


def align(histories: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[Any, Any]:
    """Runs' (frames, values) put on one frame grid: ``(frames, values[run, frame])``.

    The grid is the union of the runs' evaluation frames within the span every run covers (from
    the latest first evaluation to the earliest last one); a run's value at a frame where it did
    not evaluate is linearly interpolated between its two neighbouring evaluations. Nothing is
    extrapolated, so a curve ends where its shortest run ends.
    """
    runs = [(np.asarray(f, dtype=float), np.asarray(v, dtype=float)) for f, v in histories]
    runs = [(f, v) for f, v in runs if f.size]
    if not runs:
        return np.empty(0, dtype=int), np.empty((0, 0))
    start = max(f[0] for f, _ in runs)
    end = min(f[-1] for f, _ in runs)
    grid = np.unique(np.concatenate([f for f, _ in runs]))
    grid = grid[(grid >= start) & (grid <= end)]
    values = np.stack([np.interp(grid, f, v) for f, v in runs])
    return grid.astype(int), values


def curve(histories: Sequence[tuple[Sequence[float], Sequence[float]]]) -> list[dict[str, Any]]:
    """IQM and its 95% interval at each frame of the aligned runs (see :func:`align`)."""
    frames, values = align(histories)
    if frames.size == 0:
        return []
    points = iqm(values, axis=0)
    bounds = stratified_interval([values], iqm, axis=0)
    out = []
    for i, frame in enumerate(frames):
        ci = None if bounds is None else [float(bounds[0][i]), float(bounds[1][i])]
        out.append({"frames": int(frame), "iqm": float(points[i]), "ci": ci})
    return out


def _improvement(x: Any, y: Any, axis: int = -1) -> Any:
    """P(X > Y) over every pair of runs, ties counting one half (the Mann-Whitney U / nm)."""
    x = np.moveaxis(np.asarray(x), axis, -1)[..., :, None]
    y = np.moveaxis(np.asarray(y), axis, -1)[..., None, :]
    return ((x > y) + 0.5 * (x == y)).mean(axis=(-2, -1))


def probability_of_improvement(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """P(a run of X scores higher than a run of Y) and its stratified 95% interval.

    The runs of X and of Y are resampled apart (two strata); one run on either side gives no
    interval.
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    p = float(_improvement(xa, ya))
    if xa.size < 2 or ya.size < 2:
        return {"p": p, "ci": None}
    from scipy import stats

    result = stats.bootstrap(
        (xa, ya),
        _improvement,
        n_resamples=N_RESAMPLES,
        vectorized=True,
        confidence_level=CONFIDENCE,
        method=METHOD,
        rng=np.random.default_rng(SEED),
    )
    ci = result.confidence_interval
    return {"p": p, "ci": [float(ci.low), float(ci.high)]}
