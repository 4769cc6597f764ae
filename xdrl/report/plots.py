"""The report's figures: learning curves (IQM and 95% band) and final IQM interval estimates.

Drawn on matplotlib ``Figure`` objects saved through the Agg canvas, without ``pyplot``: no
global backend is switched and no window can open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 120


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def plot_curves(groups: list[dict[str, Any]], metric: str, path: Path) -> Path:
    """One line (IQM) and band (95% interval) per group against collected frames."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    for i, group in enumerate(groups):
        points = group["curve"]
        if not points:
            continue
        frames = [p["frames"] for p in points]
        iqms = [p["iqm"] for p in points]
        ax.plot(frames, iqms, "o-", color=f"C{i}", label=_label(group), linewidth=1.8, markersize=3)
        if all(p["ci"] is not None for p in points):
            low = [p["ci"][0] for p in points]
            high = [p["ci"][1] for p in points]
            ax.fill_between(frames, low, high, color=f"C{i}", alpha=0.2, linewidth=0)
    ax.set_xlabel("collected frames")
    ax.set_ylabel(f"IQM of {metric.rsplit('/', 2)[-2]}/{metric.rsplit('/', 1)[-1]}")
    ax.set_title("Learning curves: IQM over seeds, 95% stratified bootstrap interval")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")
    return _save(fig, path)


def plot_final(groups: list[dict[str, Any]], metric: str, path: Path) -> Path:
    """Final IQM per group with its 95% interval; each run's final value as a dot."""
    shown = [(i, g) for i, g in enumerate(groups) if g["final"]["iqm"] is not None]
    fig = Figure(figsize=(7, 1.0 + 0.55 * max(len(shown), 1)))
    ax = fig.subplots()
    for row, (i, group) in enumerate(reversed(shown)):  # the best group on top
        final = group["final"]
        if final["iqm_ci"] is not None:
            low, high = final["iqm_ci"]
            ax.barh(row, high - low, left=low, height=0.5, color=f"C{i}", alpha=0.35)
        ax.plot([final["iqm"]], [row], marker="D", markersize=6, color=f"C{i}")
        values = group.get("values") or []
        ax.plot(values, [row] * len(values), "o", color="black", markersize=3, alpha=0.6)
    ax.set_yticks(range(len(shown)), [_label(g) for _, g in reversed(shown)])
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.use_sticky_edges = False  # bars would pin the limits to their ends
    ax.margins(x=0.08)
    ax.set_xlabel(f"final {metric}")
    ax.set_title("Final IQM (bar: 95% interval; dots: runs)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def _label(group: dict[str, Any]) -> str:
    return f"{group['name']} (n={group['runs']})"
