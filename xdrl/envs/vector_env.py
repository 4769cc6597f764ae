"""VectorGymEnv: N gymnasium envs stepped in one process as one batched TorchRL env.

Why it exists: on this project's 2-core machines a TorchRL ``SerialEnv`` of 8 ``GymEnv`` spent
about 0.85 ms per sub-env step (``gym_like._step``: action spec conversion, per-env TensorDict
construction, ``read_obs``/``read_reward``/``read_done``, then a copy into the batch buffer)
against about 10 us for the raw gymnasium step, so collection was ~60% of a CartPole PPO run.
This env keeps TorchRL's contract (specs, ``_reset`` masks, ``_step`` masks, seeding) but does
the per-env work with plain numpy: one Python loop over ``env.step``, then one TensorDict of
batch size ``[N]`` per batched step. ``make_env(..., batching="vector")`` wraps it in the same
transforms as the ``SerialEnv`` path, and both give the same episodes for the same seeds.

It is not gymnasium's ``SyncVectorEnv``: it calls ``gymnasium.make`` once per sub-env and steps
them in its own loop, leaving resets to TorchRL (partial, per sub-env). Against TorchRL's own
batched path for gymnasium vector envs, ``GymWrapper`` around
``SyncVectorEnv(autoreset_mode=SAME_STEP)``, collecting 256 CartPole frames (8 envs, the PPO
actor, ``StepCounter``/``RewardSum``/``InitTracker``, TorchRL's ``Collector``) took 25 ms with
this env and 33 ms with that one, in the same run on this project's 2-core machine (November 23):
about a quarter less. Both are far above the 3-4 ms of a lean loop; the per-step TensorDict work
that remains is what ``xdrl.lean.collector.VectorCollector`` removes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase
from torchrl.envs.libs.gym import _gym_to_torchrl_spec_transform

from xdrl.envs.faults import EnvFault, first_non_finite, from_env
from xdrl.envs.observation_encoding import encode

# Spaces whose samples are one array, so a batch is one stacked array.
_ARRAY_SPACES = (
    gymnasium.spaces.Box,
    gymnasium.spaces.Discrete,
    gymnasium.spaces.MultiDiscrete,
    gymnasium.spaces.MultiBinary,
)


def supports(env: gymnasium.Env) -> bool:
    """Whether ``env``'s observation and action spaces are single arrays (no Dict/Tuple)."""
    return isinstance(env.observation_space, _ARRAY_SPACES) and isinstance(
        env.action_space, _ARRAY_SPACES
    )


class UnsupportedSpaceError(TypeError):
    """The env has Dict/Tuple (or other non-array) observation or action spaces."""


