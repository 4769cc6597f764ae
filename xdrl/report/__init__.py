"""``xdrl-report``: what a sweep over seeds found, with interval estimates and plots.

``runs`` finds and reads run folders, ``groups`` groups them by configuration, ``stats`` holds
the statistics (SciPy), ``analysis`` turns runs into numbers, ``plots`` draws them (matplotlib),
``document`` writes them, ``cli`` is the command. Nothing here imports torch: the sweep callback
calls :func:`make_report` in the process that launched the sweep.

SciPy and matplotlib come with the optional extra ``xdrl[report]``; :data:`MISSING_EXTRA` is
the one line shown when they are absent.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MISSING_EXTRA = "needs scipy and matplotlib: pip install 'xdrl[report]'"
REPORT_DIR = "report"


def missing_extra() -> list[str]:
    """The packages of ``xdrl[report]`` that are not installed."""
    return [name for name in ("scipy", "matplotlib") if importlib.util.find_spec(name) is None]


@dataclass
class Report:
    """What :func:`make_report` wrote, and the table it printed."""

    out_dir: Path
    table: str
    files: list[Path]
    runs: int


def make_report(
    paths: Iterable[str | Path],
    *,
    metric: str | None = None,
    out_dir: str | Path | None = None,
    command: str = "xdrl-report",
    note: str | None = None,
) -> Report:
    """Find the runs under ``paths``, analyze ``metric``, write the report into ``out_dir``.

    ``out_dir`` defaults to ``<first path>/report``; ``command`` and ``note`` head
    ``report.md``. Raises ``FileNotFoundError`` for a path that does not exist and
    ``LookupError`` when no run is found.
    """
    from xdrl.report.analysis import DEFAULT_METRIC, analyze
    from xdrl.report.document import (
        CURVES_PNG,
        FINAL_PNG,
        group_table,
        markdown,
        write_text_files,
    )
    from xdrl.report.plots import plot_curves, plot_final
    from xdrl.report.runs import find_runs

    roots = [Path(p) for p in paths]
    runs = find_runs(roots)
    if not runs:
        raise LookupError(f"no run folders (.hydra/config.yaml) under {', '.join(map(str, roots))}")
    metric = metric or DEFAULT_METRIC
    out = Path(out_dir) if out_dir is not None else roots[0] / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    analysis = analyze(runs, metric)
    groups = [{**g.to_json(), "values": g.values(metric)} for g in analysis.groups]
    pngs = [
        plot_curves(groups, metric, out / CURVES_PNG),
        plot_final(groups, metric, out / FINAL_PNG),
    ]
    extra = _pareto_section(runs, out)
    md_path, json_path = write_text_files(out, analysis, markdown(analysis, command, extra, note))
    return Report(
        out_dir=out, table=group_table(analysis), files=[md_path, json_path, *pngs], runs=len(runs)
    )


def _pareto_section(runs: list, out_dir: Path) -> str | None:
    """The Pareto-front section of ``xdrl.pareto`` when that package is installed."""
    try:
        from xdrl.pareto.report import pareto_report  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return pareto_report(runs, out_dir)
    except Exception as err:  # noqa: BLE001 - the seed statistics stand without the front
        log.warning("Pareto section failed", exc_info=True)
        return f"## Pareto front\n\nNot drawn: {type(err).__name__}: {err}\n"
