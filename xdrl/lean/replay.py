"""LeanReplayBuffer: TorchRL's uniform ``TensorDictReplayBuffer`` with a tensor-level sample.

Why it exists: off-policy methods sample one minibatch per optimizer step. On the SAC Pendulum
workload (UTD 1, batches of 256) ``TensorDictReplayBuffer.sample`` took ~1 ms per step in
cProfile (1 thread): the locks, the sampler and storage dispatch, slicing the storage TensorDict
to its filled length, indexing it (a TensorDict per nested level, key by key) and writing the
``index`` entry back through ``set``. This subclass draws the indices exactly as TorchRL's
``RandomSampler`` does (``LazyTensorStorage._rand_given_ndim``: the same generator, the same
draws), gathers every stored tensor with one ``index_select`` and builds the batch TensorDict
once. It applies to the buffers xdrl builds (``LazyTensorStorage``, ``RandomSampler`` or
``SamplerWithoutReplacement``, no transforms, prefetch, pinning or slice units); any other buffer
samples through TorchRL. Tested against TorchRL's ``sample`` on the same seed: same keys, values,
dtypes and indices.

The same gather serves PPO's minibatches (``SamplerWithoutReplacement``, indices drawn by the
sampler itself, so its epoch state is TorchRL's): TensorDict's indexing of a uint8 frame stack
(``frames[index]``, advanced indexing) took 2.2 ms for 256 of 1,024 4x84x84 frames against 0.17
ms for ``index_select`` (2 threads, AMD EPYC), ~7 ms per Atari PPO minibatch in cProfile.

It also stores only the entries the loss reads (``keys``, the loss's ``in_keys``: observation,
action, next observation, reward and done flags) instead of all ~19 the collector writes (policy
outputs, step counts, episode returns, init flags): in a cProfile of the ``cartpole_dqn`` run
(batches of 64, 128 steps per batch) gathering the 19 took 0.7 s of its 9.5 s of optimizer steps.

Checkpoints hold the filled rows only (:class:`FilledTensorStorage`): TorchRL's
``LazyTensorStorage.state_dict`` saves the whole preallocated capacity, so a 1M-transition SAC
buffer 1% full was saved at 100x its content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, is_tensor_collection
from torchrl.data import (
    LazyTensorStorage,
    RandomSampler,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
    TensorDictRoundRobinWriter,
)


class FilledTensorStorage(LazyTensorStorage):
    """TorchRL's ``LazyTensorStorage`` whose ``state_dict`` holds only the rows written so far
    (``len(storage)`` of ``max_size``) and whose ``load_state_dict`` writes them back into a
    storage of full capacity, so that the buffer goes on filling and wraps where the saved one
    would have.

    Why: ``LazyTensorStorage`` preallocates its capacity on the first write and saves all of it;
    an off-policy checkpoint early in a run (a 100,000-transition buffer 8% full) was mostly
    unwritten rows. A full (wrapped) storage is saved as TorchRL saves it, and a checkpoint
    written by TorchRL's storage (full capacity) loads unchanged.

    Example:
        >>> buffer = LeanReplayBuffer(storage=FilledTensorStorage(100_000), batch_size=256)
    """

    def state_dict(self) -> dict[str, Any]:
        """TorchRL's state, with the stored data cut to the filled rows (a copy: a view would
        serialize its whole underlying tensor)."""
        filled = len(self)
        if not self.initialized or self.ndim != 1 or filled >= self.max_size:
            return super().state_dict()
        rows = self._storage[:filled].clone()
        return {
            "_storage": rows.state_dict() if is_tensor_collection(rows) else rows,
            "initialized": self.initialized,
            "_len": filled,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict` (filled rows, into a storage that holds
        nothing yet, as a resume builds it) or TorchRL's (full capacity)."""
        saved = state_dict["_storage"]
        rows = _rows(saved)
        if not rows or rows >= self.max_size or self.ndim != 1:
            super().load_state_dict(state_dict)
            return
        if len(self):
            raise RuntimeError(
                f"{type(self).__name__} loads its filled rows into an empty storage only; "
                f"this one holds {len(self)} rows"
            )
        data = saved
        if not isinstance(saved, torch.Tensor):  # TorchRL's own load reads it the same way
            data = TensorDict().load_state_dict(saved, strict=False)
        # allocates the full capacity (lazily, as the first extend does), copies and counts
        # the rows (``len(self)``: the saved ``_len``, which is the rows saved)
        self.set(torch.arange(rows), data)

    def loads(self, path: str | Path) -> None:
        """TorchRL's load of a saved storage (``ReplayBuffer.dumps``, as checkpoints save it),
        or, when the saved one is smaller than this one (``buffer_size: all`` resumed under a
        raised ``total_frames``), its filled rows copied into the first rows of this capacity:
        TorchRL's load refuses the shapes, and the run could not train on."""
        path = Path(path)
        metadata = json.loads((path / "storage_metadata.json").read_text())
        if metadata["is_pytree"] or self.initialized or self.ndim != 1:
            super().loads(path)
            return
        saved = TensorDict.load_memmap(path)
        if saved.shape[0] >= self.max_size:
            super().loads(path)
            return
        rows = int(metadata["len"])
        if rows:
            self.set(torch.arange(rows), saved[:rows].clone())


