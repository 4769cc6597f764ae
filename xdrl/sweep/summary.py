"""The sweep table: after a Hydra multirun, one row per job with its status, frames and metrics.

Registered as a Hydra callback under ``hydra.callbacks`` in ``conf/config.yaml``. It runs in the
process that launched the sweep, whatever the launcher (basic, joblib, submitit local or SLURM),
and reads only what the jobs left on disk: ``<sweep dir>/<job>/.hydra/hydra.yaml`` and
``<sweep dir>/<job>/summary.json``. Hydra loads it at start-up, so it imports nothing heavy
(no torch, torchrl or wandb).
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from xdrl.report.study import RECHECK_TABLE  # search vs re-check value per trial
from xdrl.run.layout import HYDRA_DIR, HYDRA_SETTINGS_FILE, SUMMARY_FILE, write_atomically
from xdrl.sweep.stop import (
    INTERRUPTED,
    STOP_FILE,
    SweepCtrlC,
    sweep_interrupted,
    use_loky_workers_that_ignore_ctrl_c,
)

log = logging.getLogger(__name__)

TABLE_MD = "sweep_summary.md"
TABLE_JSON = "sweep_summary.json"
OPTUNA_RESULTS = "optimization_results.yaml"  # written by hydra_plugins/xdrl_optuna
SUBMITIT_DIR = ".submitit"


@dataclass
class JobRow:
    """One job of a sweep, as read back from its folder."""

    num: int | None
    dir: str
    overrides: list[str]
    status: str
    total_frames: int | None = None
    wall_time_s: float | None = None
    resumed_from: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass
class SweepSummaryData:
    """Everything the table shows: the jobs, the objective, Optuna's best trial if any."""

    sweep_dir: str
    objective: str | None
    jobs: list[JobRow]
    best: dict[str, Any] | None = None
    unaccounted_submissions: int = 0
    note: str | None = None
    recheck: str | None = None  # the Optuna re-check table (Markdown), when the sweep ran one

    def metric_keys(self) -> list[str]:
        """Every metric any job reported, the objective first."""
        keys = sorted({k for job in self.jobs for k in job.metrics})
        if self.objective in keys:
            keys.remove(self.objective)
            keys.insert(0, self.objective)
        return keys


def _read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} holds no JSON object")
    return data


def _job_identity(job_dir: Path) -> tuple[int | None, list[str]]:
    """The job number and task overrides Hydra saved in ``.hydra/hydra.yaml`` (or the dir name)."""
    try:
        hydra_cfg = yaml.safe_load((job_dir / HYDRA_DIR / HYDRA_SETTINGS_FILE).read_text())["hydra"]
        return int(hydra_cfg["job"]["num"]), [str(o) for o in hydra_cfg["overrides"]["task"]]
    except Exception:  # noqa: BLE001 - a half-written job folder still gets a row
        prefix = job_dir.name.split("_", 1)[0]
        return (int(prefix) if prefix.isdigit() else None), []


def _override_key(override: str) -> str:
    """``+a.b@pkg=1`` -> ``a.b``."""
    return override.split("=", 1)[0].split("@", 1)[0].lstrip("+~")


def fixed_override_keys(task_overrides: list[str]) -> list[str]:
    """Keys a multirun command sets to one value for every job (sweeps like ``seed=0,1`` kept)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(task_overrides)
    return [o.key_or_group for o in parsed if not o.is_sweep_override()]


def read_job(job_dir: Path, hide_keys: set[str] | frozenset[str] = frozenset()) -> JobRow:
    """The row of one job folder; a missing or unreadable ``summary.json`` means it failed.

    ``hide_keys``: overrides left out of the row (those every job of the sweep shares).
    """
    num, overrides = _job_identity(job_dir)
    row = JobRow(
        num=num,
        dir=job_dir.name,
        overrides=[o for o in overrides if _override_key(o) not in hide_keys],
        status="failed",
    )
    try:
        summary = _read_json(job_dir / SUMMARY_FILE)
    except FileNotFoundError:
        row.error = _logged_error(job_dir) or f"no {SUMMARY_FILE}"
        return row
    except Exception as err:  # noqa: BLE001 - never let one bad job hide the others
        row.error = f"unreadable {SUMMARY_FILE}: {err}"
        return row
    row.status = str(summary.get("status", "failed"))
    row.error = summary.get("error")
    row.total_frames = summary.get("total_frames")
    row.wall_time_s = summary.get("wall_time_s")
    row.resumed_from = summary.get("resumed_from")
    evals = summary.get("eval") or {}
    row.metrics = {k: float(v) for k, v in evals.items() if isinstance(v, int | float)}
    return row


def _logged_error(job_dir: Path) -> str | None:
    """The last error line of a job's Hydra log (a config error stops a job before it writes
    ``summary.json``), without its time stamp and logger name."""
    for log_file in sorted(job_dir.glob("*.log")):
        try:
            lines = log_file.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in reversed(lines):
            if "][ERROR]" in line:
                return line.split("] - ", 1)[-1].strip()
    return None


def find_job_dirs(sweep_dir: Path) -> list[Path]:
    """Job folders of a sweep: those with Hydra's ``.hydra/`` or a ``summary.json``."""
    if not sweep_dir.is_dir():
        return []
    return sorted(
        d
        for d in sweep_dir.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and ((d / HYDRA_DIR).is_dir() or (d / SUMMARY_FILE).is_file())
    )


