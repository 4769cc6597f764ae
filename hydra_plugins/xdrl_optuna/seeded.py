"""Trials of several seeds: each seed one job, the trial told once every seed has a value.

The jobs of a batch of trials go to the launcher in one call, so the seeds of a trial run side
by side on whatever the launcher offers (joblib workers, SLURM nodes). Each job's folder is
``<sweep dir>/<trial>_seed<seed>``, so a command run again after Ctrl-C finds a trial's finished
seeds in its user attributes and launches only the others (an interrupted one resumes in its
folder from its checkpoint).

With a pruner (``hydra/sweeper/pruner=wilcoxon``) the seeds go in waves, one seed of every
trial of the batch per launch, and each seed's value is reported as one step (the step is the
seed, so the steps of two trials pair seed by seed): Optuna's ``WilcoxonPruner`` compares the
seeds a trial has run with the same seeds of the best trial and stops it once a signed-rank test
says it is worse. Without a pruner the whole batch is one launch. A pruner that judges runs
while they train (median, halving: :mod:`.pruning`) keeps the one launch and watches its
evaluations; a job it stops says ``pruned`` in its summary.json and its trial is told PRUNED.
The Wilcoxon pruner on evaluations starts each trial with two seeds and carries its later seeds
into the next batch's launch (:func:`paired_jobs`, :func:`pair_up`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from hydra_plugins.xdrl_optuna.seeds import aggregate, interval
from xdrl.config.errors import first_line
from xdrl.report.study import (
    AGGREGATE_ATTR,
    FRAMES_TO_ATTR,
    INTERVAL_ATTR,
    PRUNED_AT_ATTR,
    PRUNED_ATTR,
    SEED_VALUES_ATTR,
    SEEDS_ATTR,
)
from xdrl.run.layout import SUMMARY_FILE

log = logging.getLogger(__name__)

# (trial, seed) pairs in, one JobReturn per pair out, in order
Launch = Callable[[list[tuple[Any, int]]], Sequence[JobReturn]]


def job_folder(trial_number: int, seed: int) -> str:
    """A trial's job folder for one seed, under the sweep dir."""
    return f"{trial_number}_seed{seed}"


def outcome(ret: JobReturn) -> tuple[str, Any]:
    """What a job left: ``("value", v)``, ``("failed", reason)``, ``("pruned", "pruned")`` (a
    pruner stopped it at a checkpoint) or ``("interrupted", status)`` (Ctrl-C or SIGTERM stopped
    it, or it was not started after a Ctrl-C: the same command continues it)."""
    status = _run_status(ret)
    if status in ("interrupted", "stopped", "not_started"):
        return "interrupted", status
    if status == "pruned":
        return "pruned", status
    if ret.status == JobStatus.FAILED:
        return "failed", first_line(ret._return_value)
    if not isinstance(ret.return_value, int | float) or math.isnan(ret.return_value):
        got = ret.return_value
        return "failed", f"the run returned no objective (got {got!r}); see its summary.json"
    return "value", float(ret.return_value)


def _run_status(ret: JobReturn) -> str | None:
    """The ``status`` of the job's summary.json, if it wrote one."""
    try:
        out = Path(str(ret.hydra_cfg.hydra.runtime.output_dir))  # type: ignore[union-attr]
        return str(json.loads((out / SUMMARY_FILE).read_text()).get("status"))
    except Exception:  # noqa: BLE001 - no summary: the job's JobReturn decides
        return None


def seed_values(trial: Any) -> dict[int, float]:
    """The seeds of ``trial`` that finished, with their values (from its user attributes)."""
    return _per_seed(trial, SEED_VALUES_ATTR)


def _per_seed(trial: Any, attr: str) -> dict[int, float]:
    """``{seed: value}`` of the user attribute ``attr`` (JSON keeps its keys as strings)."""
    return {int(s): float(v) for s, v in trial.user_attrs.get(attr, {}).items()}


def _add_seed(trial: Any, attr: str, seed: int, value: float) -> None:
    """Add ``seed``'s ``value`` to the user attribute ``attr``."""
    values = {str(s): v for s, v in _per_seed(trial, attr).items()} | {str(seed): value}
    trial.set_user_attr(attr, values)


