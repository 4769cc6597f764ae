"""One training run from a composed config: build, evaluate, train, summarize, clean up."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from xdrl.build import Run, build_trainer
from xdrl.checkpointing import BEST_SUMMARY_KEY
from xdrl.errors import RunError
from xdrl.process import ProcessSettings
from xdrl.run_lock import RunDirLock

log = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"


def write_summary(run_dir: str, summary: dict[str, Any]) -> Path:
    """Write ``summary.json`` atomically (temporary file, then rename)."""
    path = Path(run_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def _finish_wandb() -> None:
    """Finish an active W&B run so no committed row is lost (crash, Ctrl-C, SIGTERM)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        try:
            wandb.run.log({}, commit=True)
            wandb.finish()
        except Exception:  # noqa: BLE001 - cleanup must never mask the run's own outcome
            log.warning("wandb.finish() failed", exc_info=True)


def _last_eval_metrics(run_: Run) -> dict[str, float]:
    """The metrics of the latest evaluation, all subgroups merged."""
    eval_set = run_.hook_set.eval_hook_set
    metrics: dict[str, float] = {}
    for hook in eval_set.hooks if eval_set is not None else []:
        metrics.update(getattr(hook, "last_metrics", None) or {})
    return metrics


class _StopRequest:
    """SIGINT (Ctrl-C), SIGTERM, SIGUSR2: let the current iteration finish, then stop; the
    Trainer checkpoints. A second SIGINT aborts at once (``KeyboardInterrupt``, no checkpoint).

    Afterwards :meth:`forward` hands SIGTERM/SIGUSR2 to whoever listened before (submitit's
    handler requeues the SLURM job, whose next start resumes from the checkpoint), or exits
    128+signum.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)

    def __init__(self, run: Run) -> None:
        self.run = run
        self.signal: str | None = None
        self._signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopRequest:
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT and self._signum is not None:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt  # the second Ctrl-C: abort now
        if self._signum != signal.SIGUSR2:  # a later SIGTERM must not hide submitit's USR2
            self._signum = signum
            self.signal = signal.Signals(signum).name
        hint = " (Ctrl-C again to abort at once)" if signum == signal.SIGINT else ""
        log.warning("%s received: stopping after this iteration%s", self.signal, hint)
        self.run.trainer.request_stop(self.signal)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @property
    def interrupted(self) -> bool:
        """Whether the stop came from Ctrl-C (SIGINT)."""
        return self._signum == signal.SIGINT

    def forward(self) -> None:
        """Pass a received signal on, once the checkpoint and the logs are written."""
        if self._signum is None:
            return
        previous = self._previous.get(self._signum)
        if callable(previous) and not self.interrupted:
            log.info("Handing %s to the previous handler (%s)", self.signal, previous)
            previous(self._signum, None)
        raise SystemExit(128 + self._signum)


_MEMMAP_WRITE = re.compile(
    r"unable to write to file <(?P<path>[^>]*)>: (?P<what>.*) \((?P<errno>\d+)\)"
)


def _as_io_error(err: BaseException) -> OSError | None:
    """``err`` as an OSError: itself, or torch's memmap ``RuntimeError("unable to write to file
    <path>: No space left on device (28)")`` (tensordict writes checkpoint tensors that way)."""
    if isinstance(err, OSError):
        return err
    match = _MEMMAP_WRITE.search(str(err))
    if match is None:
        return None
    return OSError(int(match["errno"]), match["what"], match["path"])


def _one_line(err: BaseException) -> str:
    """``Type: first line of the message``, for summary.json and the sweep table."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _io_error_line(err: OSError, run_dir: str) -> str:
    """``No space left on device: <path>``: what went wrong, naming the path."""
    where = err.filename or f"a file under {run_dir}"
    return f"{err.strerror or type(err).__name__}: {where}"


def _trace_to_log_files(err: BaseException) -> None:
    """The full traceback in the run's log file(s) only; the terminal gets one line."""
    trace = (type(err), err, err.__traceback__)
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, "Run failed", (), trace)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def run(cfg: DictConfig, process: ProcessSettings | None = None) -> float | None:
    """Train the run ``cfg`` describes, holding its run dir, and return ``cfg.objective``.

    ``process``: what the entry point's :func:`~xdrl.process.setup_process` decided (None: a
    non-terminal process, as in tests)."""
    with RunDirLock(cfg.run_dir):
        return _run(cfg, interactive=process.interactive if process is not None else False)


