"""Pruning inside a trial's runs: Optuna's median, halving and Hyperband pruners on
the evaluations the jobs write while they train.

A job's run dir gets one ``evaluations.jsonl`` line per evaluation (``eval.interval_frames``).
While a launch runs, :class:`EvaluationWatcher` reads those files from the sweep process (every
``poll_s`` seconds; any launcher whose job folders it can read: joblib, basic, SLURM on a shared
file system) and reports the trial's value at each evaluation as one Optuna step, the step being
the collected frames. With ``seeds_per_trial: k`` the value at a step is the trial's aggregate
(``iqm`` ...) over its k seeds, reported once every seed has evaluated at those frames, so two
trials compare on the same seeds at the same frames. When the study's pruner says the trial
should stop, each of its jobs gets ``stop-request.json`` (:mod:`xdrl.trainer_hooks.stop_request`):
it stops after its current batch with a checkpoint and ``summary.json`` says ``pruned``; a job
that had not started yet stops after its first batch. The trial is told ``PRUNED`` with the
frames it was pruned at (user attribute ``pruned_at_frames``).

``hydra/sweeper/pruner=wilcoxon_evals`` (:mod:`.wilcoxon`) reports each seed's evaluation as its
own step instead (the instances of a signed-rank test against the best trial), as soon as that
seed has written it.

Optuna's ``WilcoxonPruner`` is the other kind: it judges a trial between its seeds (each seed's
final value one step, :mod:`.seeded`). A study has one pruner, so one kind of step.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from hydra_plugins.xdrl_optuna.seeds import aggregate
from xdrl.report.study import PRUNED_AT_ATTR
from xdrl.run.layout import EVALUATIONS_FILE, STOP_REQUEST_FILE
from xdrl.trainer_hooks.evaluation_history import read_evaluations

log = logging.getLogger(__name__)

BETWEEN_SEEDS = "seeds"  # WilcoxonPruner: a step per seed, judged between a trial's seeds
WITHIN_RUNS = "evaluations"  # median, halving, ...: a step per evaluation, judged while it runs
# How often the sweep process reads the running jobs' evaluations. A stopped job trains on until
# the read after the evaluation that stopped it: at 1 s, Acrobot's stopped jobs (about 7,000
# frames/s) ran a median of 2,816 frames (up to 4,352) past it, at 0.2 s 1,280-1,536 (docs/
# optuna.md). A read of a batch's evaluation files takes well under a millisecond.
POLL_S = 0.2
SEED_STRIDE = 1000  # an instance's step: frames * SEED_STRIDE + the seed's index in its trial

# A job's folder for (trial, seed)
Folder = Callable[[Any, int], Path]


def pruner_kind(pruner: Any) -> str | None:
    """How ``pruner`` judges a trial: :data:`BETWEEN_SEEDS`, :data:`WITHIN_RUNS`, or None for no
    pruning (None or ``NopPruner``)."""
    from optuna.pruners import NopPruner, WilcoxonPruner

    if pruner is None or isinstance(pruner, NopPruner):
        return None
    if getattr(pruner, "judges_evaluations", False):  # .wilcoxon.EvaluationWilcoxonPruner
        return WITHIN_RUNS
    return BETWEEN_SEEDS if isinstance(pruner, WilcoxonPruner) else WITHIN_RUNS


def instance_step(frames: int, seed_index: int) -> int:
    """The Optuna step of one (seed, evaluation) instance, the same for the same seed index at
    the same frames in every trial (``4096002``: the trial's third seed at 4,096 frames)."""
    return frames * SEED_STRIDE + seed_index


def objective_values(folder: Path, objective: str) -> dict[int, float]:
    """``{frames: objective}`` of the evaluations a job has written so far (none: ``{}``)."""
    path = folder / EVALUATIONS_FILE
    try:
        records = read_evaluations(path) if path.is_file() else []
    except OSError:
        return {}
    return {
        int(r["frames"]): float(r[objective])
        for r in records
        if isinstance(r.get(objective), int | float)
    }


class EvaluationWatcher:
    """Report the evaluations of running trials to Optuna and stop those the pruner prunes.

    Use as a context manager around a launch: a thread polls every ``poll_s`` seconds; on exit
    it stops, the evaluations not yet reported are reported (no pruning decision then: the jobs
    are over) and stop requests no job read are removed.

    Args:
        study: the study the trials belong to.
        trials: the running trials of the launch.
        seeds: the seeds each trial runs (all of them, those finished earlier included).
        folder: the job folder of ``(trial, seed)``.
        objective: the evaluation key that scores a trial (``cfg.objective``).
        aggregate_name: how a step's value comes from the seeds' values (``iqm`` ...).
        poll_s: seconds between reads.
        per_instance: report each seed's evaluation as its own step
            (:func:`instance_step`) as soon as it is written, for
            :class:`~.wilcoxon.EvaluationWilcoxonPruner`, instead of the aggregate once every
            seed has it.

    Example:
        >>> with EvaluationWatcher(study, trials, seeds=[0, 1, 2], folder=f, objective=key,
        ...                        aggregate_name="iqm"):
        ...     returns = launcher.launch(jobs, initial_job_idx=0)
    """

    def __init__(
        self,
        study: Any,
        trials: list[Any],
        *,
        seeds: list[int],
        folder: Folder,
        objective: str,
        aggregate_name: str,
        poll_s: float = POLL_S,
        per_instance: bool = False,
    ) -> None:
        self.trials = list(trials)
        self.seeds = list(seeds)
        self.folder = folder
        self.objective = objective
        self.aggregate_name = aggregate_name
        self.poll_s = poll_s
        self.per_instance = per_instance
        self.pruned: dict[int, int] = {}  # trial number -> frames it was pruned at
        frozen = {t.number: t for t in study.get_trials(deepcopy=False)}
        self._reported = {t.number: set(frozen[t.number].intermediate_values) for t in trials}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EvaluationWatcher:
        self._thread = threading.Thread(target=self._loop, name="xdrl-pruner", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.poll(decide=False)
        for trial in self.trials:  # a job that ended before it read its request
            for seed in self.seeds:
                (self.folder(trial, seed) / STOP_REQUEST_FILE).unlink(missing_ok=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a failed read must not end the sweep
                log.warning("Reading the trials' evaluations failed", exc_info=True)

    def poll(self, decide: bool = True) -> None:
        """Report each trial's new steps (frames every seed has evaluated at); with ``decide``,
        ask the pruner after each and stop a pruned trial's jobs."""
        for trial in self.trials:
            if trial.number in self.pruned:
                continue
            per_seed = [objective_values(self.folder(trial, s), self.objective) for s in self.seeds]
            if self.per_instance:
                self._report_instances(trial, per_seed, decide)
                continue
            common = set.intersection(*(set(v) for v in per_seed)) if per_seed else set()
            for frames in sorted(common - self._reported[trial.number]):
                value = aggregate([values[frames] for values in per_seed], self.aggregate_name)
                trial.report(value, step=frames)
                self._reported[trial.number].add(frames)
                if decide and trial.should_prune():
                    self._prune(trial, frames, f"{self.aggregate_name} {value:.4g}")
                    break

    def _report_instances(self, trial: Any, per_seed: list[dict[int, float]], decide: bool) -> None:
        """Report each (seed, frames) evaluation not reported yet, then ask the pruner once."""
        reported = self._reported[trial.number]
        new = sorted(
            (frames, index, value)
            for index, values in enumerate(per_seed)
            for frames, value in values.items()
            if instance_step(frames, index) not in reported
        )
        for frames, index, value in new:
            trial.report(value, step=instance_step(frames, index))
            reported.add(instance_step(frames, index))
        if decide and new and trial.should_prune():
            at = max(step // SEED_STRIDE for step in reported)  # the furthest seed's frames
            n = len(reported)
            self._prune(trial, at, f"signed-rank test against the best trial on {n} evaluations")

    def _prune(self, trial: Any, frames: int, detail: str) -> None:
        from xdrl.trainer_hooks.stop_request import write_stop_request

        self.pruned[trial.number] = frames
        trial.set_user_attr(PRUNED_AT_ATTR, frames)
        reason = f"Optuna pruner: trial {trial.number} at {frames:,} frames, {detail}"
        log.info("Trial %d pruned at %d frames (%s): stopping its jobs", trial.number, frames,
                 detail)  # fmt: skip
        for seed in self.seeds:
            folder = self.folder(trial, seed)
            write_stop_request(folder, "pruned", reason)


def judge_waiting(study: Any, trials: list[Any]) -> list[Any]:
    """Ask the pruner again about trials that wait between launches for their later seeds (a
    better trial may have finished since their last evaluation); tell the pruned ones PRUNED at
    the frames of their furthest seed and return the others."""
    from optuna.trial import TrialState

    kept = []
    for trial in trials:
        if not trial.should_prune():
            kept.append(trial)
            continue
        steps = study.get_trials(deepcopy=False)[trial.number].intermediate_values
        at = max(step // SEED_STRIDE for step in steps)
        trial.set_user_attr(PRUNED_AT_ATTR, at)
        study.tell(trial.number, state=TrialState.PRUNED)
        log.info("Trial %d pruned at %d frames before its later seeds: a better trial finished "
                 "since its last evaluation", trial.number, at)  # fmt: skip
    return kept
