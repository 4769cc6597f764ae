"""Metric key constants and tensor reductions shared by the xdrl logging hooks.

Every helper reduces a whole batch with a handful of tensor ops and converts the result to
Python numbers with one ``tolist()`` call, so a hook never loops over steps in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

# Metric namespaces: dashboards depend on these names, change them only on purpose.
COLLECTION_PREFIX = "collection"
TRAIN_PREFIX = "train"
COUNTERS_PREFIX = "counters"
TIMERS_PREFIX = "timers"
EVAL_PREFIX = "eval"

REWARD_SUBKEY = "reward"
EPISODE_REWARD_NAME = "episode_reward"
STEP_REWARD_NAME = "reward"
EPISODE_LEN_NAME = "episode_len_mean"
OBJECTIVE_NAME = "objective"
VIDEO_NAME = "video"
EPISODES_ENDED_NAME = "episodes_ended"  # fraction of evaluation episodes that terminated
START_Q_NAME = "start_q_mean"  # the Q-value of the start state (value-based agents)
VALUE_GAP_NAME = "value_gap_mean"  # discounted scalarized return minus that Q-value

# TensorDict keys written by TorchRL (RewardSum, StepCounter, the collector).
DEFAULT_REWARD_KEY: tuple[str, ...] = ("next", "reward")
DEFAULT_DONE_KEY: tuple[str, ...] = ("next", "done")
TERMINATED_KEY: tuple[str, ...] = ("next", "terminated")
CHOSEN_VALUE_KEY = "chosen_action_value"  # written by TorchRL's QValueActor
DEFAULT_EPISODE_REWARD_KEY: tuple[str, ...] = ("next", "episode_reward")
STEP_COUNT_KEY: tuple[str, ...] = ("next", "step_count")
COLLECTOR_MASK_KEY: tuple[str, ...] = ("collector", "mask")


def _as_float(value: torch.Tensor) -> float:
    """A one-element tensor (or a Python number) as a Python float."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().item())
    return float(value)


def _min_mean_max(prefix: str, value: torch.Tensor) -> dict[str, float]:
    """``{prefix_min, prefix_mean, prefix_max}`` of all elements; ``{}`` when empty."""
    value = value.detach()
    if value.numel() == 0:
        return {}
    value = value.double()
    low, mean, high = torch.stack([value.min(), value.mean(), value.max()]).tolist()
    return {f"{prefix}_min": low, f"{prefix}_mean": mean, f"{prefix}_max": high}


def _mean_only(prefix: str, value: torch.Tensor) -> dict[str, float]:
    """``{prefix_mean}`` of all elements; ``{}`` when empty."""
    value = value.detach()
    if value.numel() == 0:
        return {}
    return {f"{prefix}_mean": float(value.double().mean().item())}


def _summarize_metric(
    prefix: str, value: torch.Tensor, *, reduce_stats: bool | None = None
) -> dict[str, float]:
    """One element: ``{prefix: v}``; more: min/mean/max (``reduce_stats`` False: mean only)."""
    if not isinstance(value, torch.Tensor):
        return {prefix: float(value)}
    if value.numel() == 1:
        return {prefix: _as_float(value)}
    return _reduce(prefix, value, reduce_stats)


def _reduce(prefix: str, value: torch.Tensor, reduce_stats: bool | None) -> dict[str, float]:
    """min/mean/max keys, or only the mean key when ``reduce_stats`` is False."""
    if reduce_stats is False:
        return _mean_only(prefix, value)
    return _min_mean_max(prefix, value)