def run_seeded(
    study: Any,
    trials: list[Any],
    *,
    seeds: list[int],
    aggregate_name: str,
    prune: bool,
    launch: Launch,
    interrupted: Callable[[], bool],
    watch: Callable[[list[Any]], AbstractContextManager[Any]] | None = None,
    second: Callable[[Any, int], float] | None = None,
    carry: bool = False,
) -> list[Any]:
    """Run the seeds each of ``trials`` lacks and tell each trial once it has them all.

    A failed seed fails its trial (one line); an interrupted one leaves it running; with
    ``prune`` (between seeds), a trial the study's pruner stops after a wave is told PRUNED with
    the seeds it ran. ``watch(trials)``: a context around each launch that reports the running
    jobs' evaluations and prunes within runs (:class:`~.pruning.EvaluationWatcher`).
    ``second(trial, seed)``: a finished seed's second objective (:mod:`.objectives`); the trial
    is then told both aggregates.

    ``carry`` (a pruner that judges each seed's evaluations as they come): one launch only, in
    :func:`paired_jobs`' order, and the trials that still lack seeds are returned for the caller
    to launch with its next batch (:func:`pair_up`). Without it every trial is told before the
    function returns, and it returns ``[]``."""
    active = list(trials)
    for trial in active:
        trial.set_user_attr(SEEDS_ATTR, seeds)
    while active and not interrupted():
        todo = [(t, [s for s in seeds if s not in seed_values(t)]) for t in active]
        if carry:
            jobs = paired_jobs(todo, len(seeds))
        else:
            jobs = [(t, s) for t, missing in todo for s in (missing[:1] if prune else missing)]
        if not jobs:
            break
        with watch(active) if watch is not None else nullcontext():
            returns = launch(jobs)
        outcomes = [(t, s, *outcome(ret)) for (t, s), ret in zip(jobs, returns, strict=True)]
        steps_are_seeds = watch is None and second is None  # else frames, or no steps at all
        for trial, seed, kind, result in outcomes:  # every finished seed is kept
            if kind == "value":
                _record(trial, seed, result, report=steps_are_seeds)
                if second is not None:
                    # the seed's second objective, a user attribute beside its first
                    _add_seed(trial, FRAMES_TO_ATTR, seed, second(trial, seed))
        stopped = _stop_unfinished(study, outcomes)
        active = [t for t in active if t.number not in stopped]
        for trial in list(active):
            if _finish(study, trial, seeds, aggregate_name, prune, two=second is not None):
                active.remove(trial)
        if carry:
            return active
    return []


def paired_jobs(todo: list[tuple[Any, list[int]]], n_seeds: int) -> list[tuple[Any, int]]:
    """One launch's jobs for ``(trial, missing seeds)``: the later seeds of trials carried from
    an earlier batch first, then the first two seeds of each fresh trial, in trial order.

    Launchers start jobs in the order given. Trial by trial (A0 A1 A2 B0 B1 B2 on 2 workers),
    B's first seed runs beside A's last, alone for its trial, so a pruner that counts each
    (seed, evaluation) as one instance needs twice the frames to judge B; and a trial's third
    seed, started beside a trial that was stopped, leaves the other worker idle until it ends.
    Here each trial starts with two seeds side by side, and its later seeds wait for a batch
    where they have company (:func:`pair_up`); a trial stopped on its first two never starts
    the rest. Measured on Acrobot in docs/optuna.md."""
    carried = [(t, s) for t, missing in todo if len(missing) < n_seeds for s in missing]
    fresh = [(t, s) for t, missing in todo if len(missing) == n_seeds for s in missing[:2]]
    return carried + fresh


def pair_up(carried: list[Any], n_missing: Callable[[Any], int]) -> tuple[list[Any], list[Any]]:
    """``(launch now, keep for later)``: the carried trials whose jobs make an even count, the
    oldest first; the newest is kept back when the count is odd, to run beside the next
    batch's."""
    if sum(n_missing(t) for t in carried) % 2 == 0:
        return list(carried), []
    return carried[:-1], carried[-1:]


