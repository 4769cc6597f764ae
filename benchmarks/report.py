"""The Markdown report: one summary table built from each mode's rows, checked against the
targets of ``targets.yaml``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from benchmarks.runner import Mode, Row

TARGETS_FILE = Path(__file__).with_name("targets.yaml")
BOUNDS = {"at_least": ">=", "at_most": "<=", "below": "<"}


def load_targets(path: Path = TARGETS_FILE) -> dict[str, dict[str, Any]]:
    """``{mode: {figure: {bound: value}}}`` from a YAML file (``targets.yaml``)."""
    targets = yaml.safe_load(path.read_text()) or {}
    for mode, figures in targets.items():
        for figure, bound in figures.items():
            if not isinstance(bound, dict) or len(bound) != 1 or set(bound) - set(BOUNDS):
                raise ValueError(f"{path}: [{mode}] {figure} needs one of {sorted(BOUNDS)}")
    return targets


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def check(targets: dict[str, Any], figure: str, value: float | None) -> tuple[str, bool | None]:
    """The target's text (``>= 1.75``; ``reference`` where none is set) and whether ``value``
    meets it (None where no target or no value)."""
    if figure not in targets:
        return "reference", None
    ((bound, limit),) = targets[figure].items()
    text = f"{BOUNDS[bound]} {limit}"
    if value is None:
        return text, None
    met = {"at_least": value >= limit, "at_most": value <= limit, "below": value < limit}[bound]
    return text, met


def row(name: str, sb3: Any, xdrl: Any, ratio: Any, target: tuple[str, bool | None]) -> Row:
    return (name, str(sb3), str(xdrl), str(ratio), *target)


def baseline_rows(workload: str, o: dict[str, Any]) -> list[Row]:
    """The ``--baseline`` (before) row of one mode's results, where the baseline ran."""
    if o.get("baseline_fps") is None:
        return []
    name = f"same {workload} workload, `--baseline` xdrl-train (before) frames/s"
    ratio = fmt(o["baseline_ratio"])
    return [row(name, fmt(o["sb3_fps"], 0), fmt(o["baseline_fps"], 0), ratio, ("reference", None))]


def markdown(
    results: dict[str, Any], command: str, modes: dict[str, Mode], targets: dict[str, Any]
) -> str:
    m = results["machine"]
    lines = [
        "# xdrl vs SB3 benchmark",
        "",
        f"`{command}` on {m['date']}: {m['nproc']} x {m['cpu']}, Python {m['python']}, "
        f"load average at start {tuple(round(x, 1) for x in m['load_average'])}, "
        f"end {tuple(round(x, 1) for x in results['load_average_end'])}.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".",
    ]
    rows: list[Row] = []
    after: list[str] = []
    for name, result in results["modes"].items():
        mode = modes[name]
        rows += mode.rows(result, targets.get(name, {}))
        after += mode.lines(result) if mode.lines else []
    if rows:
        lines += [
            "",
            "| measure | SB3 | xdrl | ratio (xdrl/SB3) | target | met |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
    for measure, sb3, xdrl, ratio, target, ok in rows:
        met = "n/a" if ok is None else ("yes" if ok else "no")
        lines.append(f"| {measure} | {sb3} | {xdrl} | {ratio} | {target} | {met} |")
    lines += [
        *after,
        "",
        "Per-seed figures are in bench.json. Timings are wall-clock on a shared machine; "
        "each seed runs the frameworks back to back in an order rotated by seed; read the ratios.",
    ]
    return "\n".join(lines) + "\n"
