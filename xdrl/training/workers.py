"""``collector=multiprocess``: the training envs step in worker processes, through TorchRL's own
``MultiSyncCollector`` (what ``torchrl.collectors.Collector(..., backend="process", sync=True)``
returns).

Worker ``i`` builds the run's env factory with ``env.num_envs / workers`` envs seeded
``seed + i * env.num_envs / workers``: sub-env ``k`` of the run gets the seed it gets with
``collector=single``. The workers' batches are concatenated along the env dimension
(``cat_results=0``), so the Trainer and every hook see the ``[env.num_envs, steps]`` batches of
the in-process path; the policy's weights are pushed to the workers before every batch
(``update_at_each_batch``: on-policy algorithms never act with stale weights).

What xdrl adds to TorchRL's collector, all of it process hygiene:

- :func:`worker_init` runs first in each worker: the worker dies with the run
  (``PR_SET_PDEATHSIG``, also when the run is SIGKILLed) and ignores SIGINT/SIGTERM/SIGUSR2, which
  a terminal or SLURM sends to the whole process group: the run stops its workers itself, after
  the checkpoint, which asks them for their state.
- :class:`WorkerCollector` names a failed worker and its cause in one line
  (:class:`WorkerFailed`): the worker's collector (:class:`FaultReportingCollector`) writes the
  exception into a file before the worker exits, where TorchRL's parent only sees an exit code.
- The run's torch thread count is kept (TorchRL lowers it by the worker count at start and
  raises it at shutdown); each worker runs 1 thread.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector, MultiSyncCollector
from torchrl.envs.utils import ExplorationType

from xdrl.training.env_state import EnvState

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_FAULT_FILE = "worker-{}.txt"
# A worker's state_dict entries beside TorchRL's (checkpoints written before them lack them).
EPISODES, EPISODES_NOTE, RNG = "xdrl_episodes", "xdrl_episodes_note", "xdrl_torch_rng"
NO_EPISODES = "the checkpoint holds no worker episodes (written before exact resume with workers)"


_STARTED: weakref.WeakSet[WorkerCollector] = weakref.WeakSet()  # for stop_started_workers


def stop_started_workers() -> None:
    """Stop every worker collector this process started and has not stopped (a run whose build
    failed after its workers started has no ``Run`` to close them)."""
    for collector in list(_STARTED):
        collector.shutdown(raise_on_error=False)


class WorkerFailed(RuntimeError):
    """A collector worker died: which one and why, in one line."""


def worker_init() -> None:
    """First thing in a worker process: die with the parent, leave stop signals to it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the run's shutdown still stops the workers
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


class FaultReportingCollector(Collector):
    """A worker's TorchRL ``Collector``. It writes the exception that ends its collection into
    ``<fault_dir>/worker-<i>.txt`` (one line) and exits the worker with code 1, no traceback; its
    ``state_dict`` also holds its envs mid-episode, its episodes in progress and its torch
    generator (:class:`~xdrl.training.env_state.EnvState`'s pickle), so a resume is exact.

    Args:
        fault_dir: the folder the parent reads after a worker died.
        worker_idx: this worker's index (TorchRL passes it); other arguments: ``Collector``'s.

    Example:
        >>> partial(FaultReportingCollector, fault_dir="/tmp/faults")  # as collector_class
    """

    def __init__(self, *args: Any, fault_dir: str, **kwargs: Any) -> None:
        self._fault_dir = fault_dir
        self._worker = kwargs.get("worker_idx")
        super().__init__(*args, **kwargs)

    def iterator(self) -> Iterator[TensorDictBase]:
        """``Collector.iterator``; an exception is written down, then ends the worker."""
        try:
            yield from super().iterator()
        except Exception as err:  # noqa: BLE001 - any env or policy error ends this worker
            text = str(err).strip()
            line = f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__
            path = Path(self._fault_dir) / _FAULT_FILE.format(self._worker)
            path.write_text(line + "\n", encoding="utf-8")
            raise SystemExit(1) from err

    def state_dict(self) -> OrderedDict:
        """``Collector.state_dict`` with this worker's episodes and torch generator."""
        state = super().state_dict()
        episodes = EnvState(self.env, self)
        state[EPISODES] = episodes.state_dict()["blob"]
        state[EPISODES_NOTE] = episodes.saved_note or ""
        state[RNG] = torch.get_rng_state()
        return state

    def load_state_dict(self, state_dict: OrderedDict, **kwargs: Any) -> None:
        """``Collector.load_state_dict``, then the episodes and generator where saved."""
        state = OrderedDict(state_dict)
        blob, rng = state.pop(EPISODES, None), state.pop(RNG, None)
        state.pop(EPISODES_NOTE, None)
        super().load_state_dict(state, **kwargs)
        if blob is not None:
            EnvState(self.env, self).load_state_dict({"blob": blob})
        if rng is not None:
            torch.set_rng_state(rng)