def _count_submissions(sweep_dir: Path) -> int:
    """Jobs submitit submitted (one folder per SLURM/local job id, requeues included)."""
    folder = sweep_dir / SUBMITIT_DIR
    if not folder.is_dir():
        return 0
    return sum(1 for d in folder.iterdir() if d.is_dir() and any(d.glob("*_submitted.pkl")))


def _read_optuna_best(sweep_dir: Path) -> dict[str, Any] | None:
    path = sweep_dir / OPTUNA_RESULTS
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text()) or {}
    return {k: v for k, v in data.items() if k not in ("name", "recheck")}  # recheck: its table


def _read_recheck(sweep_dir: Path) -> str | None:
    path = sweep_dir / RECHECK_TABLE
    return path.read_text() if path.is_file() else None


def summarize_sweep(
    sweep_dir: str | Path, objective: str | None = None, hide_keys: list[str] | None = None
) -> SweepSummaryData:
    """Read every job of ``sweep_dir`` back; overrides of ``hide_keys`` are left out of rows."""
    sweep_dir = Path(sweep_dir)
    hide = set(hide_keys or [])
    jobs = [read_job(d, hide) for d in find_job_dirs(sweep_dir)]
    jobs.sort(key=lambda j: (j.num is None, j.num if j.num is not None else 0, j.dir))
    submitted = _count_submissions(sweep_dir)
    return SweepSummaryData(
        sweep_dir=str(sweep_dir),
        objective=objective,
        jobs=jobs,
        best=_read_optuna_best(sweep_dir),
        unaccounted_submissions=max(0, submitted - len(jobs)),
        recheck=_read_recheck(sweep_dir),
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def format_table(data: SweepSummaryData) -> str:
    """The sweep as a Markdown table, then the counts and Optuna's best trial."""
    keys = data.metric_keys()
    header = ["job", "overrides", "status", "frames", "wall s", *keys]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for job in data.jobs:
        status = job.status + (" (resumed)" if job.resumed_from else "")
        status += f" ({job.error})" if job.error else ""
        cells = [
            _fmt(job.num),
            _fmt(" ".join(job.overrides) or None),
            status,
            _fmt(job.total_frames),
            _fmt(job.wall_time_s),
            *(_fmt(job.metrics.get(k)) for k in keys),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    completed = sum(job.status == "completed" for job in data.jobs)
    lines += ["", f"{completed}/{len(data.jobs)} jobs completed in {data.sweep_dir}"]
    stopped = sum(job.status == "interrupted" for job in data.jobs)
    skipped = sum(job.status == "not_started" for job in data.jobs)
    if stopped or skipped:
        lines.append(f"{stopped} interrupted at a checkpoint, {skipped} not started")
    pruned = sum(job.status == "pruned" for job in data.jobs)
    if pruned:
        lines.append(f"{pruned} pruned by the Optuna sweeper's pruner (stopped at a checkpoint)")
    if data.unaccounted_submissions:
        lines.append(
            f"{data.unaccounted_submissions} submitted job(s) left no job folder: see "
            f"{Path(data.sweep_dir) / SUBMITIT_DIR}"
        )
    if data.best is not None:
        lines.append(f"Optuna best: {json.dumps(data.best, sort_keys=True, default=str)}")
    if data.note:
        lines.append(data.note)
    if data.recheck:
        lines += ["", data.recheck.rstrip()]
    return "\n".join(lines) + "\n"


def write_sweep_summary(data: SweepSummaryData) -> tuple[Path, Path]:
    """Write ``sweep_summary.md`` and ``sweep_summary.json`` into the sweep folder."""
    sweep_dir = Path(data.sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    md, js = sweep_dir / TABLE_MD, sweep_dir / TABLE_JSON
    payload = {**asdict(data), "metric_keys": data.metric_keys()}
    for path, text in (
        (md, format_table(data)),
        (js, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n"),
    ):
        write_atomically(path, text)
    return md, js


class SweepSummary(Callback):
    """Hydra callback: at the end of a multirun, tabulate every job of the sweep.

    The table goes to stdout and to ``sweep_summary.md`` / ``sweep_summary.json`` in the sweep
    folder. Hydra skips ``on_multirun_end`` when a job fails (the sweeper re-raises the job's
    error), so the table is then written at exit instead, with the failed jobs marked.

    When some configuration ran with two seeds or more, the sweep also gets ``xdrl-report``'s
    report in ``<sweep dir>/report/`` (needs ``xdrl[report]``; a failure only warns).

    Args:
        print_table: also print the table on stdout.
        report: write the seed report (``xdrl-report``) as well.

    Example (``conf/config.yaml``)::

        hydra:
          callbacks:
            sweep_summary:
              _target_: xdrl.sweep.summary.SweepSummary
    """

    def __init__(self, print_table: bool = True, report: bool = True) -> None:
        self.print_table = print_table
        self.report = report
        self._wandb: dict[str, Any] | None = None
        self._command: str | None = None
        self._pending: dict[str, Any] | None = None
        self._ctrl_c: SweepCtrlC | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Note where the sweep writes; arm the at-exit fallback and the Ctrl-C handling."""
        self._handle_ctrl_c(config)
        try:
            task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
            self._pending = {
                "sweep_dir": str(config.hydra.sweep.dir),
                "objective": OmegaConf.select(config, "objective", default=None),
                "hide_keys": fixed_override_keys([str(o) for o in task]),  # type: ignore[union-attr]
            }
            from xdrl.report.sweep import wandb_target

            self._wandb = wandb_target(config)
            hydra_overrides = [
                str(o)
                for o in OmegaConf.select(config, "hydra.overrides.hydra", default=None) or []
                if not str(o).startswith("hydra.mode=")  # Hydra's own record of -m
            ]
            self._command = shlex.join(
                ["xdrl-train", "-m", *map(str, task), *hydra_overrides]  # type: ignore[arg-type]
            )
        except Exception:  # noqa: BLE001 - a summary must never break the sweep
            log.warning("sweep summary: could not read the sweep config", exc_info=True)
            return
        atexit.register(self._at_exit)

    def _handle_ctrl_c(self, config: DictConfig) -> None:
        """A re-run continues: forget an earlier Ctrl-C; catch this sweep's."""
        sweep_dir = str(config.hydra.sweep.dir)
        try:
            (Path(sweep_dir) / STOP_FILE).unlink(missing_ok=True)
            if "joblib" in str(OmegaConf.select(config, "hydra.launcher._target_", default="")):
                use_loky_workers_that_ignore_ctrl_c()
        except Exception:  # noqa: BLE001 - never break the sweep over this
            log.warning("sweep: could not set up the Ctrl-C handling", exc_info=True)
        self._ctrl_c = SweepCtrlC(sweep_dir)
        self._ctrl_c.install()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write and print the table."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._report(pending, note=None)

    def _at_exit(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None and find_job_dirs(Path(pending["sweep_dir"])):  # none: stopped
            # before any job (a config error): nothing to tabulate, no folder to make
            self._report(pending, note="The sweep stopped early (a job failed or was interrupted).")

    def _report(self, pending: dict[str, Any], note: str | None) -> None:
        if self._ctrl_c is not None:
            self._ctrl_c.restore()
        if sweep_interrupted(pending["sweep_dir"]):
            INTERRUPTED.append(str(pending["sweep_dir"]))
            note = (
                "The sweep was interrupted (Ctrl-C): running jobs stopped at a checkpoint, later "
                "jobs did not start; run the same command (same hydra.sweep.dir) to continue."
            )
        try:
            data = summarize_sweep(**pending)
            data.note = note
            md, js = write_sweep_summary(data)
        except Exception:  # noqa: BLE001 - a summary must never break the sweep
            log.warning("sweep summary: could not be written", exc_info=True)
            return
        if self.print_table:
            print(f"\nSweep summary ({md.name}, {js.name}):\n{format_table(data)}", flush=True)
        log.info("Sweep summary written to %s", md)
        if self.report and not sweep_interrupted(data.sweep_dir):  # the re-run reports
            from xdrl.report.sweep import sweep_report

            sweep_report(
                data.sweep_dir,
                pending["objective"],
                print_table=self.print_table,
                wandb=self._wandb,
                command=self._command,
            )