def _run(cfg: DictConfig, *, interactive: bool) -> float | None:
    """Train the run ``cfg`` describes and return ``cfg.objective`` from the final metrics."""
    start = time.perf_counter()
    run_ = build_trainer(cfg, interactive=interactive)
    trainer = run_.trainer
    start_frames = int(trainer.collected_frames)
    train_start: float | None = None
    status, error = "failed", None
    eval_metrics: dict[str, float] = {}
    try:
        with _StopRequest(run_) as stop:
            if cfg.eval.enabled and cfg.eval.before_training and trainer.collected_frames == 0:
                run_.hook_set.run_pre_eval()
            train_start = time.perf_counter()
            trainer.train()
        status = "interrupted" if stop.interrupted else "stopped" if stop.signal else "completed"
    except KeyboardInterrupt:
        status, error = "interrupted", "aborted by a second Ctrl-C; no checkpoint at the stop"
        raise
    except (OSError, RuntimeError) as err:  # a full disk, a lost mount: one line, trace in the log
        io_error = _as_io_error(err)
        if io_error is None:
            error = _one_line(err)
            raise
        error = _io_error_line(io_error, cfg.run_dir)
        _trace_to_log_files(err)
        raise RunError(error) from err
    except Exception as err:
        error = _one_line(err)  # summary.json and the sweep table say why
        raise
    finally:
        eval_metrics = _last_eval_metrics(run_)
        frames = int(trainer.collected_frames)
        train_time = time.perf_counter() - train_start if train_start is not None else 0.0
        summary = {
            "status": status,
            "total_frames": frames,
            "wall_time_s": round(time.perf_counter() - start, 3),
            "frames_per_second": (
                round((frames - start_frames) / train_time, 1) if train_time > 0 else None
            ),
            "seed": cfg.seed,
            "env": cfg.env.id,
            "algorithm": cfg.algorithm.build._target_.rsplit(".", 2)[-2],
            "eval": eval_metrics,
            "train_time_s": round(train_time, 3),
        }
        if run_.resumed_from:
            summary["resumed_from"] = run_.resumed_from
        best = _best_checkpoint(trainer)
        if best is not None:
            summary[BEST_SUMMARY_KEY] = best  # checkpoint.keep_best; xdrl-eval --checkpoint best
        if error is not None:
            summary["error"] = error
        offline = getattr(run_.logger, "offline_fallback", None)
        if offline:
            summary["wandb_offline"] = offline  # W&B could not reach its server: `wandb sync` it
        _close(cfg.run_dir, run_, summary, log_model=cfg.logging.log_model)
    if stop.interrupted:
        saved = (
            "checkpoint and logs written; run the same command again to continue"
            if cfg.checkpoint.enabled
            else "logs written, no checkpoint (checkpoint.enabled=false)"
        )
        print(
            f"xdrl-train: interrupted at {frames:,} frames in {cfg.run_dir}; {saved}",
            file=sys.stderr,
        )
    stop.forward()
    objective = eval_metrics.get(cfg.objective)
    if eval_metrics:
        log.info("Final evaluation: %s", json.dumps(eval_metrics, sort_keys=True))
    return float(objective) if objective is not None else None


def _best_checkpoint(trainer: Any) -> str | None:
    """The folder name of the best evaluation's checkpoint (None without keep_best)."""
    rotation = getattr(trainer, "checkpoint_rotation", None)
    if rotation is None or rotation.keep_best is None:
        return None
    try:
        best = rotation.best()
    except OSError:
        return None
    return best.name if best is not None else None


def _close(run_dir: str, run_: Run, summary: dict[str, Any], log_model: bool = False) -> None:
    """Write summary.json, close the envs, finish W&B; an I/O error here is logged, not raised."""
    try:
        path = write_summary(run_dir, summary)
        log.info("Wrote %s (%s, %d frames)", path, summary["status"], summary["total_frames"])
    except OSError as err:
        log.error("Could not write the summary: %s", _io_error_line(err, run_dir))
    run_.close()
    if log_model and summary["status"] == "completed":
        from xdrl.policy.wandb_model import log_model as upload

        upload(run_dir, Path(run_dir) / SUMMARY_FILE)
    _finish_wandb()
