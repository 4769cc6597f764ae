"""``collector=ray``: the training envs step in Ray actors, through TorchRL's own
``RayCollector`` (what ``torchrl.collectors.Collector(..., backend="ray")`` returns).

Each actor runs what a ``collector=multiprocess`` worker runs (:mod:`xdrl.training.workers`):
worker ``i`` builds the run's env factory with ``env.num_envs / workers`` envs seeded
``seed + i * env.num_envs / workers`` and its torch generator seeded the same way, and collects
with xdrl's lean ``VectorCollector`` where it fits, else TorchRL's ``Collector``. So a run
with Ray actors collects the batches of a run with as many worker processes, and the Trainer
and every hook see the in-process path's ``[env.num_envs, steps]`` batches.

What xdrl adds to TorchRL's ``RayCollector`` (:class:`RayWorkerCollector`):

- **Where Ray runs.** ``collector.address: null`` starts a local Ray inside the run with the
  cores the run may use (its processes stop with the run: ``ray.shutdown``, and the kernel
  kills them if the run dies, Ray's fate sharing); ``auto`` or ``host:port`` joins a running
  cluster, which the run leaves running. Ray's own processes ignore the stop signals a terminal
  or SLURM sends the run's process group: the run stops them after its checkpoint, which asks
  the actors for their state.
- **The synchronous loop.** Before every batch the learner's weights go out (TorchRL's
  ``RayWeightSyncScheme``), then, with observation normalization, the run's statistics (an
  actor call queued before the batch's, so it lands first); the actors' batches are joined
  along the env dimension. TorchRL's own iterator stacks them (``[workers, envs, steps]``) and
  ends by stopping the actors, which a checkpointed run cannot afford.
- **Checkpoints.** TorchRL's ``state_dict`` is a list (one entry per actor); xdrl saves it as
  ``collector=multiprocess`` saves its workers' (``worker<i>``, with each worker's envs mid-episode,
  episodes in progress and generator), plus the run's observation statistics under
  ``env_state_dict``, so the resume is exact and ``xdrl-eval`` reads the statistics.
- **Faults.** An actor whose env or policy raises hands its exception to the run (Ray's
  ``RayTaskError``); an actor that died (a lost node, a killed process) gives Ray's
  ``RayActorError``: both become one :class:`~xdrl.training.workers.WorkerFailed` line naming
  the worker and its cause.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import signal
from collections import OrderedDict
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, cast

import ray
import torch
from tensordict import TensorDictBase
from torchrl.collectors.distributed import RayCollector
from torchrl.envs.utils import ExplorationType

from xdrl.training.worker_norm import RunObservationNorm, find_norm, kept_linked
from xdrl.training.workers import (
    _STARTED,
    _TRAJ_IDS,
    ENV_STATE,
    FaultReportingCollector,
    LeanWorkerCollector,
    WorkerFailed,
    _worker_factory,
    resume_note,
)

log = logging.getLogger(__name__)

# Signals a terminal (SIGINT) or SLURM (SIGTERM, SIGUSR2 for preemption) sends the whole process
# group: Ray's processes started by the run inherit them blocked, and stop when the run stops them.
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGUSR2}


class _RayWorker:
    """What both actor collectors add for Ray: the run's observation statistics can be loaded
    between batches, and the actor tells its process id (logged by the run)."""

    env: Any

    def load_observation_statistics(self, statistics: dict[str, Any]) -> None:
        """Copy the run's statistics into this actor's frozen ``VecNormV2`` (in place)."""
        norm = find_norm(self.env)
        if norm is None:
            raise ValueError("load_observation_statistics: this actor's env normalizes nothing")
        with kept_linked(norm, copy_values=True):
            norm.load_state_dict(statistics)

    def pid(self) -> int:
        """This actor's process id."""
        return os.getpid()

    def __bool__(self) -> bool:
        """True: Ray tests an actor whose method raised for truth, which would call TorchRL's
        ``__len__`` (a float for an endless collector: the actor died of a TypeError instead
        of handing over the env's exception)."""
        return True


class RayLeanCollector(_RayWorker, LeanWorkerCollector):
    """:class:`~xdrl.training.workers.LeanWorkerCollector` as a Ray actor (TorchRL hands a
    collector that is not its ``Collector`` the env factory in a one-element list).

    Example:
        >>> RayWorkerCollector(..., collector_class=RayLeanCollector)
    """

    def __init__(self, create_env_fn: Any, **kwargs: Any) -> None:
        if isinstance(create_env_fn, list):
            (create_env_fn,) = create_env_fn
        torch.set_num_threads(1)
        super().__init__(create_env_fn, **kwargs)


