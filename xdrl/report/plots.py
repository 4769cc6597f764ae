"""The report's figures: learning curves (IQM and 95% band) and final IQM interval estimates,
one panel per environment (runs of different environments never share axes). A group keeps its
colour in both figures.

Group names longer than ``LABEL_MAX`` characters (an Optuna trial's three long floats) would
squeeze the axes out of the figure (matplotlib warned that tight layout could not be applied):
then each group is shown by a tag, ``G1`` for the first group of the report table, and a key
under the panels lists every tag's full name, wrapped to the figure's width.

Drawn on matplotlib ``Figure`` objects saved through the Agg canvas, without ``pyplot``: no
global backend is switched and no window can open.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 120
CURVES_TITLE = "Learning curves: IQM over seeds, 95% stratified bootstrap interval"
FINAL_TITLE = "Final IQM (bar: 95% interval; dots: runs)"
WIDTH = 7.0  # inches
LABEL_MAX = 40  # characters of the longest group name shown on the axes; longer: tags and a key
KEY_CHARS = 88  # characters per key line: 88 at 8 pt monospace (4.8 pt each) span 5.9 inches
LEGEND_ROWS = 8  # rows of a legend of tags before it takes another column
KEY_FONT = 8  # points
KEY_LINE = KEY_FONT * 1.3 / 72  # inches per key line


def group_labels(groups: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Each group's label on the axes and the lines of the key (none when every name fits)."""
    if all(len(g["name"]) <= LABEL_MAX for g in groups):
        return [_label(g["name"], g) for g in groups], []
    tags = [f"G{i + 1}" for i in range(len(groups))]
    key: list[str] = []
    for tag, group in zip(tags, groups, strict=True):
        indent = " " * (len(tag) + 2)
        key += textwrap.wrap(
            f"{tag}: {_label(group['name'], group)}", KEY_CHARS, subsequent_indent=indent
        )
    return [_label(tag, g) for tag, g in zip(tags, groups, strict=True)], key


def _key_height(key: list[str]) -> float:
    """Inches under the panels that the key takes (its lines and a margin)."""
    return KEY_LINE * len(key) + 0.2 if key else 0.0


def _figure(panels_height: float, key: list[str], **subplots: Any) -> tuple[Figure, Any]:
    """A figure of panels in one column above room for the key; its axes."""
    fig = Figure(figsize=(WIDTH, panels_height + _key_height(key)))
    return fig, fig.subplots(squeeze=False, **subplots)[:, 0]


def _finish(fig: Figure, key: list[str]) -> None:
    """Lay the panels out above the key and write the key in the strip left under them."""
    height = fig.get_figheight()
    bottom = _key_height(key) / height
    fig.tight_layout(rect=(0.0, bottom, 1.0, 1.0))
    if key:
        fig.text(
            0.01,
            bottom - 0.1 / height,
            "\n".join(key),
            va="top",
            ha="left",
            family="monospace",
            fontsize=KEY_FONT,
        )


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
    return _save(curves_figure(groups, metric), path)


def curves_figure(groups: list[dict[str, Any]], metric: str) -> Figure:
    """The learning-curves figure (drawn, not saved)."""
    envs = _by_env(groups)
    labels, key = group_labels(groups)
    fig, axes = _figure(4.2 * len(envs), key, nrows=len(envs), ncols=1)
    for ax, (env, members) in zip(axes, envs.items(), strict=True):
        _curves_panel(ax, members, metric, labels, tagged=bool(key))
        ax.set_title(_panel_title(CURVES_TITLE, env, len(envs)))
    _finish(fig, key)
    return fig


def _curves_panel(
    ax: Any,
    members: list[tuple[int, dict[str, Any]]],
    metric: str,
    labels: list[str],
    tagged: bool,
) -> None:
    for i, group in members:
        points = group["curve"]
        if not points:
            continue
        frames = [p["frames"] for p in points]
        iqms = [p["iqm"] for p in points]
        ax.plot(frames, iqms, "o-", color=f"C{i}", label=labels[i], linewidth=1.8, markersize=3)
        if all(p["ci"] is not None for p in points):
            low = [p["ci"][0] for p in points]
            high = [p["ci"][1] for p in points]
            ax.fill_between(frames, low, high, color=f"C{i}", alpha=0.2, linewidth=0)
    ax.set_xlabel("collected frames")
    ax.set_ylabel(f"IQM of {metric.rsplit('/', 2)[-2]}/{metric.rsplit('/', 1)[-1]}")
    ax.grid(alpha=0.3)
    shown = len(ax.get_legend_handles_labels()[0])
    if shown:  # tags (G1, ...) are short: in columns of LEGEND_ROWS, the legend stays inside
        columns = -(-shown // LEGEND_ROWS) if tagged else 1
        ax.legend(loc="best", fontsize="small", ncols=columns)


def plot_final(groups: list[dict[str, Any]], metric: str, path: Path) -> Path:
    """Final IQM per group with its 95% interval, each run's final value as a dot; a panel per
    environment."""
    return _save(final_figure(groups, metric), path)


def final_figure(groups: list[dict[str, Any]], metric: str) -> Figure:
    """The final-IQM figure (drawn, not saved)."""
    envs = _by_env(groups)
    labels, key = group_labels(groups)
    shown = {
        env: [(i, g) for i, g in m if g["final"]["iqm"] is not None] for env, m in envs.items()
    }
    heights = [1.0 + 0.55 * max(len(rows), 1) for rows in shown.values()]
    fig, axes = _figure(
        sum(heights), key, nrows=len(envs), ncols=1, gridspec_kw={"height_ratios": heights}
    )
    for ax, (env, rows) in zip(axes, shown.items(), strict=True):
        _final_panel(ax, rows, metric, labels)
        ax.set_title(_panel_title(FINAL_TITLE, env, len(envs)))
    _finish(fig, key)
    return fig


def _final_panel(
    ax: Any, shown: list[tuple[int, dict[str, Any]]], metric: str, labels: list[str]
) -> None:
    for row, (i, group) in enumerate(reversed(shown)):  # the best group on top
        final = group["final"]
        if final["iqm_ci"] is not None:
            low, high = final["iqm_ci"]
            ax.barh(row, high - low, left=low, height=0.5, color=f"C{i}", alpha=0.35)
        ax.plot([final["iqm"]], [row], marker="D", markersize=6, color=f"C{i}")
        values = group.get("values") or []
        ax.plot(values, [row] * len(values), "o", color="black", markersize=3, alpha=0.6)
    ax.set_yticks(range(len(shown)), [labels[i] for i, _ in reversed(shown)])
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.use_sticky_edges = False  # bars would pin the limits to their ends
    ax.margins(x=0.08)
    ax.set_xlabel(f"final {metric}")
    ax.grid(axis="x", alpha=0.3)


def _label(name: str, group: dict[str, Any]) -> str:
    return f"{name} (n={group['runs']})"