def _stop_unfinished(study: Any, outcomes: list[tuple[Any, int, str, Any]]) -> set[int]:
    """Settle the trials a seed did not finish: pruned, failed, or left running (interrupted);
    the numbers of those trials."""
    stopped: set[int] = set()
    for trial, seed, kind, result in outcomes:
        if kind == "value" or trial.number in stopped:
            continue
        stopped.add(trial.number)
        if kind == "pruned":
            _pruned_in_run(study, trial, seed)
        elif kind == "interrupted":
            log.info("Trial %d seed %d was %s: the same command continues it", trial.number,
                     seed, result)  # fmt: skip
        else:
            fail_trial(study, trial, f"seed {seed}: {result}")
    return stopped


def _record(trial: Any, seed: int, value: float, *, report: bool) -> None:
    """A seed's value: with ``report``, one intermediate value whose step is the seed (the
    Wilcoxon pruner's steps; without a pruner, what optuna-dashboard shows per seed), then the
    user attribute that keeps a re-run from launching it again. Not reported where the steps
    are frames (a pruner within runs) or where Optuna takes none (two objectives)."""
    if report:
        trial.report(value, step=seed)
    _add_seed(trial, SEED_VALUES_ATTR, seed, value)


def _pruned_in_run(study: Any, trial: Any, seed: int) -> None:
    """Tell a trial PRUNED whose job ``seed`` a pruner stopped inside the run."""
    from optuna.trial import TrialState

    values = seed_values(trial)
    at = trial.user_attrs.get(PRUNED_AT_ATTR)
    study.tell(trial.number, state=TrialState.PRUNED)
    log.info("Trial %d pruned at %s frames (seed %d stopped; seeds done: %s)", trial.number, at,
             seed, sorted(values))  # fmt: skip


def fail_trial(study: Any, trial: Any, reason: str) -> None:
    """Tell ``trial`` FAIL, keeping ``reason`` (one line) as its ``error`` attribute."""
    from optuna.trial import TrialState

    trial.set_user_attr("error", reason)
    study.tell(trial.number, state=TrialState.FAIL)
    log.warning("Trial %d failed: %s", trial.number, reason)


def _finish(
    study: Any, trial: Any, seeds: list[int], aggregate_name: str, prune: bool, two: bool = False
) -> bool:
    """Tell ``trial`` if it has every seed (its aggregate; with ``two``, the aggregates of both
    objectives) or the pruner stops it; whether it was told."""
    from optuna.trial import TrialState

    values = seed_values(trial)
    if all(s in values for s in seeds):
        measured = [values[s] for s in seeds]
        value = aggregate(measured, aggregate_name)
        trial.set_user_attr(AGGREGATE_ATTR, aggregate_name)
        trial.set_user_attr(INTERVAL_ATTR, interval(measured, aggregate_name))
        if two:
            frames = _per_seed(trial, FRAMES_TO_ATTR)
            study.tell(trial.number, [value, _aggregate_frames([frames[s] for s in seeds],
                                                                aggregate_name)])  # fmt: skip
        else:
            study.tell(trial.number, value)
        log.info("Trial %d: %s %.4g over seeds %s (%s)", trial.number, aggregate_name, value,
                 seeds, ", ".join(f"{v:.4g}" for v in measured))  # fmt: skip
        return True
    if prune and trial.should_prune():
        trial.set_user_attr(PRUNED_ATTR, sorted(values))
        study.tell(trial.number, state=TrialState.PRUNED)
        log.info("Trial %d pruned after seeds %s (values %s)", trial.number, sorted(values),
                 [values[s] for s in sorted(values)])  # fmt: skip
        return True
    return False


def _aggregate_frames(frames: list[float], aggregate_name: str) -> float:
    """The aggregate of the seeds' frames to reach the threshold; ``inf`` where it is undefined
    (NumPy gives NaN for a trimmed mean over several ``inf``)."""
    value = aggregate(frames, aggregate_name)
    return math.inf if math.isnan(value) else value
