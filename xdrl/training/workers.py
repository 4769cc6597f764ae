"""``collector=multiprocess``: the training envs step in worker processes, through TorchRL's own
``MultiSyncCollector`` (what ``torchrl.collectors.Collector(..., backend="process", sync=True)``
returns).

Worker ``i`` builds the run's env factory with ``env.num_envs / workers`` envs seeded
``seed + i * env.num_envs / workers``: sub-env ``k`` of the run gets the seed it gets with
``collector=single``. The workers' batches are concatenated along the env dimension
(``cat_results=0``), so the Trainer and every hook see the ``[env.num_envs, steps]`` batches of
the in-process path; the policy's weights are pushed to the workers before every batch
(``update_at_each_batch``: on-policy algorithms never act with stale weights). With
``collector.sync: false`` (off-policy algorithms) TorchRL's ``MultiAsyncCollector`` runs instead
(:class:`AsyncWorkerCollector`): each batch is one worker's, collected while the learner
optimizes, the weights pushed every ``collector.update_interval`` batches.

Inside each worker, TorchRL's runner drives :class:`LeanWorkerCollector` (xdrl's
``VectorCollector``, the in-process lean path) where it fits the env and policy, else
:class:`FaultReportingCollector` (TorchRL's ``Collector``); ``collector.env_threads`` steps a
worker's envs in threads (:func:`set_env_threads`). The rest xdrl adds is process hygiene:

- :func:`worker_init` runs first in each worker: the worker dies with the run
  (``PR_SET_PDEATHSIG``, also when the run is SIGKILLed) and ignores SIGINT/SIGTERM/SIGUSR2, which
  a terminal or SLURM sends to the whole process group: the run stops its workers itself, after
  the checkpoint, which asks them for their state. A worker is spawned with those signals blocked
  (:meth:`WorkerCollector._run_processes`), so one sent while it still imports torch (~5 s,
  before ``worker_init`` runs) waits and is then ignored; a run stopped then kills its
  half-started workers instead of waiting for them.
- :class:`WorkerCollector` names a failed worker and its cause in one line
  (:class:`WorkerFailed`): the worker's collector (:class:`FaultReportingCollector`) writes the
  exception into a file before the worker exits, where TorchRL's parent only sees an exit code.
  Both worker collectors share this and the exact-resume state (:class:`_FaultReporting`).
- With ``env.normalize_observations`` the workers normalize with the run's statistics, which the
  run merges from every batch's raw observations (:mod:`xdrl.training.worker_norm`).
- The run's torch thread count is kept (TorchRL lowers it by the worker count at start and
  raises it at shutdown); each worker runs 1 thread.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import multiprocessing
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.collectors import (
    Collector,
    MultiAsyncCollector,
    MultiCollector,
    MultiSyncCollector,
)
from torchrl.envs.utils import ExplorationType

from xdrl.envs.vector_env import VectorGymEnv
from xdrl.lean.collector import VectorCollector
from xdrl.training.env_state import EnvState
from xdrl.training.worker_norm import RunObservationNorm, link_worker_norm, relinked

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_FAULT_FILE = "worker-{}.txt"
# A worker's state_dict entries beside TorchRL's (checkpoints written before them lack them).
EPISODES, EPISODES_NOTE, RNG = "xdrl_episodes", "xdrl_episodes_note", "xdrl_torch_rng"
_TRAJ_IDS = ("collector", "traj_ids")  # TorchRL's parent counts a worker's frames by it
NO_EPISODES = "the checkpoint holds no worker episodes (written before exact resume with workers)"
ENV_STATE = "env_state_dict"  # collector=single's key for its env's transform state


_STARTED: weakref.WeakSet[Any] = weakref.WeakSet()  # for stop_started_workers (Ray's too)


def stop_started_workers() -> None:
    """Stop every worker collector this process started and has not stopped (a run whose build
    failed after its workers started has no ``Run`` to close them)."""
    for collector in list(_STARTED):
        collector.shutdown(raise_on_error=False)


class WorkerFailed(RuntimeError):
    """A collector worker died: which one and why, in one line."""


# What a terminal (Ctrl-C) or a scheduler (SIGTERM; SLURM's USR2) sends the run's whole process
# group, workers included: the run stops its workers itself.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)


def worker_init() -> None:
    """First thing in a worker process: die with the parent, leave stop signals to it (ignored
    from here on; one that arrived while the worker started, blocked since its spawn, is dropped
    as the block lifts)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the run's shutdown still stops the workers
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


