"""VectorCollector: TorchRL's collector contract, with the per-step work done in NumPy.

Why it exists: collecting 256 CartPole frames (8 envs x 32 steps) with TorchRL's ``Collector``
took ~32 ms on this project's 2-core machines against 3-4 ms for a lean loop over the same
gymnasium envs and network. A cProfile of the TorchRL path: the probabilistic actor 30%, the env
step through the transforms 33% (gymnasium's own CartPole step 7%), partial resets 15% -- i.e.
several TensorDicts built and merged per step. This collector steps
:class:`~xdrl.envs.vector_env.VectorGymEnv`'s gymnasium envs directly, folds the transforms
:func:`xdrl.envs.factory.make_env` adds (float32 observation casts, ``StepCounter``, ``RewardSum``,
``LineariseRewards``, ``InitTracker``) into NumPy bookkeeping, samples actions through
the policy's tensor path (:meth:`~xdrl.lean.policy_types.TensorSampler.act`), writes into
preallocated
buffers and builds ONE TensorDict per batch, with the same keys, shapes and values as TorchRL's
``Collector(env, policy, track_traj_ids=False)`` over the same env, policy and seed (tested for
PPO, DQN, SAC and TD3 policies, with and without random warm-up frames). Other policies (DQN's
Q-value actor) still run their TensorDict forward once per step, on one small TensorDict.

It is used when :func:`fits` says so (a ``VectorGymEnv`` with exactly those transforms and a
TensorDict policy, optionally ending in ``make_env``'s ``VecNormV2``, whose per-step work
:class:`~xdrl.lean.vecnorm.ObservationNormStep` does with the same arithmetic); everything else
(``SerialEnv``/``ParallelEnv`` batching, time-limit step counters, recurrent state primers) keeps
TorchRL's ``Collector``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import BaseCollector
from torchrl.envs import (
    DTypeCastTransform,
    EnvBase,
    InitTracker,
    LineariseRewards,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.envs.utils import ExplorationType, exploration_type, set_exploration_type

from xdrl.envs.faults import check_batch
from xdrl.envs.vector_env import VectorGymEnv
from xdrl.lean.policy_types import TensorSampler
from xdrl.lean.vecnorm import ObservationNormStep, supported

_ROOT_KEYS = {
    "observation",
    "step_count",
    "episode_reward",
    "is_init",
    "done",
    "terminated",
    "truncated",
}
_FOLDED = (DTypeCastTransform, StepCounter, RewardSum, LineariseRewards, InitTracker)


def _random_action_leaf(env: TransformedEnv) -> Any:
    """The ``action`` spec whose ``rand(torch.Size([]))`` is ``env.rand_action()``'s draw (a
    batch-locked env drawing through TorchRL's ``EnvBase.rand_action`` from a Composite with that
    one entry: the same generator calls, without the root and the two TensorDicts around it),
    else None. With the zeros no longer copied per step, a random warm-up frame of one Pendulum
    env took 187 -> 88 us (2 threads, 1,280 frames, same machine)."""
    full = env.full_action_spec
    only = (
        env.batch_locked
        and type(env.base_env).rand_action is EnvBase.rand_action
        and list(full.keys(True, True)) == ["action"]
    )
    return full["action"] if only else None


def check_policy_outputs(outputs: dict[str, torch.Tensor]) -> None:
    """Refuse a batch whose policy outputs hold NaN (diverged networks), as
    ``torch.multinomial`` refuses NaN probabilities in TorchRL's own sampling; checked once per
    batch, not per step (see ``CategoricalActor.sample``), after the env's outputs were found
    finite (:func:`~xdrl.envs.faults.check_batch`), so NaN here is the networks', not the env's:
    the action bounds are finite too (:func:`~xdrl.envs.factory.check_action_space`)."""
    for key, value in outputs.items():
        if value.is_floating_point() and bool(value.isnan().any()):
            raise RuntimeError(f"the policy's {key!r} holds NaN: the networks diverged")


def fits(env: Any, policy: Any, init_random_frames: int = 0, *, normalize: bool = False) -> bool:
    """Whether :class:`VectorCollector` reproduces TorchRL's ``Collector`` for this pair.

    ``normalize``: also accept a last ``VecNormV2`` that :class:`ObservationNormStep` reproduces
    (the in-process collector and frozen evaluation envs; worker collectors share the run's
    statistics their own way, :mod:`xdrl.training.worker_norm`)."""
    if not isinstance(env, TransformedEnv) or not isinstance(env.base_env, VectorGymEnv):
        return False
    if not isinstance(policy, TensorDictModuleBase):
        return False
    transforms = list(env.transform)
    if normalize and transforms and supported(transforms[-1]):
        transforms = transforms[:-1]
    for transform in transforms:
        if not isinstance(transform, _FOLDED):
            return False
        if isinstance(transform, StepCounter) and transform.max_steps is not None:
            return False
    return True


def _observation_norm(env: TransformedEnv) -> ObservationNormStep | None:
    """The per-step work of ``env``'s last transform when it is a ``VecNormV2``, else None."""
    last = env.transform[-1] if len(env.transform) else None
    return ObservationNormStep(last) if supported(last) else None


