"""ObservationNormStep: a ``VecNormV2``'s per-step work on plain tensors, for the lean collector.

Why it exists: with ``env.normalize_observations`` (the MuJoCo PPO presets) every env
:func:`xdrl.envs.factory.make_env` builds ends in TorchRL's ``VecNormV2``, which kept the run on
TorchRL's ``Collector``. A cProfile of ``hopper_ppo`` (4,096 frames, 1 env, 1 thread, a loaded
2-core machine) spent 56 of 64 s of training in collection, 18 s of it in ``VecNormV2._step``:
each step selects, updates and normalizes through a dozen TensorDict operations and a lock. The
statistics of one observation key are three tensors; this class updates and applies them with
the same torch operations in the same order (the same ``lerp_`` weights, the same bias
correction, the same ``eps``), on the transform's own tensors, so the transform's
``state_dict`` (checkpoints, ``xdrl.load_policy``, exports) and an evaluation env sharing them
see exactly what TorchRL's path would have written (tested bit for bit against ``VecNormV2``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torchrl.envs import VecNormV2

KEY = "observation"


def supported(transform: Any) -> bool:
    """Whether ``transform`` is a ``VecNormV2`` that :class:`ObservationNormStep` reproduces:
    stateful, on ``observation`` only (normalized in place), statistics pooled over the batch
    (``reduce_batch_dims``, as ``make_env`` builds it), a decay below 1, initialized."""
    return (
        isinstance(transform, VecNormV2)
        and transform.stateful
        and list(transform.in_keys) == [KEY]
        and list(transform.out_keys) == [KEY]
        and transform.reduce_batch_dims
        and transform.decay < 1.0
        and not transform._cast_int_to_float
        and transform._loc is not None
        and list(transform._loc.keys()) == [KEY]
    )


class ObservationNormStep:
    """Update a ``VecNormV2``'s statistics with a batch of observations and normalize it, as
    ``VecNormV2._step`` does for ``next`` and ``VecNormV2._reset`` for a reset (one update per
    call over the whole batch, then the normalization with the updated statistics).

    The statistics tensors are looked up on each call: ``VecNormV2.load_state_dict`` (a resume)
    and xdrl's sharing with evaluation envs replace them.

    Args:
        norm: the env's ``VecNormV2`` (see :func:`supported`); a frozen one is not updated.

    Example:
        >>> step = ObservationNormStep(env.transform[-1])
        >>> normalized = step(torch.from_numpy(raw_observation.astype(np.float32)))
    """

    def __init__(self, norm: VecNormV2) -> None:
        if not supported(norm):
            raise ValueError("ObservationNormStep needs make_env's VecNormV2 on 'observation'")
        self.norm = norm
        self._log_decay = math.log(norm.decay)

    def __call__(self, observation: torch.Tensor) -> torch.Tensor:
        """``observation`` ``[batch, *shape]`` normalized with the statistics updated by it."""
        norm = self.norm
        loc, var = norm._loc.get(KEY), norm._var.get(KEY)
        count = norm._count.get(KEY)
        if not norm.frozen:
            n = observation.shape[0]
            count += n
            weight = 1 - norm.decay**n
            mean2 = observation.pow(2).mean(dim=(0,))
            mean = observation.mean(dim=(0,))
            loc.lerp_(end=mean, weight=weight)
            var.lerp_(end=mean2, weight=weight)
        bias_correction = (1 - (count * self._log_decay).exp()).to(observation.dtype)
        centred_var = var - loc.pow(2)
        scale = (centred_var / bias_correction).sqrt().clamp_min(norm.eps)
        return (observation - loc / bias_correction) / scale