class VectorGymEnv(EnvBase):
    """``num_envs`` gymnasium (or MO-Gymnasium) envs as one TorchRL env of batch size ``[N]``.

    Specs match ``GymEnv(env_id, categorical_action_encoding=True)`` expanded to ``[N]``:
    ``observation`` (from the observation space), ``action`` (``Categorical`` for ``Discrete``,
    bounded for ``Box``), an unbounded float32 ``reward`` of shape ``[N, 1]`` (``[N, k]`` for an
    MO-Gymnasium reward space) and ``done``/``terminated``/``truncated`` of shape ``[N, 1]``.
    Partial resets follow the ``_reset`` mask, partial steps the ``_step`` mask (unstepped envs
    keep their last observation and done flags, reward 0). ``set_seed(s)`` resets sub-env ``i``
    with seed ``s + i``, as ``GymEnv.set_seed`` does for one env. Sub-envs are not auto-reset:
    TorchRL resets them (``step_and_maybe_reset``). ``_envs`` holds the gymnasium envs and
    ``_env`` the first one, which evaluation videos render. A sub-env whose ``step`` or
    ``reset`` raises, or that returns NaN or inf in its float observation or its reward, stops
    the run with one :class:`~xdrl.envs.faults.EnvFault` line naming the sub-env, the step of
    its episode and the key (one sum of the outputs per batched step, or per collected batch in
    :class:`~xdrl.lean.collector.VectorCollector`).

    Args:
        env_id: registered gymnasium or MO-Gymnasium id.
        num_envs: sub-envs stepped together.
        make_kwargs: keyword arguments for every ``gymnasium.make`` call (``max_episode_steps``,
            ``render_mode``, ...).
        frame_skip: repeat each action this many times (rewards summed, stops at episode end).
        device: device of the output tensors.
        observation_encoding: ``none`` or ``one_hot`` (each sub-env wrapped in
            :class:`~xdrl.envs.observation_encoding.OneHotObservation`).
        wrap: applied to every env after ``gymnasium.make`` (e.g. Atari's preprocessing).

    Example:
        >>> env = VectorGymEnv("CartPole-v1", num_envs=8)
        >>> env.set_seed(0)
        >>> env.rollout(10).batch_size
        torch.Size([8, 10])
    """

    # ``_step_one`` repeats the action ``frame_skip`` times and stops at the episode's end. Without
    # this flag TorchRL's env metaclass sees ``frame_skip > 1`` and wraps the env in a second
    # ``FrameSkipTransform``: 4 frames per agent step at ``frame_skip=2``, stepping past
    # ``terminated`` (gymnasium warned in every evaluation).
    _has_frame_skip = True

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        *,
        make_kwargs: dict[str, Any] | None = None,
        frame_skip: int = 1,
        device: str | torch.device = "cpu",
        observation_encoding: str = "none",
        wrap: Callable[[gymnasium.Env], gymnasium.Env] | None = None,
    ) -> None:
        if env_id not in gymnasium.envs.registry:
            import mo_gymnasium  # noqa: F401  (registers the MO-Gymnasium ids)
        kwargs = dict(make_kwargs or {})
        if str(gymnasium.envs.registry[env_id].entry_point).startswith("mo_gymnasium"):
            # gymnasium's passive checker warns that a vector reward is not a float on every
            # run; MO-Gymnasium's envs return one by design.
            kwargs.setdefault("disable_env_checker", True)
        envs = [gymnasium.make(env_id, **kwargs) for _ in range(num_envs)]
        if wrap is not None:
            envs = [wrap(env) for env in envs]
        envs = [encode(env, observation_encoding) for env in envs]
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        # EnvBase starts "closed" unless a subclass says otherwise (GymLikeEnv does): without this
        # the run's close() and the collector's shutdown skipped the sub-envs, whose close() never
        # ran (a user env holding a simulator or a file kept it to the end of the process).
        self.is_closed = False
        self.env_id = env_id
        self.frame_skip = int(frame_skip)
        self._envs: list[gymnasium.Env] = envs
        self._env = envs[0]
        self._make_specs(envs[0])
        n = num_envs
        obs_spec = self.observation_spec["observation"]
        self._obs_dtype = _numpy_dtype(obs_spec.dtype)
        self._obs = np.zeros((n, *obs_spec.shape[1:]), dtype=self._obs_dtype)
        self._reward_shape = (n, *self.reward_spec.shape[1:])
        self._reward_dtype = _numpy_dtype(self.reward_spec.dtype)
        self._terminated = np.zeros((n, 1), dtype=bool)
        self._truncated = np.zeros((n, 1), dtype=bool)
        self._float_obs = bool(np.issubdtype(self._obs_dtype, np.floating))
        self._episode_steps = np.zeros(n, dtype=np.int64)  # named by an EnvFault
        self._pool: ThreadPoolExecutor | None = None  # set_step_threads

    # Specs
    def _make_specs(self, env: gymnasium.Env) -> None:
        if not supports(env):
            for env_ in self._envs:
                env_.close()
            raise UnsupportedSpaceError(
                f"{self.__class__.__name__} needs array observation and action spaces, got "
                f"{env.observation_space} / {env.action_space}; use a SerialEnv of GymEnv"
            )
        n = self.batch_size[0]
        device = self.device

        def convert(space) -> Any:
            spec = _gym_to_torchrl_spec_transform(
                space, device=device, categorical_action_encoding=True
            )
            return spec.expand(n, *spec.shape)

        self.observation_spec = Composite(observation=convert(env.observation_space), shape=(n,))
        self.action_spec = convert(env.action_space)
        # Unbounded, also for an MO-Gymnasium reward space: RewardSum copies the reward's bounds
        # onto the episode return, which then fails check_env_specs (MOGymEnv's Bounded does).
        reward_space = getattr(env.unwrapped, "reward_space", None)
        reward_shape = (n, *reward_space.shape) if reward_space is not None else (n, 1)
        self.reward_spec = Unbounded(shape=reward_shape, device=device, dtype=torch.float32)
        flag = Categorical(2, dtype=torch.bool, device=device, shape=(n, 1))
        self.done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(n,)
        )

    # Stepping
    def step_numpy(
        self, action: np.ndarray, indices: Sequence[int] | None = None, *, check: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step the sub-envs ``indices`` (all: None) with ``action[i]``, in NumPy.

        Returns new arrays ``(observation, reward, terminated, truncated)`` for all N sub-envs
        (unstepped ones keep their observation and flags, reward 0); used by ``_step`` and by
        :class:`~xdrl.lean.collector.VectorCollector`, which skips the TensorDict per step.
        ``check``: refuse NaN or inf in the outputs here (``False``: the caller checks them, as
        the collector does once per batch with :func:`~xdrl.envs.faults.check_batch`).
        """
        obs = self._obs.copy()
        reward = np.zeros(self._reward_shape, dtype=self._reward_dtype)
        terminated = self._terminated.copy()
        truncated = self._truncated.copy()
        stepped = range(len(self._envs)) if indices is None else indices
        if self._pool is not None and len(stepped) > 1:
            results = self._pool.map(self._step_one, stepped, [action[i] for i in stepped])
        else:
            results = (self._step_one(i, action[i]) for i in stepped)
        for i, (ob, total, term, trunc) in zip(stepped, results, strict=True):
            obs[i] = ob
            reward[i] = total
            terminated[i, 0] = term
            truncated[i, 0] = trunc
        if indices is None:
            self._episode_steps += 1
        else:
            self._episode_steps[list(indices)] += 1
        if check:
            self._check_finite(obs, reward)
        self._obs, self._terminated, self._truncated = obs, terminated, truncated
        return obs, reward, terminated, truncated

    def _check_finite(self, obs: np.ndarray, reward: np.ndarray | None) -> None:
        """Raise :class:`~xdrl.envs.faults.EnvFault` for the first sub-env whose observation (a
        float one) or reward holds NaN or inf. One sum of each array decides (a few us per
        batched step); only a non-finite sum (NaN, inf, or finite values that overflowed) looks
        row by row."""
        total = 0.0 if reward is None else reward.sum()
        if self._float_obs:
            total = total + obs.sum()
        if math.isfinite(total):
            return
        found = first_non_finite(obs if self._float_obs else None, reward)
        if found is not None:
            row, key, values = found
            steps = int(self._episode_steps[row])
            raise EnvFault.non_finite(self.env_id, row, steps, key, values)

    def _reset_one(self, i: int, seed: int | None, **kwargs: Any) -> Any:
        """Sub-env ``i``'s reset observation (its episode's step counter back to 0); an exception
        becomes one :class:`~xdrl.envs.faults.EnvFault` line."""
        self._episode_steps[i] = 0
        try:
            ob, _info = self._envs[i].reset(seed=seed, **kwargs)
        except Exception as err:  # noqa: BLE001 - any env error, named in one line
            if not from_env(err):
                raise
            raise EnvFault.raised(self.env_id, i, 0, err) from err
        return ob

    def _step_one(self, i: int, act: Any) -> tuple[Any, Any, bool, bool]:
        """Sub-env ``i``'s step over ``frame_skip`` frames: observation, summed reward, flags."""
        env = self._envs[i]
        total: Any = 0.0  # a float, or an array for MO-Gymnasium's vector rewards
        for _ in range(self.frame_skip):
            try:
                ob, rew, term, trunc, _info = env.step(act)
            except Exception as err:  # noqa: BLE001 - any env error, named in one line
                if not from_env(err):
                    raise
                step = int(self._episode_steps[i]) + 1
                raise EnvFault.raised(self.env_id, i, step, err) from err
            total = total + rew
            if term or trunc:
                break
        return ob, total, term, trunc

    def set_step_threads(self, threads: int) -> None:
        """Step the sub-envs in ``threads`` threads (1: one after another, the default).

        Why: an env whose step waits (a remote simulator's round trip; the test env's 2 ms
        sleep) or releases the GIL leaves the process idle while it waits; threads overlap
        those waits, where a cheap Python env (CartPole) only pays the thread hand-off. Each
        sub-env is stepped by one thread at a time with its own state, so the results are those
        of the sequential loop, in the same order."""
        if self._pool is not None:
            self._pool.shutdown()
        self._pool = ThreadPoolExecutor(threads, "xdrl-env-step") if threads > 1 else None

    def reset_numpy(
        self, indices: Sequence[int] | None = None, seed: int | None = None
    ) -> np.ndarray:
        """Reset the sub-envs ``indices`` (all: None); sub-env ``i`` gets ``seed + i``.

        Returns the observations of all N sub-envs (a new array).
        """
        obs = self._obs.copy()
        for i in range(len(self._envs)) if indices is None else indices:
            obs[i] = self._reset_one(i, None if seed is None else seed + i)
        self._check_finite(obs, None)
        terminated, truncated = self._terminated.copy(), self._truncated.copy()
        if indices is None:
            terminated[:] = truncated[:] = False
        else:
            terminated[list(indices)] = truncated[list(indices)] = False
        self._obs, self._terminated, self._truncated = obs, terminated, truncated
        return obs

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action").detach().cpu().numpy()
        partial = tensordict.get("_step", None)
        indices = None if partial is None else _true_indices(partial)
        return self._output(*self.step_numpy(action, indices))

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        indices = range(len(self._envs)) if mask is None else _true_indices(mask)
        seed = kwargs.pop("seed", None)
        obs = self._obs.copy()
        for i in indices:
            obs[i] = self._reset_one(i, None if seed is None else seed + i, **kwargs)
        self._check_finite(obs, None)
        self._obs = obs
        self._terminated = np.zeros_like(self._terminated)
        self._truncated = np.zeros_like(self._truncated)
        return self._output(obs, None, self._terminated, self._truncated)

    def _output(
        self,
        obs: np.ndarray,
        reward: np.ndarray | None,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> TensorDictBase:
        """One TensorDict of batch size [N] (no reward at reset)."""
        source = {
            "observation": torch.from_numpy(obs),
            "done": torch.from_numpy(terminated | truncated),
            "terminated": torch.from_numpy(terminated),
            "truncated": torch.from_numpy(truncated),
        }
        if reward is not None:
            source["reward"] = torch.from_numpy(reward)
        if self.device is not None and self.device.type != "cpu":
            source = {key: value.to(self.device) for key, value in source.items()}
        return TensorDict._new_unsafe(source, batch_size=self.batch_size, device=self.device)

    # State, for an exact resume (xdrl.training.env_state)
    @property
    def envs(self) -> list[gymnasium.Env]:
        """The gymnasium envs, in batch order."""
        return self._envs

    def replace_envs(self, envs: Sequence[gymnasium.Env]) -> None:
        """Step ``envs`` from now on (restored copies of the same envs, same count)."""
        if len(envs) != len(self._envs):
            raise ValueError(f"{len(envs)} envs given for a batch of {len(self._envs)}")
        self._envs = list(envs)
        self._env = self._envs[0]

    def flags_state(self) -> dict[str, np.ndarray]:
        """The last observation and done flags of every sub-env (what ``step_numpy`` keeps for
        the sub-envs it does not step)."""
        return {
            "observation": self._obs.copy(),
            "terminated": self._terminated.copy(),
            "truncated": self._truncated.copy(),
        }

    def load_flags_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore :meth:`flags_state`."""
        self._obs = np.array(state["observation"], dtype=self._obs_dtype)
        self._terminated = np.array(state["terminated"], dtype=bool)
        self._truncated = np.array(state["truncated"], dtype=bool)

    # Seeding and closing
    def _set_seed(self, seed: int | None) -> None:
        """Reset sub-env ``i`` with ``seed + i`` and seed its action space likewise."""
        if seed is None:
            return
        obs = self._obs.copy()
        for i, env in enumerate(self._envs):
            obs[i] = self._reset_one(i, seed + i)
            env.action_space.seed(seed + i)
        self._check_finite(obs, None)
        self._obs = obs

    def close(self, *, raise_if_closed: bool = True) -> None:
        self.set_step_threads(1)
        for env in self._envs:
            env.close()
        super().close(raise_if_closed=raise_if_closed)


def _true_indices(mask: torch.Tensor) -> Sequence[int]:
    """Indices where a [N] or [N, 1] boolean mask is True."""
    return np.flatnonzero(mask.detach().cpu().numpy().reshape(len(mask), -1).any(-1)).tolist()


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype."""
    return torch.empty((), dtype=dtype).numpy().dtype