def _linear_weights(env: TransformedEnv) -> torch.Tensor | None:
    for transform in env.transform:
        if isinstance(transform, LineariseRewards):
            return transform.weights
    return None


class VectorCollector(BaseCollector):
    """Collect ``frames_per_batch`` frames per iteration from a ``VectorGymEnv``-based env.

    Yields TensorDicts of batch size ``[num_envs, frames_per_batch // num_envs]`` (env first,
    time second, as TorchRL's ``Collector``) with ``observation``, ``action``, ``logits``,
    ``action_log_prob``, ``step_count``, ``episode_reward``, ``is_init``, the done flags and
    ``next`` (observation, reward, episode_reward, step_count, is_init, done flags). Episodes
    that end are reset at once (seedless, as TorchRL's ``step_and_maybe_reset``).

    Args:
        env: a :func:`xdrl.envs.factory.make_env` env over ``VectorGymEnv`` (see :func:`fits`).
        policy: a TensorDict policy; a :class:`~xdrl.lean.policy_types.TensorSampler` (PPO's, A2C's,
            SAC's and TD3's actors) takes the fast path.
        frames_per_batch: frames per yielded batch, a multiple of the env's batch size.
        total_frames: stop after this many frames.
        device: device of the policy's inputs and of the yielded batches.
        frame_skip: frames per agent step: ``init_random_frames`` counts frames, as the
            Trainer does (``frames_per_batch`` and ``total_frames`` count agent steps).

    With a ``VecNormV2`` that learns (not frozen), the envs are reset here, as TorchRL's
    ``Collector`` resets them when built: the reset updates the statistics, which an evaluation
    before the first batch reads. Its statistics are saved under ``env_state_dict``, as
    TorchRL's ``Collector`` saves them.

    Example:
        >>> collector = VectorCollector(env, actor, frames_per_batch=256, total_frames=10_240)
        >>> next(iter(collector)).batch_size
        torch.Size([8, 32])
    """

    def __init__(
        self,
        env: TransformedEnv,
        policy: TensorDictModuleBase,
        *,
        frames_per_batch: int,
        total_frames: int,
        init_random_frames: int = 0,
        device: str | torch.device | None = None,
        frame_skip: int = 1,
    ) -> None:
        super().__init__()
        if not fits(env, policy, init_random_frames, normalize=True):
            raise ValueError("VectorCollector needs a VectorGymEnv env and a CategoricalActor")
        num_envs = int(env.batch_size[0])
        if frames_per_batch % num_envs:
            raise ValueError(f"frames_per_batch={frames_per_batch} is not a multiple of {num_envs}")
        self.env = env
        self.policy = policy
        self.frames_per_batch = self.requested_frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.init_random_frames = init_random_frames  # in frames, as the Trainer counts them
        self.frame_skip = int(frame_skip)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._base: VectorGymEnv = env.base_env
        self._steps = frames_per_batch // num_envs
        self._weights = _linear_weights(env)
        self._frames = 0
        self._iter = 0
        self._state: dict[str, np.ndarray] | None = None
        self._zeros: dict[str, torch.Tensor] | None = None
        self._action_leaf = _random_action_leaf(env)
        self._norm = _observation_norm(env)
        if self._norm is not None and not self._norm.norm.frozen:
            self._state = self._start()

    # Episode bookkeeping (what StepCounter, RewardSum and InitTracker keep)
    def _start(self) -> dict[str, np.ndarray]:
        """Reset every sub-env through TorchRL once, as ``Collector`` does before its first
        batch."""
        reset = self.env.reset()
        return {
            "observation": reset["observation"].cpu().numpy().copy(),
            "step_count": reset["step_count"].cpu().numpy().reshape(-1).copy(),
            "episode_reward": reset["episode_reward"].cpu().numpy().copy(),
        }

    def iterator(self) -> Iterator[TensorDictBase]:
        """Batches until ``total_frames`` are collected."""
        while self._frames < self.total_frames:
            if self._state is None:
                self._state = self._start()
            # one context for the whole batch (a no_grad per policy call cost ~50 us)
            with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
                batch = self._rollout(self._state)
            self._frames += self.frames_per_batch
            self._iter += 1
            yield batch

    def first_episodes(
        self,
        tensordict: TensorDictBase,
        max_steps: int,
        step_check: Callable[[], None] | None = None,
    ) -> TensorDictBase:
        """Each sub-env's first episode from the reset state ``tensordict`` (at most
        ``max_steps`` steps), as ``env.rollout(max_steps, policy, auto_reset=False,
        tensordict=tensordict, break_when_all_done=True)`` returns it; exploration follows the
        caller's ``set_exploration_type`` context. ``step_check`` runs after every step but the
        last (where ``EnvBase.rollout`` calls its callback); it may raise to stop the rollout."""
        state = {
            "observation": tensordict["observation"].cpu().numpy().copy(),
            "step_count": tensordict["step_count"].cpu().numpy().reshape(-1).copy(),
            "episode_reward": tensordict["episode_reward"].cpu().numpy().copy(),
        }
        return self._rollout(state, until_all_done=max_steps, step_check=step_check)

    def _rollout(
        self,
        state: dict[str, np.ndarray],
        until_all_done: int = 0,
        step_check: Callable[[], None] | None = None,
    ) -> TensorDictBase:
        """``self._steps`` steps of every sub-env into one TensorDict ``[num_envs, steps]``.

        With ``until_all_done=M``: at most M steps, each sub-env's first episode only: a sub-env
        that is done is no longer stepped and repeats its last row (as ``EnvBase.rollout`` with
        ``auto_reset=False, break_when_all_done=True`` does), and the rollout stops once all are.
        """
        n, base = int(self.env.batch_size[0]), self._base
        steps = until_all_done or self._steps
        obs_shape = state["observation"].shape[1:]
        reward_dim = state["episode_reward"].shape[-1]
        obs = np.empty((n, steps, *obs_shape), dtype=state["observation"].dtype)
        next_obs = np.empty_like(obs)
        raw_reward = np.empty((n, steps, base.reward_spec.shape[-1]), dtype=np.float32)
        episode_reward = np.empty((n, steps, reward_dim), dtype=np.float32)
        next_episode_reward = np.empty_like(episode_reward)
        step_count = np.empty((n, steps, 1), dtype=np.int64)
        terminated = np.empty((n, steps, 1), dtype=bool)
        truncated = np.empty((n, steps, 1), dtype=bool)
        rows: list[np.ndarray] = [obs, next_obs, raw_reward, episode_reward]
        rows += [next_episode_reward, step_count, terminated, truncated]
        finished = np.full(n, -1)  # the step at which a frozen sub-env's episode ended
        outputs: list[dict[str, torch.Tensor]] = []
        current = state["observation"]
        t = 0
        for t in range(steps):
            obs[:, t] = current
            episode_reward[:, t] = state["episode_reward"]
            step_count[:, t, 0] = state["step_count"]
            out = self._act(torch.from_numpy(current).to(self.device), state)
            if until_all_done and (finished >= 0).any():
                # frozen sub-envs keep the row of their last step, policy outputs included
                stale = np.flatnonzero(finished >= 0).tolist()
                out = {key: value.clone() for key, value in out.items()}  # may be shared zeros
                for key, value in out.items():
                    value[stale] = outputs[-1][key][stale]
            outputs.append(out)
            active = np.flatnonzero(finished < 0).tolist() if until_all_done else None
            ob, rew, term, trunc = base.step_numpy(out["action"].cpu().numpy(), active, check=False)
            if self._norm is not None:
                ob = self._normalize(ob, obs.dtype)
            next_obs[:, t] = ob
            raw_reward[:, t] = rew.reshape(n, -1)
            terminated[:, t] = term
            truncated[:, t] = trunc
            total = state["episode_reward"] + rew.reshape(n, -1)
            next_episode_reward[:, t] = total
            state["episode_reward"] = total
            state["step_count"] = state["step_count"] + 1
            done = np.flatnonzero(term[:, 0] | trunc[:, 0])
            current = ob.astype(obs.dtype, copy=True)
            if until_all_done:
                frozen = np.flatnonzero(finished >= 0)
                for array in rows:  # frozen sub-envs repeat the row their episode ended on
                    array[frozen, t] = array[frozen, finished[frozen]]
                finished[done[finished[done] < 0]] = t
                if (finished >= 0).all():
                    break
                frozen = np.flatnonzero(finished >= 0)  # their policy input stays that row's
                current[frozen] = obs[frozen, finished[frozen]]
                state["step_count"][frozen] = step_count[frozen, finished[frozen], 0]
                state["episode_reward"][frozen] = episode_reward[frozen, finished[frozen]]
                if step_check is not None and t < steps - 1:
                    step_check()
            elif len(done):
                reset = base.reset_numpy(done.tolist())
                if self._norm is not None:  # VecNormV2 updates with the whole reset batch
                    reset = self._normalize(reset, obs.dtype)
                current[done] = reset[done]
                state["episode_reward"][done] = 0.0
                state["step_count"][done] = 0
        state["observation"] = current
        length = t + 1
        # the env's outputs first: NaN there reaches the policy's outputs too
        check_batch(base.env_id, next_obs[:, :length], raw_reward[:, :length], step_count)
        policy_out = {key: torch.stack([o[key] for o in outputs], 1) for key in outputs[0]}
        check_policy_outputs(policy_out)
        arrays = [array[:, :length] for array in rows]
        return self._batch(arrays, policy_out, cpu_device=bool(until_all_done))

    def _normalize(self, observation: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """``observation`` cast to ``dtype`` (as the env's casts do), then through the
        ``VecNormV2``'s update and normalization (:class:`ObservationNormStep`)."""
        assert self._norm is not None
        return self._norm(torch.from_numpy(observation.astype(dtype))).numpy()

    def _act(self, observation: torch.Tensor, state: dict[str, np.ndarray]) -> dict[str, Any]:
        """The policy's outputs for one step (``action`` and whatever else it writes); random
        actions from the action spec while fewer than ``init_random_frames`` were collected."""
        random = self._frames * self.frame_skip < self.init_random_frames
        if isinstance(self.policy, TensorSampler) and not random:
            explore = exploration_type() in (ExplorationType.RANDOM, None)
            outputs = self.policy.act(observation, explore)
            if outputs is not None:
                return outputs
        if not random:
            out = self.policy(self._root(observation, state))
            return {key: out.get(key) for key in out.keys(True, True) if key not in _ROOT_KEYS}
        # Random warm-up: TorchRL's Collector fills the policy's other outputs with zeros (one
        # set shared by every step: the batch stacks copies of them).
        if self._zeros is None:
            outputs = self._dry_run(self._root(observation, state))
            self._zeros = {key: torch.zeros_like(v) for key, v in outputs.items()}
        return {**self._zeros, "action": self._random_action(observation, state)}

    def _random_action(
        self, observation: torch.Tensor, state: dict[str, np.ndarray]
    ) -> torch.Tensor:
        """``env.rand_action(root)["action"]``: the draw of the action spec's one leaf where
        :func:`_random_action_leaf` found it, else TorchRL's own call."""
        if self._action_leaf is not None:
            return self._action_leaf.rand(torch.Size([]))
        return self.env.rand_action(self._root(observation, state))["action"]

    def _root(self, observation: torch.Tensor, state: dict[str, np.ndarray]) -> TensorDictBase:
        """The step's root TensorDict, as the env's transforms would write it."""
        n = observation.shape[0]
        flags = torch.zeros(n, 1, dtype=torch.bool, device=observation.device)
        step_count = torch.from_numpy(state["step_count"]).reshape(n, 1).to(observation.device)
        return TensorDict(
            {
                "observation": observation,
                "step_count": step_count,
                "episode_reward": torch.from_numpy(state["episode_reward"].copy()).to(flags.device),
                "is_init": step_count == 0,
                "done": flags,
                "terminated": flags.clone(),
                "truncated": flags.clone(),
            },
            batch_size=[n],
        )

    def _dry_run(self, root: TensorDictBase) -> dict[str, torch.Tensor]:
        """The policy's outputs on ``root``, with the torch RNG left as it was."""
        rng = torch.get_rng_state()
        try:
            out = self.policy(root.clone())
        finally:
            torch.set_rng_state(rng)
        return {key: out.get(key) for key in out.keys(True, True) if key not in _ROOT_KEYS}

    def _batch(
        self,
        rows: list[np.ndarray],
        policy_out: dict[str, torch.Tensor],
        cpu_device: bool = False,
    ) -> TensorDictBase:
        """The batch TensorDict, keyed as TorchRL's ``Collector`` keys it (device None on the
        CPU, like the collector; ``cpu_device``: "cpu", like ``EnvBase.rollout``). ``rows``:
        observation, next observation, raw reward, episode reward, next episode reward, step
        count, terminated, truncated, each ``[num_envs, steps, ...]``."""
        obs, next_obs, raw_reward, episode_reward, next_episode_reward = rows[:5]
        step_count, terminated, truncated = rows[5:]
        n, steps = obs.shape[:2]
        device = self.device
        reward = torch.from_numpy(raw_reward)
        if self._weights is not None:
            reward = (reward * self._weights.to(reward)).sum(-1, keepdim=True)
        is_init = step_count == 0
        done = terminated | truncated
        flags = np.zeros((n, steps, 1), dtype=bool)

        def tensor(array: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(array).to(device)

        source = {
            "observation": tensor(obs),
            **policy_out,
            "step_count": tensor(step_count),
            "episode_reward": tensor(episode_reward),
            "is_init": tensor(is_init),
            "done": tensor(flags),
            "terminated": tensor(flags.copy()),
            "truncated": tensor(flags.copy()),
            "next": {
                "observation": tensor(next_obs),
                "reward": reward.to(device),
                "episode_reward": tensor(next_episode_reward),
                "step_count": tensor(step_count + 1),
                "is_init": tensor(np.zeros((n, steps, 1), dtype=bool)),
                "done": tensor(done),
                "terminated": tensor(terminated),
                "truncated": tensor(truncated),
            },
        }
        out_device = None if device.type == "cpu" and not cpu_device else device
        return TensorDict(source, batch_size=[n, steps], device=out_device)

    # The rest of TorchRL's collector contract
    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        """No-op: the policy is the trained module itself (same process, same device)."""

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the env (sub-env ``i`` gets ``seed + i``); the next batch starts from a reset."""
        self._state = None
        return self.env.set_seed(seed, static_seed=static_seed)

    def state_dict(self) -> OrderedDict:
        """Frames and iterations collected, and with observation normalization the env's
        transform state (its ``VecNormV2`` statistics) under ``env_state_dict``, where TorchRL's
        ``Collector`` saves it (``xdrl.load_policy`` reads it there)."""
        state = OrderedDict(frames=self._frames, iter=self._iter)
        if self._norm is not None:
            state["env_state_dict"] = self.env.state_dict()
        return state

    def load_state_dict(self, state_dict: OrderedDict) -> None:
        """Restore :meth:`state_dict` (or a TorchRL ``Collector``'s: its ``policy_state_dict``
        is the policy's own checkpoint, loaded there)."""
        if self._norm is not None and "env_state_dict" in state_dict:
            self.env.load_state_dict(state_dict["env_state_dict"])
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])

    def episode_state(self) -> dict[str, np.ndarray] | None:
        """The episodes in progress: each sub-env's observation, step count and return so far
        (None before the first batch); saved by :class:`xdrl.training.env_state.EnvState`."""
        if self._state is None:
            return None
        return {key: value.copy() for key, value in self._state.items()}

    def load_episode_state(self, state: dict[str, np.ndarray] | TensorDictBase | None) -> None:
        """Continue the episodes of :meth:`episode_state` (None: start from a reset), or of a
        TorchRL ``Collector``'s carrier (a checkpoint of a run whose env was collected by it,
        as normalized envs were before this collector took them)."""
        if isinstance(state, TensorDictBase):
            state = {
                "observation": state["observation"].cpu().numpy(),
                "step_count": state["step_count"].cpu().numpy().reshape(-1),
                "episode_reward": state["episode_reward"].cpu().numpy(),
            }
        self._state = None if state is None else {k: v.copy() for k, v in state.items()}

    def shutdown(
        self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True
    ) -> None:
        """Close the env (as TorchRL's ``Collector`` does)."""
        if close_env and not self.env.is_closed:
            self.env.close()


class VectorEnv(TransformedEnv):
    """``TransformedEnv`` over a ``VectorGymEnv`` whose evaluation rollouts skip TorchRL's
    per-step TensorDict work.

    Why: a 20-episode CartPole evaluation (20 sub-envs, up to 500 steps) through
    ``EnvBase.rollout`` spent ~1 ms per batched step in step/transform/``step_mdp`` plumbing.
    :meth:`rollout` called as xdrl's evaluation hook calls it (``auto_reset=False``,
    ``break_when_all_done=True``, a given ``tensordict``, no callback; a ``VecNormV2`` only when
    frozen) runs :class:`VectorCollector`'s NumPy loop instead, with the same keys, shapes and
    values (tested); any other call is ``TransformedEnv.rollout``. ``step_check`` (either path) runs
    between steps and may raise to stop the rollout (an evaluation asked to stop).

    Example:
        >>> env = VectorEnv(VectorGymEnv("CartPole-v1", 20), Compose(StepCounter(), ...))
        >>> env.rollout(500, policy, auto_reset=False, tensordict=env.reset(),
        ...             break_when_all_done=True)
    """

    def rollout(  # type: ignore[override]
        self,
        max_steps: int,
        policy: Any = None,
        callback: Any = None,
        step_check: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        tensordict = kwargs.get("tensordict")
        plain = set(kwargs) <= {"auto_reset", "tensordict", "break_when_any_done",
                                "break_when_all_done"}  # fmt: skip
        if (
            plain
            and callback is None
            and tensordict is not None
            and kwargs.get("auto_reset") is False
            and kwargs.get("break_when_all_done")
            and not kwargs.get("break_when_any_done")
            and fits(self, policy, normalize=_frozen_norm(self))
        ):
            collector = VectorCollector(
                self, policy, frames_per_batch=self.batch_size[0], total_frames=0,
                device=tensordict.device or "cpu",
            )  # fmt: skip
            return collector.first_episodes(tensordict, max_steps, step_check)
        if step_check is not None:
            callback = _then(callback, step_check)
        return super().rollout(max_steps, policy, callback, **kwargs)


def _frozen_norm(env: TransformedEnv) -> bool:
    """Whether ``env`` ends in a frozen ``VecNormV2`` (an evaluation env's, reading the
    training statistics), which :class:`VectorEnv`'s rollouts apply."""
    last = env.transform[-1] if len(env.transform) else None
    return last is not None and supported(last) and bool(last.frozen)


def _then(callback: Any, step_check: Callable[[], None]) -> Callable[[Any, Any], None]:
    """A rollout callback: ``callback`` (if any), then ``step_check``."""

    def step(env: Any, tensordict: Any) -> None:
        if callback is not None:
            callback(env, tensordict)
        step_check()

    return step


def fast_rollouts(env: EnvBase) -> EnvBase:
    """``env`` (the same base env and transforms) as a :class:`VectorEnv` when its base is a
    ``VectorGymEnv``, for evaluation rollouts; any other env unchanged.

    The builders of evaluation envs call it (``xdrl.training.build``, ``xdrl.policy.loading``), so
    the
    env factory in ``xdrl.envs.factory`` does not depend on the collector.

    Example:
        >>> eval_env = fast_rollouts(make_env("CartPole-v1", num_envs=20, batching="vector"))
    """
    if (
        isinstance(env, TransformedEnv)
        and not isinstance(env, VectorEnv)
        and isinstance(env.base_env, VectorGymEnv)
    ):
        from xdrl.envs.factory import quiet_vecnorm_note

        with quiet_vecnorm_note():  # re-attaching a VecNormV2 repeats its note
            return VectorEnv(env.base_env, env.transform)
    return env