class _FaultReporting:
    """What both worker collectors add to theirs: the exception that ends collection is written
    into ``<fault_dir>/worker-<i>.txt`` (one line) and exits the worker with code 1, no
    traceback (one that fails the collector's construction, such as an env whose ``reset``
    raises, is written there too, then left to TorchRL's runner to report); ``state_dict`` also
    holds the envs mid-episode, the episodes in progress and the
    torch generator (:class:`~xdrl.training.env_state.EnvState`'s pickle), so a resume is exact."""

    _fault_dir: str | None
    _worker: int | None
    env: Any

    def iterator(self) -> Iterator[TensorDictBase]:
        """The collector's ``iterator``; an exception is written down, then ends the worker
        (without a ``fault_dir``, a Ray actor's, it is raised: Ray hands it to the run)."""
        if self._fault_dir is None:
            yield from super().iterator()  # type: ignore[misc]
            return
        try:
            yield from super().iterator()  # type: ignore[misc]
        except Exception as err:  # noqa: BLE001 - any env or policy error ends this worker
            self._write_fault(err)
            raise SystemExit(1) from err

    def _write_fault(self, err: BaseException) -> None:
        """``Type: first line`` of ``err`` into the file the run reads (a Ray actor has none)."""
        if self._fault_dir is None:
            return
        text = str(err).strip()
        line = f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__
        path = Path(self._fault_dir) / _FAULT_FILE.format(self._worker)
        path.write_text(line + "\n", encoding="utf-8")

    def state_dict(self) -> OrderedDict:
        """The collector's ``state_dict`` with this worker's episodes and torch generator."""
        state = super().state_dict()  # type: ignore[misc]
        episodes = EnvState(self.env, self)
        state[EPISODES] = episodes.state_dict()["blob"]
        state[EPISODES_NOTE] = episodes.saved_note or ""
        state[RNG] = torch.get_rng_state()
        return state

    def load_state_dict(self, state_dict: OrderedDict, **kwargs: Any) -> None:
        """The collector's ``load_state_dict``, then the episodes and generator where saved."""
        state = OrderedDict(state_dict)
        blob, rng = state.pop(EPISODES, None), state.pop(RNG, None)
        state.pop(EPISODES_NOTE, None)
        with relinked(self.env):  # a normalizing worker stays on the run's statistics
            super().load_state_dict(state, **kwargs)  # type: ignore[misc]
        if blob is not None:
            EnvState(self.env, self).load_state_dict({"blob": blob})
        if rng is not None:
            torch.set_rng_state(rng)


class FaultReportingCollector(_FaultReporting, Collector):
    """A worker's TorchRL ``Collector`` (where :class:`LeanWorkerCollector` does not fit: Atari,
    ``SerialEnv`` batching, observation normalization, ``lean: false``), reporting its fault
    and saving its episodes as :class:`_FaultReporting` says.

    Args:
        fault_dir: the folder the parent reads after a worker died.
        worker_idx: this worker's index (TorchRL passes it); other arguments: ``Collector``'s.

    Example:
        >>> partial(FaultReportingCollector, fault_dir="/tmp/faults")  # as collector_class
    """

    def __init__(self, *args: Any, fault_dir: str | None, **kwargs: Any) -> None:
        self._fault_dir = fault_dir
        self._worker = kwargs.get("worker_idx")
        try:
            super().__init__(*args, **kwargs)
        except Exception as err:
            self._write_fault(err)
            raise


