"""Evaluation as plain functions: one rollout of a policy on its evaluation env, and the
``eval/<subgroup>/`` metrics of that rollout. The evaluation hook and ``xdrl-eval`` both call
them, so their numbers mean the same thing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ._common import (
    DEFAULT_DONE_KEY,
    DEFAULT_EPISODE_REWARD_KEY,
    DEFAULT_REWARD_KEY,
    EPISODE_LEN_NAME,
    EPISODE_REWARD_NAME,
    EVAL_PREFIX,
    REWARD_SUBKEY,
    _per_objective,
    _reduce,
)


@dataclass
class Episodes:
    """The first episode of each sub-env in an evaluation rollout.

    Args:
        returns: ``[n]`` sum of the (scalarized) reward over each episode.
        lengths: ``[n]`` steps of each episode (an unfinished one: the rollout's length).
        objective_returns: ``[n, k]`` per-objective returns of a vector reward (None: scalar).
        scalar_reward: whether the reward read was a scalar (else ``returns`` sums objectives).
    """

    returns: torch.Tensor
    lengths: torch.Tensor
    objective_returns: torch.Tensor | None = None
    scalar_reward: bool = True


def evaluation_rollout(
    env: Any,
    policy: Any,
    max_steps: int,
    *,
    deterministic: bool,
    after_reset: Callable[[], Callable[[Any, TensorDictBase], None] | None] | None = None,
) -> TensorDictBase:
    """Reset ``env`` and play one episode per sub-env (until all finished, or ``max_steps``)
    under ``torch.no_grad()`` with deterministic or random exploration.

    ``after_reset`` runs once the env is reset and may return a per-step rollout callback
    (e.g. :meth:`~xdrl.trainer_hooks.logging.video.FrameRecorder.start`)."""
    exploration = ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM
    batched = len(env.batch_size) > 0
    with torch.no_grad(), set_exploration_type(exploration):
        tensordict = env.reset()
        callback = after_reset() if after_reset is not None else None
        return env.rollout(
            max_steps,
            policy=policy,
            auto_reset=False,
            tensordict=tensordict,
            break_when_any_done=not batched,
            break_when_all_done=batched,
            callback=callback,
        )


def episodes(rollout: TensorDictBase, reward_key: tuple[str, ...] | None = None) -> Episodes:
    """Returns, lengths and per-objective returns of each sub-env's first episode."""
    steps = rollout.shape[-1]
    rollout = rollout.reshape(-1, steps)
    n = rollout.shape[0]
    done = rollout.get(DEFAULT_DONE_KEY).reshape(n, steps, -1).any(-1)
    ended = done.any(1)
    last = torch.where(ended, done.float().argmax(1), steps - 1)
    valid = torch.arange(steps, device=last.device).unsqueeze(0) <= last.unsqueeze(1)
    reward = rollout.get(reward_key or DEFAULT_REWARD_KEY).reshape(n, steps, -1)
    returns = (reward.double() * valid.unsqueeze(-1)).sum(1)
    objectives = returns if returns.shape[-1] > 1 else None
    episode_reward = rollout.get(DEFAULT_EPISODE_REWARD_KEY, None)
    if episode_reward is not None and episode_reward.shape[-1] > 1:
        rows = torch.arange(n, device=last.device)
        objectives = episode_reward.reshape(n, steps, -1)[rows, last].double()
    return Episodes(
        returns=returns.sum(-1),
        lengths=last + 1,
        objective_returns=objectives,
        scalar_reward=returns.shape[-1] == 1,
    )


def rollout_metrics(
    rollout: TensorDictBase,
    subgroup: str,
    *,
    reward_key: tuple[str, ...] | None = None,
    reduce_stats: bool | None = None,
) -> dict[str, float]:
    """``eval/<subgroup>/`` metrics of an evaluation rollout: ``reward/episode_reward_*`` (a
    scalar reward), per-objective ``reward/objective_<i>/episode_reward_*`` (a vector reward or
    episode reward) and ``episode_len_mean``."""
    base = f"{EVAL_PREFIX}/{subgroup}"
    found = episodes(rollout, reward_key)
    out: dict[str, float] = {}
    if found.scalar_reward:
        returns = found.returns.unsqueeze(-1)
        out.update(_reduce(f"{base}/{REWARD_SUBKEY}/{EPISODE_REWARD_NAME}", returns, reduce_stats))
    if found.objective_returns is not None:
        out.update(
            _per_objective(
                f"{base}/{REWARD_SUBKEY}",
                EPISODE_REWARD_NAME,
                found.objective_returns,
                reduce_stats,
            )
        )
    out[f"{base}/{EPISODE_LEN_NAME}"] = float(found.lengths.double().mean().item())
    return out
