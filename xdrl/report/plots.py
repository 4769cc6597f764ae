"""The report's figures: learning curves (IQM and 95% band) and final IQM interval estimates,
one panel per environment (runs of different environments never share axes). A group keeps its
colour in both figures.

Drawn on matplotlib ``Figure`` objects saved through the Agg canvas, without ``pyplot``: no
global backend is switched and no window can open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 120
CURVES_TITLE = "Learning curves: IQM over seeds, 95% stratified bootstrap interval"
FINAL_TITLE = "Final IQM (bar: 95% interval; dots: runs)"


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def _by_env(groups: list[dict[str, Any]]) -> dict[Any, list[tuple[int, dict[str, Any]]]]:
    """Groups (with their colour index) per environment, in the groups' order."""
    out: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for i, group in enumerate(groups):
        out.setdefault(group.get("env"), []).append((i, group))
    return out


def _panel_title(title: str, env: Any, panels: int) -> str:
    return title if panels == 1 else f"{env}\n{title}"


def plot_curves(groups: list[dict[str, Any]], metric: str, path: Path) -> Path:
    """One line (IQM) and band (95% interval) per group against collected frames; a panel per
    environment."""
    envs = _by_env(groups)
    fig = Figure(figsize=(7, 4.2 * len(envs)))
    axes = fig.subplots(len(envs), 1, squeeze=False)[:, 0]
    for ax, (env, members) in zip(axes, envs.items(), strict=True):
        _curves_panel(ax, members, metric)
        ax.set_title(_panel_title(CURVES_TITLE, env, len(envs)))
    fig.tight_layout()
    return _save(fig, path)


def _curves_panel(ax: Any, members: list[tuple[int, dict[str, Any]]], metric: str) -> None:
    for i, group in members:
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
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")


def plot_final(groups: list[dict[str, Any]], metric: str, path: Path) -> Path:
    """Final IQM per group with its 95% interval, each run's final value as a dot; a panel per
    environment."""
    envs = _by_env(groups)
    shown = {
        env: [(i, g) for i, g in m if g["final"]["iqm"] is not None] for env, m in envs.items()
    }
    heights = [1.0 + 0.55 * max(len(rows), 1) for rows in shown.values()]
    fig = Figure(figsize=(7, sum(heights)))
    axes = fig.subplots(len(envs), 1, squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, (env, rows) in zip(axes[:, 0], shown.items(), strict=True):
        _final_panel(ax, rows, metric)
        ax.set_title(_panel_title(FINAL_TITLE, env, len(envs)))
    fig.tight_layout()
    return _save(fig, path)


def _final_panel(ax: Any, shown: list[tuple[int, dict[str, Any]]], metric: str) -> None:
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
    ax.grid(axis="x", alpha=0.3)


def _label(group: dict[str, Any]) -> str:
    return f"{group['name']} (n={group['runs']})"