class LeanWorkerCollector(_FaultReporting, VectorCollector):
    """A worker's collector on xdrl's lean path: :class:`~xdrl.lean.collector.VectorCollector`
    (the ``collector=single`` path where it fits, parity-tested against TorchRL's ``Collector``)
    under TorchRL's multi-process runner, which builds it with its ``Collector``'s arguments.

    Why: inside a worker TorchRL's ``Collector`` stepped 2 SleepyCartPole envs in 2.66 ms per
    vector step without the waits, ``VectorCollector`` in 0.43 ms (1 thread, same process, load
    9), so 4 workers on 2 cores spent their time in TensorDict work, not overlapping waits.

    It yields the same TensorDict each batch, updated in place (the runner's shared-memory
    buffers ask for that), with a ``("collector", "traj_ids")`` entry the parent counts frames
    by (:class:`WorkerCollector` drops it again). The policy comes from the runner's
    ``policy_factory``, whose weights TorchRL's shared-memory scheme updates in place.

    Args:
        create_env_fn: the worker's env factory; ``create_env_kwargs``: its arguments.
        policy, policy_factory: the policy, or TorchRL's factory that connects its weights.
        frames_per_batch: agent steps per batch; ``total_frames``: -1 (the runner's) or a cap.
        init_random_frames: random warm-up frames (the runner sets it per batch).
        worker_idx: this worker's index; ``fault_dir``: as :class:`FaultReportingCollector`.
        runner_options: the runner's other ``Collector`` arguments, which xdrl leaves at
            their defaults (no postproc, replay buffer or trajectory splitting).

    Example:
        >>> partial(LeanWorkerCollector, fault_dir="/tmp/faults")  # as collector_class
    """

    _use_buffers = True  # read by TorchRL's runner: one shared-memory batch, updated in place

    def __init__(
        self,
        create_env_fn: Callable[..., Any],
        *,
        create_env_kwargs: dict[str, Any] | None = None,
        policy: Any = None,
        policy_factory: Callable[[], Any] | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        init_random_frames: int | None = None,
        worker_idx: int | None = None,
        fault_dir: str | None,
        **runner_options: Any,
    ) -> None:
        self._fault_dir = fault_dir
        self._worker = self.worker_idx = worker_idx
        try:
            env = create_env_fn(**(create_env_kwargs or {}))
            policy = policy_factory() if policy_factory is not None else policy
            super().__init__(
                env,
                policy,
                frames_per_batch=frames_per_batch,
                total_frames=total_frames if total_frames >= 0 else sys.maxsize,
                init_random_frames=init_random_frames or 0,
            )
        except Exception as err:
            self._write_fault(err)
            raise
        self._out: TensorDictBase | None = None

    def iterator(self) -> Iterator[TensorDictBase]:
        """``VectorCollector``'s batches, written into one TensorDict (the runner shares its
        memory with the parent after the first batch)."""
        for batch in super().iterator():
            if self._out is None:
                n, steps = batch.batch_size
                traj_ids = torch.zeros(n, steps, dtype=torch.int64)
                batch.set(_TRAJ_IDS, traj_ids)
                self._out = batch.to(self.device)  # the runner checks the storing device
            else:
                self._out.update_(batch)
            yield self._out