class RayTorchRLCollector(_RayWorker, FaultReportingCollector):
    """TorchRL's ``Collector`` as a Ray actor (where the lean one does not fit), with
    :class:`~xdrl.training.workers.FaultReportingCollector`'s episode state.

    Example:
        >>> RayWorkerCollector(..., collector_class=RayTorchRLCollector)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        torch.set_num_threads(1)
        super().__init__(*args, **kwargs)


def ray_init_config(address: str | None, cores: int) -> dict[str, Any]:
    """``ray.init`` arguments: a local Ray with ``cores`` CPUs (``address`` None), else the
    cluster at ``address`` (``auto`` or ``host:port``). No dashboard, no log streaming."""
    config: dict[str, Any] = {
        "address": address,
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address is None:
        config |= {"num_cpus": cores, "object_store_memory": 256 * 1024**2}
    return config


class RayWorkerCollector(RayCollector):
    """TorchRL's ``RayCollector``, synchronous, with xdrl's additions (module docstring):
    weights and observation statistics before every batch, the actors' batches joined along the
    env dimension, a ``state_dict`` by worker that the resume loads back, failures named.

    Args:
        envs_per_worker: envs each actor steps (:meth:`set_seed` seeds them as the run's).
        observation_norm: the run's statistics (None: no normalization).
        Other arguments: ``RayCollector``'s (``sync`` is always true).

    Example:
        >>> collector = build_ray_collector(factory, policy, workers=2, address=None, ...)
        >>> next(iter(collector)).batch_size  # as collector=single's
        torch.Size([8, 32])
    """

    saves_episodes = True  # its state_dict holds the workers' envs and episodes (EnvState's)

    def __init__(
        self,
        *args: Any,
        envs_per_worker: int,
        observation_norm: RunObservationNorm | None = None,
        **kwargs: Any,
    ) -> None:
        self.envs_per_worker = envs_per_worker
        self.observation_norm = observation_norm
        self.resume_note: str | None = None
        _STARTED.add(self)
        try:
            super().__init__(*args, sync=True, **kwargs)
        except BaseException:  # an actor that failed to start: stop the others and Ray
            self.shutdown(raise_on_error=False)
            raise

    def iterator(self) -> Iterator[TensorDictBase]:
        """Weights (and statistics) out, one batch from every actor, joined: the
        ``[env.num_envs, steps]`` batch of ``collector=single``; a failed actor named."""
        while self.collected_frames < self.total_frames:
            self._push_weights()
            if self.observation_norm is not None:  # queued before the batch on each actor
                statistics = self.observation_norm.worker_statistics()
                self._call("load_observation_statistics", [(statistics,)] * self.num_workers)
            batch = cast(TensorDictBase, torch.cat(self._call("next"), 0))
            self.collected_frames += batch.numel()
            if self.observation_norm is not None:
                batch = self.observation_norm.merge(batch)
            yield batch.exclude(_TRAJ_IDS[0])

    def _push_weights(self) -> None:
        """TorchRL's weight push; where it fails because an actor died (its torch.distributed
        peer is gone), the dead actor is named instead (:class:`WorkerFailed`)."""
        try:
            self.update_policy_weights_()
        except Exception:
            self._call("pid")  # raises WorkerFailed for a dead actor
            raise

    def _call(self, method: str, args: list[tuple[Any, ...]] | None = None) -> list[Any]:
        """``method`` on every actor (``args[i]`` for actor ``i``), their results in order; the
        first actor to fail is named (:class:`WorkerFailed`)."""
        args = args or [()] * self.num_workers
        actors = self.remote_collectors
        refs = [getattr(a, method).remote(*a_args) for a, a_args in zip(actors, args, strict=True)]
        worker = {ref: i for i, ref in enumerate(refs)}
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            with self._failure_named(worker[ready[0]]):
                ray.get(ready[0])
        return ray.get(refs)

    @staticmethod
    @contextlib.contextmanager
    def _failure_named(worker: int) -> Iterator[None]:
        """Ray's error from actor ``worker`` becomes one :class:`WorkerFailed` line."""
        try:
            yield
        except ray.exceptions.RayTaskError as err:
            raise WorkerFailed(_failed_line(worker, err.cause or err)) from err
        except ray.exceptions.RayActorError as err:
            text = str(getattr(err, "error_msg", None) or err).strip().splitlines()
            why = text[0] if text else type(err).__name__
            raise WorkerFailed(f"collector worker {worker} died ({why})") from err

    def state_dict(self) -> OrderedDict:
        """Every actor's collector state as ``worker<i>`` (``collector=multiprocess``'s
        layout), and the run's statistics under ``env_state_dict``."""
        state = OrderedDict((f"worker{i}", s) for i, s in enumerate(self._call("state_dict")))
        if self.observation_norm is not None:
            state[ENV_STATE] = self.observation_norm.state_dict()
        return state

    def load_state_dict(self, state_dict: OrderedDict | list[OrderedDict]) -> None:
        """Load each worker's saved state into its actor (TorchRL's list, or by worker);
        :attr:`resume_note` then says what was not restored (None: an exact resume)."""
        if isinstance(state_dict, list):
            state_dict = OrderedDict((f"worker{i}", s) for i, s in enumerate(state_dict))
        state = OrderedDict(state_dict)
        statistics = state.pop(ENV_STATE, None)
        workers = [state[f"worker{i}"] for i in range(self.num_workers)]
        self._call("load_state_dict", [(w,) for w in workers])
        if self.observation_norm is not None and statistics is not None:
            self.observation_norm.load_state_dict(statistics)
        self.resume_note = resume_note(workers)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed actor ``i``'s envs from ``seed + i * envs per actor`` (as the run's own envs)."""
        n = self.envs_per_worker
        self._call("set_seed", [(seed + i * n, static_seed) for i in range(self.num_workers)])
        return seed + self.num_workers * n

    def worker_pids(self) -> list[int]:
        """The actors' process ids (logged: a test or an operator can check them)."""
        return [int(pid) for pid in self._call("pid")]

    def shutdown(
        self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True
    ) -> None:
        """Stop the actors and, where the run started Ray, Ray itself; safe to call twice."""
        threads = torch.get_num_threads()
        try:
            if hasattr(self, "_remote_collectors"):  # else no actor started
                super().shutdown(timeout=timeout)
        except Exception as err:  # noqa: BLE001 - a dead actor or node: Ray's own cleanup
            if raise_on_error:
                raise
            log.debug("Ray collector shutdown: %s", err)
        finally:
            lease = getattr(self, "_runtime_lease", None)
            if lease is not None:  # stops the local Ray this run started (idempotent)
                lease.release()
            torch.set_num_threads(threads)
            _STARTED.discard(self)


