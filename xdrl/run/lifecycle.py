"""One training run from a composed config: build, evaluate, train, summarize, clean up."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from xdrl.config.check import check_config
from xdrl.config.errors import RunError, first_line, trace_to_log_files
from xdrl.config.resume import NEVER, saved_config
from xdrl.config.spec import RunSpec
from xdrl.run.layout import (
    CHECKPOINT_DIR,
    CHECKPOINT_NAME,
    CHECKSUMS_FILE,
    SUMMARY_FILE,
    write_atomically,
)
from xdrl.run.lock import RunDirLock
from xdrl.run.process import ProcessSettings
from xdrl.run.segments import earlier_segments, segment_budget, whole_run_timing
from xdrl.training.build import Run, build_trainer
from xdrl.training.checkpointing import BEST_SUMMARY_KEY, RunComplete, resumed_run_dir
from xdrl.training.loggers import close_logger
from xdrl.training.precision import autocast
from xdrl.training.workers import WorkerFailed, stop_started_workers

log = logging.getLogger(__name__)


def write_summary(run_dir: str, summary: dict[str, Any]) -> Path:
    """Write ``summary.json`` atomically (temporary file, then rename)."""
    path = Path(run_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomically(path, json.dumps(summary, indent=2, sort_keys=True) + "\n")


class _StopRequest:
    """SIGINT (Ctrl-C), SIGTERM, SIGUSR2: let the current iteration finish, then stop; the
    Trainer checkpoints. A second SIGINT aborts at once (``KeyboardInterrupt``; the run's line
    then says which checkpoint it left, read from disk).

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
        log.warning(
            "%s received: stopping after this iteration (an evaluation stops at once)%s",
            self.signal,
            hint,
        )
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