class _StopsWhileStarting:
    """Hold back the stop signals while TorchRL starts the workers: blocked in this thread
    until :meth:`unblock` (the workers spawned meanwhile inherit the block), handled by a
    handler that only notes the signal and calls ``on_stop`` (kill the workers) until the block
    exits; :meth:`deliver` then sends the noted signal again to the handler it replaced (the
    run's: ``KeyboardInterrupt``, a stop before training). Signals ignored, or any outside the
    main thread, are left alone.

    Args:
        on_stop: called once, at the first stop signal.

    Example:
        >>> with _StopsWhileStarting(on_stop=kill) as stops: ...
        >>> stops.deliver()  # where a signal arrived
    """

    def __init__(self, on_stop: Callable[[], None]) -> None:
        self.on_stop = on_stop
        self.signum: int | None = None
        self._handlers: dict[int, Any] = {}
        self._mask: set[int] | None = None

    def __enter__(self) -> _StopsWhileStarting:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if signal.getsignal(sig) != signal.SIG_IGN:
                    self._handlers[sig] = signal.signal(sig, self._note)
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        return self

    def _note(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            log.warning("%s received while the collector workers start: stopping them",
                        signal.Signals(signum).name)  # fmt: skip
            self.on_stop()

    def unblock(self) -> None:
        """Let the stop signals in again (a blocked one is noted now)."""
        mask, self._mask = self._mask, None
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def __exit__(self, *exc: Any) -> None:
        self.unblock()
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)

    def deliver(self) -> None:
        """Send the noted signal to the handler it was kept from; raise if that one returns
        (a handler that neither raises nor exits: the workers are gone all the same)."""
        assert self.signum is not None
        name = signal.Signals(self.signum).name
        signal.raise_signal(self.signum)
        raise WorkerFailed(f"collector workers stopped by {name} while they started")


class _SpawnWatch(list):
    """TorchRL's list of worker processes, which it appends to as it spawns them: calls
    ``spawned`` once it holds ``expected``."""

    def __init__(self, procs: list[Any], expected: int, spawned: Callable[[], None]) -> None:
        super().__init__(procs)
        self.expected, self.spawned = expected, spawned

    def append(self, proc: Any) -> None:
        super().append(proc)
        if len(self) == self.expected:
            self.spawned()


def resume_note(workers: list[Any]) -> str | None:
    """What a resume from these saved worker states does not restore, each note once (None:
    every worker's episodes and generator, an exact resume)."""
    notes: list[str] = []
    for worker in workers:
        note = worker.get(EPISODES_NOTE, "") if EPISODES in worker else NO_EPISODES
        if note and note not in notes:
            notes.append(note)
    return "; ".join(f"collector worker: {n}" for n in notes) or None


