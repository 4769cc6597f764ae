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

from xdrl.lean.collector import VectorEnv

from ._common import (
    CHOSEN_VALUE_KEY,
    DEFAULT_DONE_KEY,
    DEFAULT_EPISODE_REWARD_KEY,
    DEFAULT_REWARD_KEY,
    EPISODE_LEN_NAME,
    EPISODE_REWARD_NAME,
    EPISODES_ENDED_NAME,
    EVAL_PREFIX,
    REWARD_SUBKEY,
    START_Q_NAME,
    TERMINATED_KEY,
    VALUE_GAP_NAME,
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
        terminated: ``[n]`` whether each episode reached a terminal state (not cut by a time
            limit or by the rollout's ``max_steps``).
        discounted: ``[n]`` the discounted return ``sum_t gamma^t r_t`` (None: no ``gamma``).
        start_q: ``[n]`` the policy's ``chosen_action_value`` at the first step (None: the
            policy writes none, i.e. it is not value-based).
    """

    returns: torch.Tensor
    lengths: torch.Tensor
    objective_returns: torch.Tensor | None = None
    scalar_reward: bool = True
    terminated: torch.Tensor | None = None
    discounted: torch.Tensor | None = None
    start_q: torch.Tensor | None = None


class EvaluationInterrupted(Exception):
    """A stop was requested (SIGINT, SIGTERM, SLURM's USR2) while an evaluation rollout ran: it
    ended after ``steps`` env steps, and its partial episodes are no evaluation.

    Args:
        steps: the env steps the rollout had taken when it stopped.
    """

    def __init__(self, steps: int) -> None:
        super().__init__(f"evaluation interrupted after {steps} env steps")
        self.steps = steps


class StopCheck:
    """Raises :class:`EvaluationInterrupted` between env steps once ``stop_requested()`` says
    so: one call per step of every sub-env batch, a flag read when nothing was asked.

    Args:
        stop_requested: whether a stop was asked (e.g. the Trainer's stop flag).

    Example:
        >>> check = StopCheck(lambda: trainer_stop_flag)
        >>> check()  # after each env step; raises once the flag is set
    """

    def __init__(self, stop_requested: Callable[[], bool]) -> None:
        self.stop_requested = stop_requested
        self.steps = 0

    def __call__(self) -> None:
        self.steps += 1
        if self.stop_requested():
            raise EvaluationInterrupted(self.steps)

    def chained(
        self, callback: Callable[[Any, TensorDictBase], None] | None
    ) -> Callable[[Any, TensorDictBase], None]:
        """A TorchRL rollout callback: ``callback`` (e.g. a video's), then this check."""

        def step(env: Any, tensordict: TensorDictBase) -> None:
            if callback is not None:
                callback(env, tensordict)
            self()

        return step


def evaluation_rollout(
    env: Any,
    policy: Any,
    max_steps: int,
    *,
    deterministic: bool,
    after_reset: Callable[[], Callable[[Any, TensorDictBase], None] | None] | None = None,
    stop_requested: Callable[[], bool] | None = None,
) -> TensorDictBase:
    """Reset ``env`` and play one episode per sub-env (until all finished, or ``max_steps``)
    under ``torch.no_grad()`` with deterministic or random exploration.

    ``after_reset`` runs once the env is reset and may return a per-step rollout callback
    (e.g. :meth:`~xdrl.trainer_hooks.logging.video.FrameRecorder.start`). ``stop_requested``
    is read between env steps: once it returns True the rollout raises
    :class:`EvaluationInterrupted` (a long Atari evaluation stops within a step of a signal)."""
    exploration = ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM
    batched = len(env.batch_size) > 0
    check = StopCheck(stop_requested) if stop_requested is not None else None
    with torch.no_grad(), set_exploration_type(exploration):
        if stop_requested is not None and stop_requested():
            raise EvaluationInterrupted(0)
        tensordict = env.reset()
        callback = after_reset() if after_reset is not None else None
        kwargs: dict[str, Any] = {}
        if check is not None and isinstance(env, VectorEnv):
            kwargs["step_check"] = check  # its NumPy fast path checks between steps
        elif check is not None:
            callback = check.chained(callback)
        return env.rollout(
            max_steps,
            policy=policy,
            auto_reset=False,
            tensordict=tensordict,
            break_when_any_done=not batched,
            break_when_all_done=batched,
            callback=callback,
            **kwargs,
        )


def episodes(
    rollout: TensorDictBase,
    reward_key: tuple[str, ...] | None = None,
    gamma: float | None = None,
) -> Episodes:
    """Returns, lengths, per-objective returns and whether it terminated, of each sub-env's
    first episode; with ``gamma``, its discounted return and the start state's Q-value."""
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
    rows = torch.arange(n, device=last.device)
    episode_reward = rollout.get(DEFAULT_EPISODE_REWARD_KEY, None)
    if episode_reward is not None and episode_reward.shape[-1] > 1:
        objectives = episode_reward.reshape(n, steps, -1)[rows, last].double()
    terminated = rollout.get(TERMINATED_KEY, None)
    ended = ended if terminated is None else terminated.reshape(n, steps, -1).any(-1)[rows, last]
    discounted = start_q = None
    chosen = rollout.get(CHOSEN_VALUE_KEY, None)
    if gamma is not None and chosen is not None:
        powers = float(gamma) ** torch.arange(steps, dtype=torch.float64, device=last.device)
        discounted = (reward.double().sum(-1) * valid * powers).sum(1)
        start_q = chosen.reshape(n, steps, -1)[:, 0, 0].double()
    return Episodes(
        returns=returns.sum(-1),
        lengths=last + 1,
        objective_returns=objectives,
        scalar_reward=returns.shape[-1] == 1,
        terminated=ended,
        discounted=discounted,
        start_q=start_q,
    )


def unfinished_episodes(rollout: TensorDictBase) -> tuple[int, int]:
    """``(cut, n)``: how many of the rollout's ``n`` first episodes had not ended (terminated or
    truncated) when the rollout stopped at its ``max_steps``; their returns are partial."""
    steps = rollout.shape[-1]
    flat = rollout.reshape(-1, steps)
    n = flat.shape[0]
    done = flat.get(DEFAULT_DONE_KEY).reshape(n, steps, -1).any(-1).any(1)
    return int((~done).sum().item()), n


def rollout_metrics(
    rollout: TensorDictBase,
    subgroup: str,
    *,
    reward_key: tuple[str, ...] | None = None,
    reduce_stats: bool | None = None,
    value_gamma: float | None = None,
) -> dict[str, float]:
    """``eval/<subgroup>/`` metrics of an evaluation rollout: ``reward/episode_reward_*`` (a
    scalar reward), per-objective ``reward/objective_<i>/episode_reward_*`` (a vector reward or
    episode reward), ``episode_len_mean`` and ``episodes_ended`` (the fraction that reached a
    terminal state). A value-based policy evaluated with ``value_gamma`` (its discount) adds
    ``start_q_mean`` (its Q-value of the start state) and ``value_gap_mean`` (the discounted
    return minus that Q-value: near 0 when the values and the greedy policy agree)."""
    base = f"{EVAL_PREFIX}/{subgroup}"
    found = episodes(rollout, reward_key, value_gamma)
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
    if found.terminated is not None:
        out[f"{base}/{EPISODES_ENDED_NAME}"] = float(found.terminated.double().mean().item())
    if found.discounted is not None and found.start_q is not None:
        out[f"{base}/{START_Q_NAME}"] = float(found.start_q.mean().item())
        gap = (found.discounted - found.start_q).mean()
        out[f"{base}/{VALUE_GAP_NAME}"] = float(gap.item())
    return out
