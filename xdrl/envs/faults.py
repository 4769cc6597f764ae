"""EnvFault: an env that raised or returned NaN/inf, said in one line naming the env, the
sub-env, the step and what went wrong, so a run's record blames the env, not the networks."""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np

from xdrl.config.errors import RunError, first_line


class EnvFault(RunError):
    """The env failed or returned a non-finite value: ``xdrl-train: error: <line>``, exit 1, and
    ``EnvFault: <line>`` as the ``error`` of ``summary.json`` (a ``RunError``: no traceback).

    Example:
        >>> raise EnvFault.raised("MyEnv-v0", 0, 7, RuntimeError("lost contact"))
    """

    @classmethod
    def raised(cls, env_id: str, index: int | None, step: int, err: BaseException) -> EnvFault:
        """The env's ``step`` (``step=0``: ``reset``) raised ``err``: worded as a failed collector
        worker's line (``collector worker <i> failed: <Type>: <message>``); ``index``: the
        sub-env, None where unknown (one of a ``SerialEnv``'s)."""
        what = f"step {step} of its episode" if step else "reset"
        return cls(
            f"env {env_id}{_which(index)} failed at {what}: {type(err).__name__}: {first_line(err)}"
        )

    @classmethod
    def non_finite(
        cls, env_id: str, index: int | None, step: int, key: str, values: Any
    ) -> EnvFault:
        """The env returned ``values`` holding NaN or inf in its ``key`` (observation or reward)
        at ``step`` of sub-env ``index``'s episode (0: its reset)."""
        kind = "NaN" if np.isnan(values).any() else "inf"
        what = f"step {step} of its episode" if step else "reset"
        return cls(
            f"env {env_id}{_which(index)} returned {kind} in its {key} at {what}, before the "
            "networks saw it (the env's output, not a diverged network); fix the env or wrap it "
            "to return finite values"
        )


def from_env(err: BaseException) -> bool:
    """Whether an exception raised during an env's ``step``/``reset`` is the env's: not one of
    xdrl's own (a signal handler's stop, e.g. ``xdrl-eval``'s, raised wherever the signal lands),
    which must pass through unchanged."""
    return not type(err).__module__.startswith("xdrl.")


def _which(index: int | None) -> str:
    """`` (sub-env i)``, or nothing for an unknown sub-env."""
    return "" if index is None else f" (sub-env {index})"


class GuardedEnv(gymnasium.Wrapper):
    """A gymnasium env whose exceptions and NaN/inf outputs (a float observation, the reward)
    become :class:`EnvFault` lines: what :class:`~xdrl.envs.vector_env.VectorGymEnv` checks
    itself, for the ``SerialEnv``/``ParallelEnv`` of ``GymEnv`` (``env.batching: serial`` or
    ``parallel``). A few us per step, against the ~0.5 ms of a TorchRL ``GymEnv`` step.

    Args:
        env: the gymnasium env.
        env_id: its id, for the line.

    Example:
        >>> env = GuardedEnv(gymnasium.make("CartPole-v1"), "CartPole-v1")
    """

    def __init__(self, env: gymnasium.Env, env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        self.steps = 0  # of the current episode

    def reset(self, **kwargs: Any) -> Any:
        self.steps = 0
        try:
            observation, info = self.env.reset(**kwargs)
        except Exception as err:  # noqa: BLE001 - any env error, named in one line
            if not from_env(err):
                raise
            raise EnvFault.raised(self.env_id, None, 0, err) from err
        self._check(observation, 0.0)
        return observation, info

    def step(self, action: Any) -> Any:
        self.steps += 1
        try:
            out = self.env.step(action)
        except Exception as err:  # noqa: BLE001 - any env error, named in one line
            if not from_env(err):
                raise
            raise EnvFault.raised(self.env_id, None, self.steps, err) from err
        self._check(out[0], out[1])
        return out

    def _check(self, observation: Any, reward: Any) -> None:
        """Raise :class:`EnvFault` when the observation (a float array) or reward is not
        finite."""
        if not np.isfinite(reward).all():
            raise EnvFault.non_finite(self.env_id, None, self.steps, "reward", reward)
        if isinstance(observation, np.ndarray) and np.issubdtype(observation.dtype, np.floating):
            if not np.isfinite(observation).all():
                raise EnvFault.non_finite(self.env_id, None, self.steps, "observation", observation)


def first_non_finite(
    observation: np.ndarray | None, reward: np.ndarray | None
) -> tuple[int, str, np.ndarray] | None:
    """``(row, key, values)`` of the first row of a batch (``[N, ...]`` arrays) whose observation
    (checked first) or reward holds NaN or inf; None when every value is finite."""
    for key, array in (("observation", observation), ("reward", reward)):
        if array is None or not np.issubdtype(array.dtype, np.floating):
            continue
        bad = ~np.isfinite(array.reshape(len(array), -1)).all(-1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            return row, key, array[row]
    return None


def check_batch(
    env_id: str, observation: np.ndarray, reward: np.ndarray, step_count: np.ndarray
) -> None:
    """Raise :class:`EnvFault` for the earliest step of a collected batch (``[N, T, ...]``
    arrays: each step's next observation and raw reward, and ``step_count``, the episode's
    steps before it) whose observation or reward holds NaN or inf; one sum per array decides,
    so a finite batch costs a few us however long it is."""
    floating = np.issubdtype(observation.dtype, np.floating)
    total = reward.sum() + (observation.sum() if floating else 0.0)
    if math.isfinite(total):
        return
    n, length = reward.shape[:2]
    bad_reward = ~np.isfinite(reward.reshape(n, length, -1)).all(-1)
    bad_obs = np.zeros_like(bad_reward)
    if floating:
        bad_obs = ~np.isfinite(observation.reshape(n, length, -1)).all(-1)
    bad = bad_obs | bad_reward
    if not bad.any():
        return  # finite values whose sum overflowed
    t = int(np.flatnonzero(bad.any(0))[0])
    i = int(np.flatnonzero(bad[:, t])[0])
    key, values = ("observation", observation) if bad_obs[i, t] else ("reward", reward)
    raise EnvFault.non_finite(
        env_id, i, int(step_count[i, t].reshape(-1)[0]) + 1, key, values[i, t]
    )