def _per_objective(
    base: str, name: str, value: torch.Tensor, reduce_stats: bool | None
) -> dict[str, float]:
    """Stats of each column of ``value`` [n, k] as ``{base}/objective_<i>/{name}_{stat}``."""
    value = value.detach()
    if value.numel() == 0:
        return {}
    value = value.double().reshape(value.shape[0], -1)
    names: tuple[str, ...] = ("mean",)
    stats = value.mean(0).unsqueeze(0)
    if reduce_stats is not False:
        names = ("min", "mean", "max")
        stats = torch.stack([value.amin(0), value.mean(0), value.amax(0)])
    out: dict[str, float] = {}
    for stat, row in zip(names, stats.tolist(), strict=True):
        for index, number in enumerate(row):
            out[f"{base}/{OBJECTIVE_NAME}_{index}/{name}_{stat}"] = number
    return out


def _collector_mask(batch: TensorDictBase) -> torch.Tensor | None:
    """The collector's valid-step mask (``("collector", "mask")``), or None when absent."""
    return batch.get(COLLECTOR_MASK_KEY, None)


def _flatten_steps(
    batch: TensorDictBase, key: NestedKey, mask: torch.Tensor | None
) -> torch.Tensor | None:
    """``batch[key]`` as [valid_steps, *feature_shape], masked-out steps dropped; None if absent."""
    value = batch.get(key, None)
    if value is None:
        return None
    if mask is not None:
        return value[mask]
    return value.reshape(-1, *value.shape[batch.batch_dims :])


def _scalarize_last_dim(value: torch.Tensor, weights: Sequence[float] | None) -> torch.Tensor:
    """Weighted sum over the last dim; ``value`` unchanged when ``weights`` is None."""
    if weights is None:
        return value
    if value.ndim == 0:
        value = value.reshape(1)
    dtype = value.dtype if value.is_floating_point() else torch.get_default_dtype()
    weight = torch.as_tensor(weights, dtype=dtype, device=value.device).reshape(-1)
    if weight.numel() != value.shape[-1]:
        raise ValueError(
            f"got {weight.numel()} reward weights for a reward whose last dimension has "
            f"{value.shape[-1]} entries; pass one weight per objective"
        )
    return (value.to(dtype) * weight).sum(-1)


def _prepare_episode_reward(
    value: torch.Tensor, done: torch.Tensor, *, weights: Sequence[float] | None
) -> torch.Tensor:
    """Returns of the episodes ending where ``done`` is set: [n_ended], or [n_ended, k] unweighted.

    ``value`` is a cumulative episode reward (TorchRL ``RewardSum``'s ``episode_reward``) of
    shape [..., k] or [...]; ``done`` has shape [..., 1] or [...].
    """
    done = done.bool()
    if done.ndim == value.ndim and done.shape != value.shape and done.shape[-1] == 1:
        done = done.squeeze(-1)
    ended = value.detach()[done]
    if ended.ndim == 1:
        ended = ended.unsqueeze(-1)
    if weights is not None:
        return _scalarize_last_dim(ended, weights)
    if ended.shape[-1] == 1:
        return ended.squeeze(-1)
    return ended


def _reward_metrics(
    base: str,
    name: str,
    value: torch.Tensor,
    *,
    weights: Sequence[float] | None,
    reduce_stats: bool | None,
) -> dict[str, float]:
    """Keys for rewards ``value`` [n, k]: scalar stats, plus per-objective stats when k > 1.

    k == 1 (already scalar, ``weights`` ignored): ``{base}/{name}_*``. k > 1 with weights: the
    scalarized ``{base}/{name}_*`` and every objective as ``{base}/objective_<i>/{name}_*``;
    without weights: only the objectives.
    """
    if value.numel() == 0:
        return {}
    if value.ndim == 1:
        value = value.unsqueeze(-1)
    if value.shape[-1] == 1:
        return _reduce(f"{base}/{name}", value, reduce_stats)
    out: dict[str, float] = {}
    if weights is not None:
        out.update(_reduce(f"{base}/{name}", _scalarize_last_dim(value, weights), reduce_stats))
    if value.shape[-1] > 1:
        out.update(_per_objective(base, name, value, reduce_stats))
    return out


def _key_name(key: NestedKey) -> str:
    """A nested TensorDict key joined with '/'."""
    return key if isinstance(key, str) else "/".join(key)