class StoppedBeforeTraining(BaseException):
    """SIGTERM or SIGUSR2 while the run was built (collector workers starting, a checkpoint
    loading), raised from the signal's handler so that the build unwinds and stops what it
    started; the signal's default action killed the process there, with no line and the
    workers' semaphores leaked. A BaseException, as KeyboardInterrupt: no ``except Exception``
    on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptReported(KeyboardInterrupt):
    """Ctrl-C ended the run and the run printed its one stderr line (the CLI adds none)."""


@contextlib.contextmanager
def _stops_raise_while_building() -> Iterator[None]:
    """Inside the block SIGTERM and SIGUSR2 raise :class:`StoppedBeforeTraining` where nobody
    set a handler for them (one set by someone else, submitit's, is kept); SIGINT raises
    ``KeyboardInterrupt`` already."""

    def handle(signum: int, _frame: Any) -> None:
        raise StoppedBeforeTraining(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGUSR2):
            if signal.getsignal(sig) == signal.SIG_DFL:
                previous[sig] = signal.signal(sig, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _one_line(err: BaseException) -> str:
    """``Type: first line of the message``, for summary.json and the sweep table."""
    return f"{type(err).__name__}: {first_line(err)}" if str(err).strip() else type(err).__name__


def _io_error_line(err: OSError, run_dir: str) -> str:
    """``No space left on device: <path>``: what went wrong, naming the path."""
    where = err.filename or f"a file under {run_dir}"
    return f"{err.strerror or type(err).__name__}: {where}"


def run(
    spec: RunSpec | DictConfig,
    process: ProcessSettings | None = None,
    accept: Callable[[], None] | None = None,
) -> float | None:
    """Train the run ``spec`` describes, holding its run dir, and return its ``objective`` (a
    composed config is checked into its spec first: :func:`~xdrl.config.check.check_config`).

    ``process``: what the entry point's :func:`~xdrl.run.process.setup_process` decided (None: a
    non-terminal process, as in tests). ``accept``: called once the run is accepted, just before
    it trains (the CLI writes ``.hydra/`` then); a refused resume, a dir held by another run or
    a run already complete never calls it."""
    if not isinstance(spec, RunSpec):
        spec = check_config(spec)
    with RunDirLock(spec.run_dir):
        return _run(
            spec, interactive=process.interactive if process is not None else False, accept=accept
        )


def _run(
    spec: RunSpec, *, interactive: bool, accept: Callable[[], None] | None = None
) -> float | None:
    """Train the run ``spec`` describes and return its ``objective`` from the final metrics."""
    start = time.perf_counter()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        with _stops_raise_while_building():
            run_ = _build(spec, interactive)
    except RunComplete as done:
        return _already_complete(spec, done)
    except (KeyboardInterrupt, StoppedBeforeTraining) as err:
        raise _stopped_before_training(spec, err) from None
    except WorkerFailed as err:  # a worker failed as it started: one line, trace in the log
        trace_to_log_files(err, "Run failed", log)
        raise RunError(f"{err}; {_after_failure(spec, None)}") from err
    try:
        return _train(spec, run_, start, started, accept)
    except KeyboardInterrupt:  # Ctrl-C again: in the iteration, its checkpoint or the close
        frames = int(run_.trainer.collected_frames)
        print(
            f"xdrl-train: aborted by Ctrl-C at {frames:,} frames in {spec.run_dir}; "
            f"{_what_was_saved(spec, frames)}",
            file=sys.stderr,
        )
        raise InterruptReported from None


def _train(
    spec: RunSpec, run_: Run, start: float, started: str, accept: Callable[[], None] | None
) -> float | None:
    """Train the built run, write its summary and close it; one stderr line if it ended early."""
    trainer = run_.trainer
    segment = _Segment(spec, run_, start, started)
    status, error = "failed", None
    eval_metrics: dict[str, float] = {}
    try:
        if accept is not None:
            accept()
        with _StopRequest(run_) as stop, autocast(run_.precision, spec.device):
            _evaluate_and_train(spec, run_, stop, segment)
        status = _final_status(stop, trainer, run_)
    except KeyboardInterrupt:
        frames = int(trainer.collected_frames)
        status = "interrupted"
        error = f"aborted by Ctrl-C; {_what_was_saved(spec, frames, advice=False)}"
        raise
    except WorkerFailed as err:  # one line naming the worker and its cause; trace in the log
        error = str(err)
        trace_to_log_files(err, "Run failed", log)
        raise RunError(f"{error}; {_after_failure(spec, int(trainer.collected_frames))}") from err
    except (OSError, RuntimeError) as err:  # a full disk, a lost mount: one line, trace in the log
        io_error = _as_io_error(err)
        if io_error is None:
            error = _one_line(err)
            raise
        error = _io_error_line(io_error, spec.run_dir)
        trace_to_log_files(err, "Run failed", log)
        raise RunError(error) from err
    except Exception as err:
        error = _one_line(err)  # summary.json and the sweep table say why
        raise
    finally:
        eval_metrics = segment.eval_metrics()
        frames = int(trainer.collected_frames)
        summary = segment.summary(status, error, eval_metrics)
        if status == "completed" and stop.signal:
            summary["signal"] = stop.signal  # arrived in the last iteration: nothing left to stop
        request = _honoured_request(run_)
        if request is not None and status == request["status"]:
            summary["stop_request"] = request  # e.g. a sweeper's pruner: its reason and frames
        _close(spec.run_dir, run_, summary, log_model=spec.log_model)
    _say_how_it_ended(spec, status, stop, frames, request)
    stop.forward()
    objective = eval_metrics.get(spec.objective)
    if eval_metrics:
        log.info("Final evaluation: %s", json.dumps(eval_metrics, sort_keys=True))
    return float(objective) if objective is not None else None


def _say_how_it_ended(
    spec: RunSpec,
    status: str,
    stop: _StopRequest,
    frames: int,
    request: dict[str, Any] | None,
) -> None:
    """One stderr line for a run a signal or a stop request ended early (or just after the end)."""
    if status == "completed" and stop.signal:
        print(
            f"xdrl-train: {stop.signal} arrived in the last iteration: {spec.run_dir} trained its "
            f"whole budget ({frames:,} frames) and is complete",
            file=sys.stderr,
        )
    elif stop.interrupted:
        print(
            f"xdrl-train: interrupted at {frames:,} frames in {spec.run_dir}; "
            f"{_what_was_saved(spec, frames)}",
            file=sys.stderr,
        )
    elif stop.signal:  # SIGTERM, SIGUSR2
        print(
            f"xdrl-train: stopped by {stop.signal} at {frames:,} frames in {spec.run_dir}; "
            f"{_what_was_saved(spec, frames)}",
            file=sys.stderr,
        )
    elif request is not None and status == request["status"]:
        # a sweep does not run a pruned job again: no advice to continue it
        print(
            f"xdrl-train: {status} at {frames:,} frames in {spec.run_dir} ({request['reason']}); "
            f"{_what_was_saved(spec, frames, advice=status != 'pruned')}",
            file=sys.stderr,
        )


def _build(spec: RunSpec, interactive: bool) -> Run:
    """:func:`build_trainer`; a build that fails after starting collector workers (a refused
    or failed restore, a logger that cannot start) stops them: no worker outlives it."""
    try:
        return build_trainer(spec, interactive=interactive)
    except RunComplete:
        raise
    except BaseException:
        stop_started_workers()
        raise


def _evaluate_and_train(spec: RunSpec, run_: Run, stop: _StopRequest, segment: _Segment) -> None:
    """The step-0 evaluation (eval.before_training, a fresh run) or the evaluation a stop
    interrupted at the frames a run resumes from, then training; a stop during that evaluation
    ends the run there (a step-0 one: no frames, no checkpoint)."""
    eval_set = run_.hook_set.eval_hook_set
    if spec.eval.enabled and spec.eval.before_training and run_.trainer.collected_frames == 0:
        run_.hook_set.run_pre_eval()
    elif eval_set is not None:
        eval_set.redo_interrupted()
    segment.train_start = time.perf_counter()
    if stop.signal is None:
        run_.trainer.train()


def _stopped_before_training(
    spec: RunSpec, err: KeyboardInterrupt | StoppedBeforeTraining
) -> BaseException:
    """Print the line of a run stopped while it was built (workers starting, a checkpoint
    loading) and return what to raise: :class:`InterruptReported` for Ctrl-C, else the exit
    code 128+signal."""
    saved = _what_was_saved(spec, None)
    if isinstance(err, StoppedBeforeTraining):
        print(
            f"xdrl-train: stopped by {err} before training started in {spec.run_dir}; {saved}",
            file=sys.stderr,
        )
        return SystemExit(128 + err.signum)
    print(
        f"xdrl-train: aborted by Ctrl-C before training started in {spec.run_dir}; {saved}",
        file=sys.stderr,
    )
    return InterruptReported()


def _what_was_saved(spec: RunSpec, frames: int | None, *, advice: bool = True) -> str:
    """What a run stopped at ``frames`` (None: before it trained) leaves to continue from, read
    from disk, and (``advice``) the command that continues it."""
    if not spec.checkpoint.enabled:
        return "logs written, no checkpoint (checkpoint.enabled=false)"
    newest = _newest_checkpoint(spec.run_dir)
    if newest is None:
        if not advice:
            return "no checkpoint"
        if spec.resume is not None and spec.resume != NEVER:  # it loads that one again
            return f"no checkpoint yet: the same command starts again from resume={spec.resume}"
        return "no checkpoint yet: the same command starts afresh"
    if frames is None or newest >= frames:
        saved = f"checkpoint at {newest:,} frames"
    else:
        saved = f"no checkpoint at {frames:,} frames, the last is at {newest:,}"
    return f"{saved}; {_rerun(spec)} to continue" if advice else saved


def _after_failure(spec: RunSpec, frames: int | None) -> str:
    """What a run that failed in training leaves, for its one stderr line: resume advice only
    where a checkpoint is on disk (a worker that failed before the first one leaves none)."""
    if not spec.checkpoint.enabled:
        return "no checkpoint (checkpoint.enabled=false)"
    if _newest_checkpoint(spec.run_dir) is None:
        return _what_was_saved(spec, frames)
    if spec.resume is not None:
        return f"{_rerun(spec)} to resume from the last checkpoint"
    return "run the same command to resume from the last checkpoint"


def _rerun(spec: RunSpec) -> str:
    """The command that continues the run dir from its newest checkpoint: the same one, unless
    it names ``resume`` (which starts afresh or from that checkpoint again)."""
    own = {Path(spec.run_dir).resolve(), (Path(spec.run_dir) / CHECKPOINT_DIR).resolve()}
    if spec.resume is None or Path(spec.resume).expanduser().resolve() in own:
        return "run the same command again"
    return f"run the same command without resume={spec.resume}"


def _newest_checkpoint(run_dir: str | Path) -> int | None:
    """The frames of the newest whole checkpoint under ``run_dir`` (one whose ``checksums.json``,
    written last, is there; a save a second Ctrl-C cut short is not), None when there is none."""
    frames = [
        int(match[1])
        for path in (Path(run_dir) / CHECKPOINT_DIR).glob("checkpoint-*")
        if (match := CHECKPOINT_NAME.fullmatch(path.name)) and (path / CHECKSUMS_FILE).is_file()
    ]
    return max(frames, default=None)


def _final_status(stop: _StopRequest, trainer: Any, run_: Run) -> str:
    """``completed`` once the whole budget is trained, whatever signal arrived during the last
    iteration (the Trainer has already evaluated and checkpointed it as the end), unless the
    signal interrupted the final evaluation (the same command then resumes to evaluate it);
    else ``interrupted`` (Ctrl-C), ``stopped`` (SIGTERM, SIGUSR2) or the status a
    ``stop-request.json`` named (``pruned``: a sweeper's pruner)."""
    if trainer.collected_frames >= trainer.total_frames and _interrupted_evaluation(run_) is None:
        return "completed"
    if stop.signal:
        return "interrupted" if stop.interrupted else "stopped"
    request = _honoured_request(run_)
    return str(request["status"]) if request is not None else "completed"


def _honoured_request(run_: Run) -> dict[str, Any] | None:
    """The ``stop-request.json`` the run stopped for (status, reason, frames), if any."""
    hook = run_.stop_request
    return hook.request if hook is not None else None


class _Segment:
    """This process's part of a run (a segment: from the frames it resumed at to those it
    stopped at) and the ``summary.json`` of the whole run it ends."""

    def __init__(self, spec: RunSpec, run_: Run, start: float, started: str) -> None:
        self.spec, self.run = spec, run_
        self.start, self.started = start, started
        self.train_start: float | None = None
        self.start_frames = int(run_.trainer.collected_frames)
        resumed = run_.resumed_from
        earlier = resumed_run_dir(Path(resumed)) / SUMMARY_FILE if resumed else None
        self.earlier = earlier_segments(earlier, self.start_frames)
        self.stale_eval = resumed is not None and _eval_settings_changed(spec, resumed)
        self.evaluations_before = _num_evaluations(run_)

    def eval_metrics(self) -> dict[str, float]:
        """The last evaluation's metrics; none when this segment resumed under other eval
        settings and has not evaluated yet (the checkpoint's were measured under the old)."""
        if self.stale_eval and _num_evaluations(self.run) == self.evaluations_before:
            log.info("No evaluation under this run's eval settings yet: summary.json has none")
            return {}
        eval_set = self.run.hook_set.eval_hook_set
        return dict(eval_set.last_metrics) if eval_set is not None else {}

    def summary(
        self, status: str, error: str | None, eval_metrics: dict[str, float]
    ) -> dict[str, Any]:
        """``summary.json``: the outcome, whole-run timing and every segment's."""
        spec, frames = self.spec, int(self.run.trainer.collected_frames)
        now = time.perf_counter()
        clock = self.run.clock  # the progress line's clock: start of training to the last batch
        if clock is not None:
            train_time = round(clock.seconds(), 3)
        else:
            train_time = round(now - self.train_start, 3) if self.train_start is not None else 0.0
        trained = frames - self.start_frames
        skip = spec.frame_skip  # emulator frames per agent step
        segment = {
            "frames": [self.start_frames, frames],
            "started": self.started,
            "wall_time_s": round(now - self.start, 3),
            "train_time_s": train_time,
            "frames_per_second": round(trained / train_time, 1) if train_time > 0 else None,
            "agent_steps_per_second": (
                round(trained / skip / train_time, 1) if train_time > 0 else None
            ),
            "status": status,
            "resumed_from": self.run.resumed_from,
            # what num_threads resolved to in this process (auto reads cores and load)
            "torch_threads": torch.get_num_threads(),
            **segment_budget(spec.total_frames, self.run.budget_from),
        }
        segments = [*self.earlier, segment]
        summary: dict[str, Any] = {
            "status": status,
            "total_frames": frames,
            "agent_steps": frames // skip,
            "frame_skip": skip,
            **whole_run_timing(segments),
            "seed": spec.seed,
            "env": spec.env_id,
            "algorithm": spec.algorithm_name,
            "eval": eval_metrics,
            "segments": segments,
        }
        if self.run.resumed_from:
            summary["resumed_from"] = self.run.resumed_from
            summary["resume_exact"] = self.run.resume_approximate is None
            if self.run.resume_approximate is not None:
                summary["resume_approximate_reason"] = self.run.resume_approximate
        best = _best_checkpoint(self.run.trainer)
        if best is not None:
            summary[BEST_SUMMARY_KEY] = best  # checkpoint.keep_best; xdrl-eval --checkpoint best
        interrupted = _interrupted_evaluation(self.run)
        if interrupted is not None:  # dropped: no record, no eval/ metrics; redone on resume
            summary["evaluation_interrupted"] = interrupted
        if error is not None:
            summary["error"] = error
        offline = getattr(self.run.logger, "offline_fallback", None)
        if offline:
            summary["wandb_offline"] = offline  # W&B could not reach its server: `wandb sync` it
        return summary


def _interrupted_evaluation(run_: Run) -> dict[str, Any] | None:
    """The evaluation a stop interrupted (its frames and subgroups), None when there was none."""
    eval_set = run_.hook_set.eval_hook_set
    frames = eval_set.interrupted_at if eval_set is not None else None
    if eval_set is None or frames is None:
        return None
    subgroups = [h.metric_subgroup for h in eval_set.hooks if h.interrupted_at is not None]
    return {"frames": frames, "subgroups": subgroups}


def _num_evaluations(run_: Run) -> int:
    eval_set = run_.hook_set.eval_hook_set
    return sum(hook.num_evaluations for hook in eval_set.hooks) if eval_set is not None else 0


def _eval_settings_changed(spec: RunSpec, checkpoint: str) -> bool:
    """Whether the run's ``eval`` differs from the eval settings ``checkpoint`` was written
    under."""
    saved = saved_config(Path(checkpoint)) or {}
    return saved.get("eval") != spec.resolved.get("eval")


def _already_complete(spec: RunSpec, done: RunComplete) -> float | None:
    """A run that trained its whole budget, run again: nothing is built, trained, evaluated or
    written (the eval settings may differ from the recorded evaluation's). The objective comes
    back from ``summary.json`` only when the eval settings are those it was recorded under."""
    run_dir = resumed_run_dir(done.checkpoint)
    line = (
        f"{run_dir} is already complete ({done.frames:,} frames, total_frames="
        f"{spec.total_frames:,}): nothing was trained or evaluated and its record is unchanged; "
        f"to evaluate it under other settings run `xdrl-eval {run_dir}`, to train it further "
        f"raise total_frames (e.g. total_frames={2 * done.frames}; linear learning-rate and "
        "clip schedules then end at the new budget)"
    )
    print(f"xdrl-train: {line}", file=sys.stderr)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, line, (), None))
    if _eval_settings_changed(spec, str(done.checkpoint)):
        return None
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
        objective = (summary.get("eval") or {}).get(spec.objective)
    except (OSError, ValueError, AttributeError):
        objective = None
    return float(objective) if isinstance(objective, int | float) else None


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
    """Write summary.json, close the envs and the logger (W&B is finished); an I/O error here is
    logged, not raised."""
    try:
        path = write_summary(run_dir, summary)
        log.info("Wrote %s (%s, %d frames)", path, summary["status"], summary["total_frames"])
    except OSError as err:
        log.error("Could not write the summary: %s", _io_error_line(err, run_dir))
    run_.close()
    if log_model and summary["status"] == "completed":
        from xdrl.policy.wandb_model import log_model as upload

        upload(run_dir, Path(run_dir) / SUMMARY_FILE)
    close_logger(run_.logger)