def _failed_line(worker: int | str, cause: BaseException) -> str:
    """``collector worker <i> failed: <Type>: <first line>`` (as a process worker's)."""
    text = str(cause).strip()
    if isinstance(cause, ray.exceptions.RayTaskError):  # its text is the whole remote trace
        text = ""
    line = f"{type(cause).__name__}: {text.splitlines()[0]}" if text else type(cause).__name__
    return f"collector worker {worker} failed: {line}"


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    """Block the stop signals while Ray starts its processes, which inherit the mask: a
    terminal's Ctrl-C or SLURM's SIGTERM to the process group leaves them to the run."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def build_ray_collector(
    env_factory: Callable[..., Any],
    policy: Any,
    *,
    workers: int,
    address: str | None,
    num_envs: int,
    seed: int,
    frames_per_batch: int,
    total_frames: int,
    init_random_frames: int,
    device: str,
    lean: bool = False,
    env_threads: int = 1,
    observation_norm: RunObservationNorm | None = None,
    state_primers: Any = None,
) -> RayWorkerCollector:
    """``workers`` Ray actors, each stepping ``num_envs / workers`` envs of ``env_factory``
    with ``policy``, on a local Ray with the cores this process may use (``address`` None; at
    least one per actor) or the cluster at ``address``; the other arguments are
    :func:`~xdrl.training.workers.build_worker_collector`'s."""
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
            in_worker=True,
        )
        for i in range(workers)
    ]
    inner = RayLeanCollector if lean else RayTorchRLCollector
    collector_kwargs = [
        {"create_env_kwargs": copy.copy(env_kwargs), "fault_dir": None} for _ in range(workers)
    ]
    threads = torch.get_num_threads()
    with _stop_signals_blocked():
        collector = RayWorkerCollector(
            env_fns,
            policy,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            init_random_frames=init_random_frames,
            device=device,
            exploration_type=ExplorationType.RANDOM,
            collector_class=inner,
            collector_kwargs=collector_kwargs,
            ray_init_config=ray_init_config(address, max(len(os.sched_getaffinity(0)), workers)),
            remote_configs={"num_cpus": 1},
            envs_per_worker=per_worker,
            observation_norm=observation_norm,
        )
    torch.set_num_threads(threads)
    where = "a local Ray" if address is None else f"the Ray cluster at {address}"
    log.info("Collector workers started: %d Ray actors x %d envs on %s, %s (pids %s)", workers,
             per_worker, where, inner.__name__,
             ", ".join(map(str, collector.worker_pids())))  # fmt: skip
    return collector
