"""The end of a multirun: ``xdrl-report`` on the sweep folder, and its W&B copy.

Called by :class:`xdrl.sweep.summary.SweepSummary` in the process that launched the sweep: nothing
here
imports torch, and SciPy, matplotlib and wandb only once a report is written.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


def sweep_report(
    sweep_dir: str,
    metric: str | None,
    print_table: bool = True,
    wandb: dict[str, Any] | None = None,
    command: str | None = None,
) -> Path | None:
    """``xdrl-report <sweep dir>`` when some configuration ran with two seeds or more.

    ``wandb``: keyword arguments of :func:`log_report_to_wandb` (a ``logging=wandb`` sweep).
    ``command``: the sweep's command line, shown in ``report.md`` with the one that remakes it.

    Returns the report folder, or None when there is nothing to compare or it failed (a failed
    report only warns: the sweep's own result stands).
    """
    from xdrl.report.runs import ReportError

    try:
        from xdrl.report import MISSING_EXTRA, make_report, missing_extra
        from xdrl.report.groups import group_runs
        from xdrl.report.runs import find_runs

        groups = group_runs(find_runs([sweep_dir]))
        if not any(len({r.seed for r in g.runs}) >= 2 for g in groups):
            return None
        if missing_extra():
            log.warning("sweep report skipped: %s", MISSING_EXTRA)
            return None
        from xdrl.report.analysis import DEFAULT_METRIC

        if not (metric and metric.startswith("eval/")) or metric == DEFAULT_METRIC:
            metric = None  # the sweep's objective when it is an evaluation key
        again = f"xdrl-report {shlex.quote(sweep_dir)}" + (
            f" --metric {shlex.quote(metric)}" if metric else ""
        )
        note = f"Written when the sweep ended; `{again}` writes it again."
        report = make_report(
            [sweep_dir], metric=metric, command=command or again, note=note if command else None
        )
    except (ReportError, OSError) as err:  # one line: the earlier report, if any, stands
        log.warning("sweep report not written: %s", err)
        return None
    except Exception:  # noqa: BLE001 - a report must never break the sweep
        log.warning("sweep report: could not be written", exc_info=True)
        return None
    for warning in report.warnings:
        log.warning("sweep report: %s", warning)
    if wandb is not None:
        try:
            log_report_to_wandb(report.out_dir, **wandb)
        except Exception:  # noqa: BLE001 - the report on disk stands without its W&B copy
            log.warning("sweep report: could not be logged to W&B", exc_info=True)
    if print_table:
        print(f"\nSweep report ({report.out_dir}):\n{report.table}", flush=True)
    log.info("Sweep report written to %s", report.out_dir)
    return report.out_dir


def sweep_group(sweep_dir: str) -> str:
    """The W&B group of a sweep's jobs: the sweep folder's last two parts (as
    xdrl.training.build)."""
    return "/".join(str(sweep_dir).rstrip("/").split("/")[-2:])


def wandb_target(config: DictConfig) -> dict[str, Any] | None:
    """Where a ``logging=wandb`` sweep's jobs log (project, entity, group, mode), else None."""
    node = OmegaConf.select(config, "logging.logger", default=None)
    if node is None or not str(node.get("_target_", "")).endswith("WandbLogger"):
        return None
    group = node.get("group") or sweep_group(str(config.hydra.sweep.dir))
    return {
        "project": node.get("project"),
        "entity": node.get("entity"),
        "group": group,
        "mode": node.get("mode"),
    }


def log_report_to_wandb(
    out_dir: Path, *, project: str | None, entity: str | None, group: str, mode: str | None
) -> None:
    """Log the report's plots and group table to the sweep's W&B group, as a ``report`` run.

    The run's files go under ``out_dir``; ``mode`` None follows ``WANDB_MODE``, as the jobs did.
    """
    import wandb

    report = json.loads((out_dir / "report.json").read_text())
    columns: list[str | int] = ["group", "runs", "seeds", "iqm", "iqm_low", "iqm_high"]
    columns += ["mean", "mean_low", "mean_high", "std", "median", "env"]
    rows: list[list[Any]] = []
    for g in report["groups"]:
        final = g["final"]
        iqm_ci, mean_ci = final["iqm_ci"] or [None, None], final["mean_ci"] or [None, None]
        rows.append(
            [g["name"], g["runs"], ",".join(map(str, g["seeds"])), final["iqm"], *iqm_ci]
            + [final["mean"], *mean_ci, final["std"], final["median"], g.get("env")]
        )
    run = wandb.init(
        project=project,
        entity=entity,
        group=group,
        job_type="report",
        name=f"report {group}",
        dir=str(out_dir),
        mode=mode or os.environ.get("WANDB_MODE") or None,  # type: ignore[arg-type]
        config={"metric": report["metric"]},
    )
    try:
        run.log(
            {
                "report/curves": wandb.Image(str(out_dir / "curves.png")),
                "report/final": wandb.Image(str(out_dir / "final.png")),
                "report/groups": wandb.Table(columns=columns, data=rows),
            }
        )
    finally:
        run.finish()
