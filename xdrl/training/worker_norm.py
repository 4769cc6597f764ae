"""Observation normalization with ``collector=multiprocess``: one set of statistics, the run's.

With ``env.normalize_observations: true`` every env :func:`xdrl.envs.factory.make_env` builds
carries a TorchRL ``VecNormV2``. With worker processes, each worker's would learn its own
statistics from its own envs, and a checkpoint would hold as many sets as workers. Instead:

- The run owns the statistics: the ``VecNormV2`` of its own training env (built in the run's
  process for the algorithm's shapes), its tensors moved to shared memory
  (:class:`RunObservationNorm`). They start from the training envs' first observations: the run
  resets its copy of the envs once, as the first reset of ``collector=single`` does (with
  ``env.batching=vector`` the workers' envs get the same seeds and start from the same ones).
- Each worker's ``VecNormV2`` holds those shared tensors, frozen (:func:`link_worker_norm`): it
  normalizes with the statistics as the run last merged them and never updates them. A copy of
  the raw observation (``raw_observation``, made before the ``VecNormV2`` overwrites it in place)
  travels back with the batch.
- After every batch the run merges the batch's raw ``("next", "observation")`` into its
  statistics, one ``VecNormV2`` update per time step over all envs in worker order (what the
  in-process env's ``VecNormV2`` does at each step), then drops the raw copies: the Trainer sees
  the batch keys of ``collector=single``. The synchronous workers are idle meanwhile (every batch
  waits for all of them), so their next batch reads the merged statistics and two runs with the
  same seed get bit-equal statistics.
- A checkpoint saves the run's statistics as ``collector=single`` saves them (the collector's
  ``env_state_dict``, which ``xdrl-eval`` and ``xdrl-export`` read); a resume copies them into the
  shared tensors in place, and each worker points its ``VecNormV2`` back at those after loading
  its own state (``VecNormV2.load_state_dict`` adopts the loaded tensors, which would cut the link).
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import RenameTransform, TransformedEnv, VecNormV2

RAW_OBSERVATION = "raw_observation"  # not "_"-prefixed: TorchRL's collectors drop private keys
_OBSERVATION = "observation"
_EXTRA = "_extra_state"


def find_norm(env: Any) -> VecNormV2 | None:
    """The ``VecNormV2`` among ``env``'s transforms, or None."""
    if not isinstance(env, TransformedEnv):
        return None
    return next((t for t in env.transform if isinstance(t, VecNormV2)), None)


@contextlib.contextmanager
def kept_linked(norm: VecNormV2, *, copy_values: bool) -> Iterator[None]:
    """Keep ``norm`` on the statistics tensors it holds across a state load in the block:
    ``VecNormV2.load_state_dict`` adopts the loaded tensors instead. ``copy_values``: the loaded
    values are copied into the kept tensors first (the run's load); else they are dropped (a
    worker's: the run loads the values)."""
    live = norm.state_dict()  # the tensors themselves, not copies
    yield
    if copy_values:
        loaded = norm.state_dict()[_EXTRA]
        for key, tensor in live[_EXTRA].items():
            tensor.copy_(loaded[key])
    norm.load_state_dict(live)


def link_worker_norm(env: TransformedEnv, statistics: dict[str, Any]) -> None:
    """In a worker: copy the raw observation to ``raw_observation`` before ``env``'s
    ``VecNormV2``, make it hold the run's shared ``statistics`` (a ``VecNormV2`` state dict) and
    freeze it."""
    norm = find_norm(env)
    if norm is None:
        raise ValueError("link_worker_norm: the env normalizes no observations")
    index = list(env.transform).index(norm)
    copy_raw = RenameTransform([_OBSERVATION], [RAW_OBSERVATION], create_copy=True)
    env.transform.insert(index, copy_raw)
    norm.load_state_dict(statistics)  # adopts the tensors: shared with the run
    norm.freeze()


def relinked(env: Any) -> contextlib.AbstractContextManager[None]:
    """Around a worker's state load: its ``VecNormV2`` stays on the run's shared statistics."""
    norm = find_norm(env)
    if norm is None or not norm.frozen:
        return contextlib.nullcontext()
    return kept_linked(norm, copy_values=False)


class RunObservationNorm:
    """The run's observation statistics with worker processes: the ``VecNormV2`` of the run's
    own training env, in shared memory, updated from the raw observations of every batch.

    Args:
        train_env: the run's training env (a :func:`xdrl.envs.factory.make_env` env with
            ``normalize_observations``); reset once here when its statistics are empty.

    Example:
        >>> norm = RunObservationNorm(train_env)
        >>> build_worker_collector(..., observation_norm=norm)  # workers normalize with it
        >>> batch = norm.merge(batch)  # the statistics now include the batch; raw copies gone
    """

    def __init__(self, train_env: TransformedEnv) -> None:
        norm = find_norm(train_env)
        if norm is None:
            raise ValueError("RunObservationNorm: the training env normalizes no observations")
        self.train_env, self.norm = train_env, norm
        if int(norm._count[_OBSERVATION]) == 0:  # the first observations, as collector=single
            train_env.reset()
        for stats in (norm._loc, norm._var, norm._count):
            stats.share_memory_()  # in place: the env's VecNormV2 keeps these tensors

    def worker_statistics(self) -> dict[str, Any]:
        """What each worker's ``VecNormV2`` loads (:func:`link_worker_norm`): the shared
        tensors, which reach a spawned worker as shared memory through ``create_env_kwargs``."""
        return self.norm.state_dict()

    def merge(self, batch: TensorDictBase) -> TensorDictBase:
        """Update the statistics with ``batch``'s raw next observations, one ``VecNormV2``
        update per time step over all envs; ``batch`` without the raw copies."""
        raw = batch.get(("next", RAW_OBSERVATION))
        for step in range(raw.shape[1]):
            data = TensorDict({_OBSERVATION: raw[:, step]}, batch_size=raw.shape[:1])
            self.norm._stateful_update(data)
        return batch.exclude(RAW_OBSERVATION, ("next", RAW_OBSERVATION))

    def state_dict(self) -> OrderedDict:
        """The training env's transform state, as ``collector=single``'s collector saves it
        under ``env_state_dict`` (a copy: the live tensors keep changing)."""
        return copy.deepcopy(self.train_env.transform.state_dict())

    def load_state_dict(self, state: OrderedDict) -> None:
        """Load saved statistics into the shared tensors in place (the workers keep reading
        them)."""
        with warnings.catch_warnings(), kept_linked(self.norm, copy_values=True):
            warnings.filterwarnings("ignore", message="VecNorm wasn't initialized")
            self.train_env.transform.load_state_dict(state)

    @property
    def count(self) -> int:
        """Observations the statistics have seen."""
        return int(self.norm._count[_OBSERVATION])

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loc, var)``: the running means of the observation and of its square (copies)."""
        return self.norm._loc[_OBSERVATION].clone(), self.norm._var[_OBSERVATION].clone()