class WorkerCollector(MultiSyncCollector):
    """TorchRL's ``MultiSyncCollector`` whose worker failures raise :class:`WorkerFailed`
    naming the worker and its cause; built by :func:`build_worker_collector`.

    Example:
        >>> collector = build_worker_collector(factory, policy, workers=2, ...)
        >>> next(iter(collector)).batch_size  # as collector=single's
        torch.Size([8, 32])
    """

    saves_episodes = True  # its state_dict holds the workers' envs and episodes (EnvState's)

    def __init__(self, *args: Any, fault_dir: str, **kwargs: Any) -> None:
        self.fault_dir = fault_dir
        self.resume_note: str | None = None
        _STARTED.add(self)
        try:
            super().__init__(*args, **kwargs)
        except BaseException:  # a worker that failed to start: stop the others, then raise
            self.shutdown(raise_on_error=False)
            raise

    def iterator(self) -> Iterator[TensorDictBase]:
        """``MultiSyncCollector.iterator``, a dead worker named."""
        try:
            yield from super().iterator()
        except Exception as err:  # TorchRL's dead-worker check: RuntimeError, or ValueError
            failed = self.failure(wait_s=5.0)  # from closing a worker that ignores SIGTERM
            if failed is None:
                raise
            raise WorkerFailed(failed) from err

    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        """TorchRL's weight push, watched: TorchRL 0.14.1 waits for every worker's
        acknowledgment without a timeout, so a worker killed meanwhile hung the run (seen: a
        SIGKILLed worker, the run blocked in ``SharedMemWeightSyncScheme._wait_for_ack``). The push
        runs in a helper thread; this one checks the workers every second and raises
        :class:`WorkerFailed` when one died (the helper, a daemon, is left blocked)."""
        done, errors = threading.Event(), []

        def push() -> None:
            try:
                MultiSyncCollector.update_policy_weights_(self, *args, **kwargs)
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
        died meanwhile raises :class:`WorkerFailed`, not the pipe's error."""
        try:
            return super().state_dict()
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
        (None: every worker's episodes and generator, an exact resume)."""
        super().load_state_dict(state_dict)
        notes = []
        for i in range(self.num_workers):
            worker = state_dict[f"worker{i}"]
            note = worker.get(EPISODES_NOTE, "") if EPISODES in worker else NO_EPISODES
            if note and note not in notes:
                notes.append(note)
        self.resume_note = "; ".join(f"collector worker: {n}" for n in notes) or None

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


def _worker_factory(factory: Callable[..., Any], *, num_envs: int, seed: int, device: str) -> Any:
    """Worker-side env: the run's factory with this worker's share of envs and seeds; in a
    worker process, its torch generator (the policy's action sampling) is seeded too, so a run
    with workers repeats itself under the same seed."""
    if multiprocessing.parent_process() is not None:
        torch.manual_seed(seed)
    return factory(num_envs=num_envs, seed=seed, device=device)


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
) -> WorkerCollector:
    """``workers`` processes, each stepping ``num_envs / workers`` envs of ``env_factory`` (the
    run's ``env`` node, partial), with ``policy``; counts in agent steps, as TorchRL's."""
    per_worker = num_envs // workers
    env_fns = [
        partial(
            _worker_factory,
            env_factory,
            num_envs=per_worker,
            seed=seed + i * per_worker,
            device=device,
        )
        for i in range(workers)
    ]
    fault_dir = tempfile.mkdtemp(prefix="xdrl-workers-")
    threads = torch.get_num_threads()  # the run's choice (num_threads); TorchRL would lower it
    collector = WorkerCollector(
        env_fns,
        policy,
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        init_random_frames=init_random_frames,
        device=device,
        exploration_type=ExplorationType.RANDOM,
        cat_results=0,  # [workers * envs, steps]: the in-process batch layout
        use_buffers=True,  # fixed specs: shared-memory buffers (TorchRL guesses so, warning)
        update_at_each_batch=True,  # the learner's weights before every batch
        num_threads=threads,
        num_sub_threads=1,
        init_fn=worker_init,
        collector_class=partial(FaultReportingCollector, fault_dir=fault_dir),
        fault_dir=fault_dir,
    )
    torch.set_num_threads(threads)
    log.info("Collector workers started: %d processes x %d envs (pids %s)", workers, per_worker,
             ", ".join(map(str, collector.worker_pids())))  # fmt: skip
    return collector
