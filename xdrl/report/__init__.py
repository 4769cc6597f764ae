"""``xdrl-report``: what a sweep over seeds found, with interval estimates and plots.

``runs`` finds and reads run folders, ``groups`` groups them by configuration, ``stats`` holds
the statistics (SciPy), ``analysis`` turns runs into numbers, ``plots`` draws them (matplotlib),
``document`` writes them, ``publish`` swaps the finished folder in, ``cli`` is the command.
Nothing here imports torch: the sweep callback calls :func:`make_report` in the process that
launched the sweep.

SciPy and matplotlib come with the optional extra ``xdrl[report]``; :data:`MISSING_EXTRA` is
the one line shown when they are absent.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdrl.config.errors import first_line

log = logging.getLogger(__name__)

MISSING_EXTRA = "needs scipy and matplotlib: pip install 'xdrl[report]'"
REPORT_DIR = "report"


def missing_extra() -> list[str]:
    """The packages of ``xdrl[report]`` that are not installed."""
    return [name for name in ("scipy", "matplotlib") if importlib.util.find_spec(name) is None]


@dataclass
class Report:
    """What :func:`make_report` wrote, the tables it printed, and what it warned about."""

    out_dir: Path
    table: str
    files: list[Path]
    runs: int
    warnings: list[str] = field(default_factory=list)
    short: list[str] = field(default_factory=list)


def report_dir(paths: list[Path], out_dir: str | Path | None) -> Path:
    """Where the report goes: ``out_dir``, else ``<first path>/report``."""
    return Path(out_dir) if out_dir is not None else paths[0] / REPORT_DIR


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
    ``report.md``. The folder is written as a whole (:mod:`xdrl.report.publish`): on any error
    an earlier report there stays as it was.

    Raises:
        ReportError: a path does not exist, ``out_dir`` is a file, no run is found, or no run
            reports ``metric`` (nothing is written).
        OSError: the report could not be written (nothing under ``out_dir`` changed).
    """
    from xdrl.report.analysis import analyze, check_metric, repeated_seed_warnings
    from xdrl.report.document import group_tables
    from xdrl.report.runs import ReportError, find_runs, skipped_warning

    roots = [Path(p) for p in paths]
    out = report_dir(roots, out_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file; give a folder (it is created or replaced)")
    try:
        runs = find_runs(roots)
    except FileNotFoundError as err:
        raise ReportError(str(err)) from None
    where = ", ".join(map(str, roots))
    if not runs:
        raise ReportError(
            f"no run folders (.hydra/config.yaml) under {where}; give run or sweep folders"
        )
    home = out.resolve()
    if any(run.dir == home or home in run.dir.parents for run in runs):
        raise ReportError(
            f"--out {out} holds runs; give a folder of its own (default: {report_dir(roots, None)})"
        )
    analysis = analyze(runs, check_metric(runs, metric))
    warnings = [w for run in runs if (w := skipped_warning(run))]
    warnings += repeated_seed_warnings(analysis)
    files = _write_report(out, analysis, command, note, warnings)
    return Report(
        out_dir=out,
        table=group_tables(analysis),
        files=files,
        runs=len(runs),
        warnings=warnings,
        short=[s["run"] for s in analysis.short],
    )


def _write_report(
    out: Path, analysis: Any, command: str, note: str | None, warnings: list[str]
) -> list[Path]:
    """Build every file of the report in a hidden folder beside ``out`` and swap it in."""
    from xdrl.report.document import CURVES_PNG, FINAL_PNG, OWN_FILES, markdown, write_text_files
    from xdrl.report.plots import plot_curves, plot_final
    from xdrl.report.publish import publish

    names: list[str] = []

    def build(folder: Path) -> None:
        groups = [{**g.to_json(), "values": g.values(analysis.metric)} for g in analysis.groups]
        plot_curves(groups, analysis.metric, folder / CURVES_PNG)
        plot_final(groups, analysis.metric, folder / FINAL_PNG)
        extra = _pareto_sections(analysis, folder, warnings)
        write_text_files(folder, analysis, markdown(analysis, command, extra, note))
        names.extend(sorted(p.name for p in folder.iterdir()))

    publish(out, build, own=OWN_FILES)
    return [out / name for name in names]


def _pareto_sections(analysis: Any, folder: Path, warnings: list[str]) -> str | None:
    """The Pareto-front section of ``xdrl.pareto`` per environment, when that package is
    installed: its files in ``folder`` for one environment, in ``pareto-<env>/`` for several.
    A front that cannot be drawn is said in its section and in ``warnings``."""
    try:
        from xdrl.pareto.report import PARETO_PNG, pareto_report  # type: ignore[import-not-found]
    except ImportError:
        return None
    sections, envs = [], analysis.envs
    for env in envs:
        of_env = [run for g in analysis.of_env(env) for run in g.group.runs]
        target = folder if len(envs) == 1 else folder / f"pareto-{_slug(env)}"
        try:
            section = pareto_report(of_env, target)
        except OSError:
            raise
        except Exception as err:  # noqa: BLE001 - the seed statistics stand without the front
            log.debug("Pareto section of %s failed", env, exc_info=True)
            why = f"{type(err).__name__}: {first_line(err)}"
            warnings.append(f"Pareto front of {env} not drawn: {why}")
            section = f"## Pareto front: {env}\n\nNot drawn: {why}\n"
        if section and target != folder:
            section = section.replace(f"]({PARETO_PNG})", f"]({target.name}/{PARETO_PNG})")
        if section:
            sections.append(section.rstrip() + "\n")
    return "\n".join(sections) or None


def _slug(env: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(env))