class WorkerCollector(MultiCollector):
    """What xdrl adds to TorchRL's multi-process collectors: worker failures raise
    :class:`WorkerFailed` naming the worker and its cause, a weight push that cannot hang on a
    dead worker, batches without the ``collector`` entry. Built by
    :func:`build_worker_collector` as :class:`SyncWorkerCollector` or
    :class:`AsyncWorkerCollector`.

    Example:
        >>> collector = build_worker_collector(factory, policy, workers=2, ...)
        >>> next(iter(collector)).batch_size  # as collector=single's
        torch.Size([8, 32])
    """

    saves_episodes = True  # its state_dict holds the workers' envs and episodes (EnvState's)

    def __init__(
        self,
        *args: Any,
        fault_dir: str,
        observation_norm: RunObservationNorm | None = None,
        **kwargs: Any,
    ) -> None:
        self.fault_dir = fault_dir
        self.observation_norm = observation_norm
        self.resume_note: str | None = None
        self._children_before: set[Any] | None = None  # this process's children before its own
        self._stops = _StopsWhileStarting(on_stop=self._kill_workers)
        _STARTED.add(self)
        try:
            super().__init__(*args, **kwargs)
        except Exception:  # a worker that failed to start: stop the others, then raise
            self.shutdown(raise_on_error=False)
            raise
        except BaseException:  # a stop (Ctrl-C, SIGTERM) while they start: nothing to save
            self._kill_workers()
            self.shutdown(raise_on_error=False)
            raise

    @property
    def procs(self) -> list[Any]:
        """The worker processes (TorchRL's list; empty until :meth:`_run_processes` made it)."""
        return self.__dict__.get("_procs", [])

    @procs.setter
    def procs(self, procs: list[Any]) -> None:
        self._procs = _SpawnWatch(procs, self.num_workers, self._spawned)

    def _run_processes(self) -> None:
        """TorchRL's worker start, the stop signals held back (:class:`_StopsWhileStarting`):
        blocked while the workers are spawned, so each inherits them blocked and keeps them
        until :func:`worker_init` ignores them (unblocked, a worker still importing torch died
        of SIGTERM or printed its ``KeyboardInterrupt`` traceback: two workers, 96 lines before
        the run's line), then noted instead of raised while TorchRL waits for the workers (a
        ``KeyboardInterrupt`` raised inside TorchRL's spawn loop became tensordict's
        "Converting a tensordict to boolean value" error). A stop kills the starting workers at
        once and is handed to the run's own handler once TorchRL has returned.

        A worker whose collector failed to build (an env whose ``reset`` raises) wrote its
        cause: :class:`WorkerFailed` names it in one line, where TorchRL re-raised it with the
        worker's traceback."""
        self._children_before = set(multiprocessing.active_children())
        with _StopsWhileStarting(on_stop=self._kill_workers) as stops:
            self._stops = stops
            try:
                super()._run_processes()  # type: ignore[misc]
            except Exception as err:
                if stops.signum is None:
                    failed = self._first_failure()  # before TorchRL's shutdown removes them
                    if failed is not None:
                        raise WorkerFailed(failed) from err
                    raise
            finally:
                if stops.signum is not None:
                    self._kill_workers()  # those spawned after the signal too
        if stops.signum is not None:
            stops.deliver()

    def _spawned(self) -> None:
        """Every worker is spawned: log their pids (the workers now import torch and build their
        envs), then let the stop signals in (:meth:`_StopsWhileStarting.unblock`)."""
        log.info("Collector workers spawned (pids %s): waiting for them to start",
                 ", ".join(str(p.pid) for p in self.procs))  # fmt: skip
        self._stops.unblock()

    def _kill_workers(self) -> None:
        """SIGKILL every worker still alive (workers ignore SIGTERM, and one still starting
        does not read TorchRL's close message: its shutdown waited 10 s for it), including one
        started but not yet in :attr:`procs`."""
        before = self._children_before
        started = set(multiprocessing.active_children()) - before if before is not None else set()
        for proc in [*self.procs, *started]:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if proc.is_alive():
                    proc.kill()

    def iterator(self) -> Iterator[TensorDictBase]:
        """``MultiSyncCollector.iterator``, a dead worker named; the batches lose the
        ``collector`` entry (trajectory ids the parent counts frames by), as ``collector=single``'s
        batches have none."""
        with self._dead_worker_named():
            for batch in super().iterator():
                if self.observation_norm is not None:  # the workers wait meanwhile
                    batch = self.observation_norm.merge(batch)
                yield batch.exclude(_TRAJ_IDS[0])

    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        """TorchRL's weight push, watched: TorchRL 0.14.1 waits for every worker's
        acknowledgment without a timeout, so a worker killed meanwhile hung the run (seen: a
        SIGKILLed worker, the run blocked in ``SharedMemWeightSyncScheme._wait_for_ack``). The push
        runs in a helper thread; this one checks the workers every second and raises
        :class:`WorkerFailed` when one died (the helper, a daemon, is left blocked)."""
        done, errors = threading.Event(), []
        update = super().update_policy_weights_

        def push() -> None:
            try:
                update(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(err)
            finally:
                done.set()

        threading.Thread(target=push, name="xdrl-weight-push", daemon=True).start()
        while not done.wait(1.0):
            failed = self.failure()
            if failed is not None:
                raise WorkerFailed(failed)
        if errors:
            raise errors[0]

    def state_dict(self) -> OrderedDict:
        """TorchRL's ``state_dict`` (asked of every worker, for a checkpoint); a worker that
        died meanwhile raises :class:`WorkerFailed`, not the pipe's error. With observation
        normalization, the run's statistics sit under ``env_state_dict``, as ``collector=single``
        saves them (where ``xdrl-eval`` reads them)."""
        with self._dead_worker_named():
            state = super().state_dict()
        if self.observation_norm is not None:
            state = copy.deepcopy(state)  # the workers' entries hold the live shared statistics
            state[ENV_STATE] = self.observation_norm.state_dict()
        return state

    @contextlib.contextmanager
    def _dead_worker_named(self) -> Iterator[None]:
        """An error from TorchRL's talk with the workers becomes :class:`WorkerFailed` where a
        worker died (TorchRL's dead-worker check raises RuntimeError, or ValueError from closing
        a worker that ignores SIGTERM; a broken pipe comes before the exit status)."""
        try:
            yield
        except Exception as err:
            failed = self.failure(wait_s=5.0)
            if failed is None:
                raise
            raise WorkerFailed(failed) from err

    def failure(self, wait_s: float = 0.0) -> str | None:
        """``collector worker <i> failed: <cause>`` for the first dead worker, None if none;
        ``wait_s``: how long to wait for a worker to exit (a broken pipe comes before the
        exit status)."""
        deadline = time.monotonic() + wait_s
        while True:
            failed = self._first_failure()
            if failed is not None or time.monotonic() >= deadline:
                return failed
            time.sleep(0.05)

    def _first_failure(self) -> str | None:
        for i, proc in enumerate(getattr(self, "procs", ())):
            try:
                code = proc.exitcode
            except ValueError:  # a process object TorchRL's check closed: it had exited
                code = None
            written = Path(self.fault_dir) / _FAULT_FILE.format(i)
            if written.exists():
                cause = written.read_text(encoding="utf-8").strip()
                return f"collector worker {i} failed: {cause}"
            if code not in (None, 0):
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                return f"collector worker {i} died ({how})"
        return None

    def load_state_dict(self, state_dict: OrderedDict) -> None:
        """TorchRL's load on every worker; :attr:`resume_note` then says what was not restored
        (None: every worker's episodes and generator, an exact resume). The run's
        observation statistics, where saved, go into the tensors the workers read."""
        state_dict = OrderedDict(state_dict)
        statistics = state_dict.pop(ENV_STATE, None)
        super().load_state_dict(state_dict)
        if self.observation_norm is not None and statistics is not None:
            self.observation_norm.load_state_dict(statistics)
        self.resume_note = resume_note([state_dict[f"worker{i}"] for i in range(self.num_workers)])

    def worker_pids(self) -> list[int]:
        """The workers' process ids (the run logs them: a test or an operator can check them)."""
        return [int(p.pid) for p in self.procs if p.pid is not None]

    def shutdown(
        self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True
    ) -> None:
        """Stop the workers (TorchRL's shutdown) and remove the fault folder; safe to call twice.
        The process keeps its torch thread count (TorchRL's shutdown would raise it by the
        worker count)."""
        threads = torch.get_num_threads()
        try:
            super().shutdown(timeout=timeout, close_env=close_env, raise_on_error=raise_on_error)
        finally:
            torch.set_num_threads(threads)
            shutil.rmtree(self.fault_dir, ignore_errors=True)
            _STARTED.discard(self)


class SyncWorkerCollector(WorkerCollector, MultiSyncCollector):
    """``collector.sync: true``: TorchRL's ``MultiSyncCollector`` (every batch waits for every
    worker; the learner's weights reach them before the next one) with :class:`WorkerCollector`'s
    additions."""


class AsyncWorkerCollector(WorkerCollector, MultiAsyncCollector):
    """``collector.sync: false`` (off-policy algorithms): TorchRL's ``MultiAsyncCollector``, each
    batch one worker's ``frames_per_batch`` frames, and that worker collects its next batch while
    the learner optimizes on this one; the learner's weights go out before the first batch, then
    after every ``update_interval`` batches it has optimized on.

    Its ``iterator`` is xdrl's because TorchRL's cannot be checkpointed mid-run: asked for its
    ``state_dict`` between two batches, a worker busy collecting drops its batch to answer and is
    never told to go on (seen with 2 workers: every later batch came from the other one). Here
    :meth:`state_dict` first takes the batch of every busy worker (kept, and yielded next), so
    every worker is idle, and its saved envs are those after its last batch.

    Args:
        update_interval: batches between weight pushes; other arguments: ``MultiAsyncCollector``'s
            (``update_at_each_batch`` is not used).

    Example:
        >>> collector = build_worker_collector(factory, policy, workers=2, sync=False, ...)
        >>> next(iter(collector)).batch_size  # one worker's envs
        torch.Size([4, 64])
    """

    def __init__(self, *args: Any, update_interval: int = 1, **kwargs: Any) -> None:
        self.update_interval = update_interval
        self._busy: set[int] = set()  # workers told to collect whose batch is not taken yet
        self._taken: deque[tuple[int, TensorDictBase]] = deque()  # taken early by state_dict
        super().__init__(*args, **kwargs)

    def iterator(self) -> Iterator[TensorDictBase]:
        """Batches as the workers deliver them (a dead worker named: :class:`WorkerFailed`)."""
        with self._dead_worker_named():
            self.update_policy_weights_()
            for worker in range(self.num_workers):
                self._collect(worker)
            self.running = True
            count = 0
            while self._frames < self.total_frames:
                worker, batch = self._taken.popleft() if self._taken else self._take()
                self._frames += batch.numel()
                self._collect(worker)  # its next batch, while the learner works on this one
                yield batch.exclude(*(k for k in batch.keys() if k.startswith("_")), _TRAJ_IDS[0])
                count += 1
                if count % self.update_interval == 0:
                    self.update_policy_weights_()
            self.running = False

    def _collect(self, worker: int) -> None:
        """Tell ``worker`` to collect a batch (random actions during ``init_random_frames``)."""
        msg = "continue_random" if self._should_use_random_frames() else "continue"
        self.pipes[worker].send((worker, msg))
        self._busy.add(worker)

    def _take(self) -> tuple[int, TensorDictBase]:
        """The next batch a worker delivers (a copy: its shared buffer is reused)."""
        while True:
            try:
                worker, _, batch = self._get_from_queue(timeout=1.0)
            except (queue.Empty, TimeoutError):
                failed = self.failure()
                if failed is not None:
                    raise WorkerFailed(failed) from None
                continue
            self._busy.discard(worker)
            return worker, batch

    def state_dict(self) -> OrderedDict:
        """TorchRL's ``state_dict`` once every worker is idle: the batches of busy workers are
        taken first (and yielded next, so no frame is lost in this run; a run resumed from this
        state starts after them)."""
        with self._dead_worker_named():
            while self._busy:
                self._taken.append(self._take())
        return super().state_dict()


def set_env_threads(env: Any, threads: int) -> None:
    """Step ``env``'s sub-envs in ``threads`` threads (``collector.env_threads``) where it is a
    :class:`~xdrl.envs.vector_env.VectorGymEnv` (a warning otherwise: the batching fell back)."""
    if threads <= 1:
        return
    base = getattr(env, "base_env", env)
    if isinstance(base, VectorGymEnv):
        base.set_step_threads(threads)
    else:
        log.warning("collector.env_threads=%d ignored: the training envs are a %s, not "
                    "env.batching=vector's VectorGymEnv", threads, type(base).__name__)  # fmt: skip


def _worker_factory(
    factory: Callable[..., Any],
    *,
    num_envs: int,
    seed: int,
    device: str,
    env_threads: int = 1,
    observation_statistics: dict[str, Any] | None = None,
    state_primers: Any = None,
    in_worker: bool = False,
) -> Any:
    """Worker-side env: the run's factory with this worker's share of envs and seeds; in a
    worker process, its torch generator (the policy's action sampling) is seeded too, so a run
    with workers repeats itself under the same seed. ``observation_statistics``: the run's
    shared normalization statistics, which the env's ``VecNormV2`` then reads, frozen
    (:func:`~xdrl.training.worker_norm.link_worker_norm`). ``state_primers``: a recurrent
    policy's state entries, appended (a copy) as the run appends them to its own env.
    ``in_worker``: this is a worker process whatever ``multiprocessing`` says (a Ray actor)."""
    if in_worker or multiprocessing.parent_process() is not None:
        torch.manual_seed(seed)
    env = factory(num_envs=num_envs, seed=seed, device=device)
    if observation_statistics is not None:
        link_worker_norm(env, observation_statistics)
    if state_primers is not None:
        env.append_transform(copy.deepcopy(state_primers))
    set_env_threads(env, env_threads)
    return env


def build_worker_collector(
    env_factory: Callable[..., Any],
    policy: Any,
    *,
    workers: int,
    num_envs: int,
    seed: int,
    frames_per_batch: int,
    total_frames: int,
    init_random_frames: int,
    device: str,
    lean: bool = False,
    env_threads: int = 1,
    sync: bool = True,
    update_interval: int = 1,
    observation_norm: RunObservationNorm | None = None,
    state_primers: Any = None,
) -> WorkerCollector:
    """``workers`` processes, each stepping ``num_envs / workers`` envs of ``env_factory`` (the
    run's ``env`` node, partial), with ``policy``; counts in agent steps, as TorchRL's. ``lean``:
    each worker collects with :class:`LeanWorkerCollector` (the caller checked that
    ``VectorCollector`` fits the env and policy), else with TorchRL's ``Collector``;
    ``env_threads``: threads stepping each worker's envs (:func:`set_env_threads`).

    ``sync``: every batch is the workers' batches joined, the weights pushed before each
    (:class:`SyncWorkerCollector`); else each batch is one worker's ``frames_per_batch`` frames
    and the weights go out every ``update_interval`` batches (:class:`AsyncWorkerCollector`).

    ``observation_norm``: the run's normalization statistics, which every worker normalizes
    with and every batch updates (synchronous workers only: :mod:`xdrl.training.worker_norm`).
    ``state_primers``: a recurrent policy's state entries (TorchRL's primers), added to every
    worker's envs so that its collector carries the hidden states as the in-process one does."""
    if observation_norm is not None and not sync:
        raise ValueError("observation normalization needs synchronous workers (sync=True)")
    per_worker = num_envs // workers
    env_kwargs = (
        {"observation_statistics": observation_norm.worker_statistics()} if observation_norm else {}
    )
    env_fns = [
        partial(
            _worker_factory,
            env_factory,
            num_envs=per_worker,
            seed=seed + i * per_worker,
            device=device,
            env_threads=env_threads,
            state_primers=state_primers,
        )
        for i in range(workers)
    ]
    fault_dir = tempfile.mkdtemp(prefix="xdrl-workers-")
    inner = LeanWorkerCollector if lean else FaultReportingCollector
    threads = torch.get_num_threads()  # the run's choice (num_threads); TorchRL would lower it
    if sync:
        layout: dict[str, Any] = {
            "cat_results": 0,  # [workers * envs, steps]: the in-process batch layout
            "update_at_each_batch": True,  # the learner's weights before every batch
        }
    else:  # AsyncWorkerCollector.iterator pushes the weights
        layout = {"update_interval": update_interval, "update_at_each_batch": False}
    collector = (SyncWorkerCollector if sync else AsyncWorkerCollector)(
        env_fns,
        policy,
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        init_random_frames=init_random_frames,
        device=device,
        exploration_type=ExplorationType.RANDOM,
        use_buffers=True,  # fixed specs: shared-memory buffers (TorchRL guesses so, warning)
        num_threads=threads,
        num_sub_threads=1,
        init_fn=worker_init,
        collector_class=partial(inner, fault_dir=fault_dir),
        create_env_kwargs=[env_kwargs] * workers,  # passed as shared memory, not pickled copies
        fault_dir=fault_dir,
        observation_norm=observation_norm,
        **layout,
    )
    torch.set_num_threads(threads)
    log.info("Collector workers started: %d processes x %d envs, %s, %s (pids %s)", workers,
             per_worker, type(collector).__name__, inner.__name__,
             ", ".join(map(str, collector.worker_pids())))  # fmt: skip
    return collector
