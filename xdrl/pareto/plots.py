"""The front plot: points found (labelled with their weights) and the known front, one panel per
pair of objectives."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path


def plot_front(
    points: Sequence[dict],
    front: Sequence[Sequence[float]],
    known_front: Sequence[Sequence[float]] | None,
    path: Path,
    title: str,
) -> Path:
    """Write ``path`` (PNG): every weight's point, the non-dominated ones in blue, suspect ones
    (a failed sanity check) ringed in red, the known front as crosses; two objectives give one
    panel, k give k(k-1)/2 pairwise panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dim = len(points[0]["returns"]) if points else len(front[0]) if front else 2
    pairs = list(itertools.combinations(range(dim), 2))
    cols = min(3, len(pairs))
    rows = (len(pairs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.0 * cols, 4.8 * rows), squeeze=False)
    on_front = {tuple(p) for p in front}
    for ax, (i, j) in zip(axes.flat, pairs, strict=False):
        if known_front:
            ax.scatter(
                [p[i] for p in known_front],
                [p[j] for p in known_front],
                marker="x",
                s=60,
                color="tab:gray",
                label="known front",
            )
        labels: dict[tuple[float, ...], list[str]] = {}
        suspect: set[tuple[float, ...]] = set()
        for point in points:  # weights that gave the same point share one label
            text = "[" + ", ".join(f"{w:.2f}" for w in point["weights"]) + "]"
            text += " suspect" if point.get("suspect") else ""
            labels.setdefault(tuple(point["returns"]), []).append(text)
            if point.get("suspect"):
                suspect.add(tuple(point["returns"]))
        for r, texts in labels.items():
            color = "tab:blue" if r in on_front else "tab:orange"
            ax.scatter(r[i], r[j], s=40, color=color, zorder=3)
            if r in suspect:  # a failed sanity check: ringed in red
                ax.scatter(r[i], r[j], s=140, facecolors="none", edgecolors="red", zorder=4)
            ax.annotate(
                "\n".join(texts),
                (r[i], r[j]),
                fontsize=7,
                xytext=(4, -10),
                textcoords="offset points",
            )
        ax.scatter([], [], color="tab:blue", label="found, non-dominated")
        ax.scatter([], [], color="tab:orange", label="found, dominated")
        ax.set_xlabel(f"objective {i}")
        ax.set_ylabel(f"objective {j}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    for ax in list(axes.flat)[len(pairs) :]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