class GrowingRoundRobinWriter(TensorDictRoundRobinWriter):
    """TorchRL's round-robin writer that goes on writing after the filled rows of a storage
    larger than the one it was saved with (a ``buffer_size: all`` buffer loaded under a raised
    budget: the saved cursor wrapped to 0 at the old capacity, and would overwrite the oldest
    transitions while the new rows stayed empty). A storage not yet full has never wrapped,
    so its cursor is its length: for a buffer loaded at its own capacity nothing changes.

    Example:
        >>> LeanReplayBuffer(storage=FilledTensorStorage(2048), writer=GrowingRoundRobinWriter())
    """

    def loads(self, path: str | Path) -> None:
        """TorchRL's load; the cursor after the filled rows of a storage not yet full."""
        super().loads(path)
        storage = self._storage
        if len(storage) < storage.max_size:
            self._cursor = len(storage)


def _rows(saved: Any) -> int | None:
    """Rows (first dimension) of a saved storage: a tensor or a flat state dict of tensors;
    None for an empty one."""
    if isinstance(saved, torch.Tensor):
        return saved.shape[0]
    first = next((v for v in saved.values() if isinstance(v, torch.Tensor)), None)
    return None if first is None else first.shape[0]


class LeanReplayBuffer(TensorDictReplayBuffer):
    """``TensorDictReplayBuffer`` whose uniform ``sample()`` gathers tensors directly (same
    arguments; same batches, with the ``index`` entry).

    Args:
        keys: the entries to store (the loss's ``in_keys``); None stores every entry of the
            collected batches. Each stored entry costs one gather per sample and its memory.
        **kwargs: ``TensorDictReplayBuffer``'s.

    Example:
        >>> buffer = LeanReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256,
        ...                           keys=loss.in_keys)
    """

    def __init__(self, *, keys: Sequence[NestedKey] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keys = None if keys is None else list(keys)

    def extend(
        self, tensordicts: TensorDictBase, *, update_priority: bool | None = None
    ) -> torch.Tensor:
        """Store a flat batch of transitions (only :attr:`keys`, when given)."""
        if self.keys is not None:
            tensordicts = tensordicts.select(*self.keys)
        return super().extend(tensordicts, update_priority=update_priority)

    def sample(
        self,
        batch_size: int | None = None,
        return_info: bool = False,
        include_info: bool | None = None,
    ) -> Any:
        """A uniform minibatch of ``batch_size`` transitions (the buffer's own by default)."""
        size = batch_size if batch_size is not None else self._batch_size
        if return_info or include_info is not None or size is None or not self._lean():
            return super().sample(batch_size, return_info=return_info, include_info=include_info)
        storage: LazyTensorStorage = self._storage  # type: ignore[assignment]
        with self._replay_lock, self._write_lock:
            if type(self._sampler) is RandomSampler:
                index = storage._rand_given_ndim(size)
            else:
                index, _ = self._sampler.sample(storage, size)
            data = _gather(storage._storage, index)
        if data is None:  # a non-tensor entry: TorchRL indexes it (with the same indices)
            data = storage.get(index)
        data.set("index", index)
        return data

    def _lean(self) -> bool:
        """Whether the direct gather reproduces TorchRL's sample for this buffer's set-up."""
        storage = self._storage
        return (
            type(storage) in (LazyTensorStorage, FilledTensorStorage)
            and type(self._sampler) in (RandomSampler, SamplerWithoutReplacement)
            and storage.initialized
            and storage.ndim == 1
            and len(storage) > 0
            and isinstance(storage._storage, TensorDict)
            and not (self._transform is not None and len(self._transform))
            and not self._prefetch_cap
            and not self._pin_memory
            and self._sample_unit is None
            and not self._writer.tracks_generations
        )


def _gather(source: TensorDictBase, index: torch.Tensor) -> TensorDict | None:
    """Rows ``index`` of every tensor of ``source`` (nested levels kept), as a new TensorDict;
    None if an entry is neither a tensor nor a plain TensorDict."""
    out: dict[str, Any] = {}
    for key, value in source.items():
        if type(value) is TensorDict:
            nested = _gather(value, index)
            if nested is None:
                return None
            out[key] = nested
        elif type(value) in (torch.Tensor, torch.nn.Parameter):
            out[key] = value.index_select(0, index)
        else:
            return None
    return TensorDict._new_unsafe(out, batch_size=index.shape, device=source.device)
