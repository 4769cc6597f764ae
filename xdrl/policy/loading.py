"""Rebuild a run's env and policy from its own config and load one checkpoint's policy (and its
observation-normalization statistics) into it: what ``xdrl-eval``, ``xdrl-export`` and
:func:`xdrl.load_policy` share.

Only two components of the TorchRL checkpoint are read: ``policy`` (the loss module's actor, as
TorchRL's ``Trainer`` saves it) and, for runs with ``env.normalize_observations=true``, the
``collector``'s ``env_state_dict`` (the training env's ``VecNormV2`` statistics). The statistics
are frozen after loading, so evaluating never moves them.

The policy takes what the run's gymnasium env returns from ``step``: the observation under the
one-hot encoding and the ``env.mask_observations`` mask (which the policy module applies itself)
and under any stateful wrapper (Atari's preprocessing and frame stack, which it cannot), read from
the run's own env once it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchrl.envs import VecNormV2
from torchrl.envs.utils import ExplorationType, set_exploration_type

from xdrl.algorithms.recurrent import state_keys as recurrent_state_keys
from xdrl.config.errors import ConfigError
from xdrl.config.spec import RunSpec
from xdrl.policy.module import DeterministicPolicy
from xdrl.policy.run_dir import (
    apply_overrides,
    check_run_dir,
    checkpoint_frames,
    checkpoint_sequence,
    resolve_checkpoint,
    saved_config,
)
from xdrl.policy.run_env import env_mismatch, make_env, policy_input_env
from xdrl.trainer_hooks.observation_norm import observation_norm
from xdrl.training.build import add_recurrent_state, build_algorithm
from xdrl.training.checkpointing import CONFIG_FILE, CorruptCheckpoint, VerifiedCheckpoint

POLICY_COMPONENT = "policy"
COLLECTOR_COMPONENT = "collector"
# Loss attributes TorchRL's Trainer saves as the "policy" component (Trainer._checkpoint_policy).
_POLICY_ATTRIBUTES = ("actor_network", "value_network", "local_value_network")


class _DoesNotFit(ConfigError):
    """An intact checkpoint whose tensors do not fit the policy rebuilt for the env."""


def _load_error(err: BaseException) -> str:
    """The first line of a load error, with the next one when it ends at a colon (torch's
    "Error(s) in loading state_dict for CategoricalActor:" says what only on the next line)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


class _EnvState:
    """Receives the collector component and loads its ``env_state_dict`` into ``env``."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.loaded = False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        env_state = state.get("env_state_dict")
        if env_state:
            self.env.load_state_dict(env_state, strict=False)
            self.loaded = True
            vecnorm = observation_norm(self.env)
            if vecnorm is not None:
                _pool_per_env_statistics(vecnorm)


def _pool_per_env_statistics(vecnorm: VecNormV2) -> None:
    """Statistics kept per sub-env (runs before ``reduce_batch_dims=True``) pooled into one set:
    the mean over sub-envs of E[x] and E[x^2] (each sub-env saw the same number of steps)."""
    shape = vecnorm.parent.observation_spec["observation"].shape[len(vecnorm.parent.batch_size) :]
    for name in ("_loc", "_var"):
        stats = getattr(vecnorm, name)
        value = stats["observation"]
        extra = value.dim() - len(shape)
        if extra > 0:
            stats.set("observation", value.mean(dim=tuple(range(extra))))


def _policy_owner(loss_module: Any) -> Any:
    for name in _POLICY_ATTRIBUTES:
        module = getattr(loss_module, name, None)
        if module is not None:
            return module
    raise ConfigError("--checkpoint", f"{type(loss_module).__name__} has no actor to load")


def _load(checkpoint: Path, run_dir: Path, parts: Any, env: Any) -> None:
    """Verify the checkpoint, then load its policy (and VecNorm statistics) into parts/env."""
    sink = _EnvState(env)
    components: dict[str, Any] = {POLICY_COMPONENT: _policy_owner(parts.loss_module)}
    normalized = observation_norm(env) is not None
    if normalized:
        components[COLLECTOR_COMPONENT] = sink
    loader = VerifiedCheckpoint(**components)
    try:
        loader.load(checkpoint, components=sorted(components))
    except CorruptCheckpoint as err:
        previous = checkpoint_sequence(run_dir, checkpoint)
        offer = (
            f"; try --checkpoint {previous[0].name.split('-')[1].lstrip('0') or '0'}"
            if (previous)
            else ""
        )
        raise ConfigError("--checkpoint", f"{checkpoint.name} is damaged: {err}{offer}") from None
    except Exception as err:  # noqa: BLE001 - intact files that do not fit the rebuilt policy
        raise _DoesNotFit(
            "--checkpoint", f"{checkpoint} does not load ({_load_error(err)})"
        ) from None
    if normalized and not sink.loaded:
        raise ConfigError(
            "--checkpoint",
            f"{checkpoint} holds no observation-normalization statistics; the policy cannot "
            "be rebuilt as trained",
        )


@dataclass
class LoadedPolicy:
    """A trained policy rebuilt from its run dir.

    Call it with a numpy observation (one, or a batch with a leading dimension), as gymnasium's
    ``env.step`` returns it (for ``env.observation_encoding=one_hot`` the raw integers, not their
    one-hot vector; for ``env.mask_observations`` the raw observation, the mask applied inside;
    for Atari the preprocessed ``[4, 84, 84]`` uint8 frame stack); it returns the env action
    (deterministic by default).

    Args:
        module: the TorchRL evaluation policy (TensorDict in, ``action`` out).
        env: the run's env with one sub-env, its observation normalization frozen.
        config: the resolved config the checkpoint was written under (with overrides), as
            plain data (its ``env`` node builds the env).
        spec: the same config read back as the run's typed spec.
        run_dir: the run dir.
        checkpoint: the checkpoint folder loaded.
        frames: collected frames at that checkpoint.
        deterministic_module: the deterministic policy as one module (what is exported).
        obs_shape: the shape of one observation as ``env.step`` returns it.
        obs_dtype: its dtype (observations are cast to it first).
        recurrent: the policy holds an LSTM or GRU cell (``algorithm.build.recurrent``). Then
            the call is stateful: each call carries the hidden state on from the previous one
            (per batch row), and :meth:`reset` starts a new episode (all rows, or those marked).
        state_keys: the hidden state entries of a recurrent policy (``actor_h``, ``actor_c``).

    Example:
        >>> policy = load_policy("outputs/2026-11-24/10-00-00_ppo_cartpole")
        >>> policy(np.zeros(4, dtype=np.float32))
        array(0)
        >>> policy.reset()  # a recurrent policy: before each new episode
    """

    module: Any
    env: Any
    config: dict[str, Any]
    spec: RunSpec = field(repr=False)
    run_dir: Path
    checkpoint: Path
    frames: int
    deterministic_module: DeterministicPolicy = field(repr=False)
    obs_shape: tuple[int, ...] = ()
    obs_dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))
    recurrent: bool = False
    state_keys: list[str] = field(default_factory=list)
    _states: list[torch.Tensor] | None = field(default=None, init=False, repr=False)
    _starts: torch.Tensor | None = field(default=None, init=False, repr=False)

    @torch.no_grad()
    def __call__(self, observation: Any, deterministic: bool = True) -> np.ndarray:
        from tensordict import TensorDict

        obs = torch.as_tensor(np.asarray(observation, dtype=self.obs_dtype))
        single = obs.dim() == len(self.obs_shape)
        batch = obs.unsqueeze(0) if single else obs
        if self.recurrent:
            action = self._carry(batch, deterministic)
        elif deterministic:
            action = self.deterministic_module(batch)
        else:
            normalized = self.deterministic_module.normalize(batch)
            data = TensorDict({"observation": normalized}, batch_size=batch.shape[:1])
            with set_exploration_type(ExplorationType.RANDOM):
                action = self.module(data).get("action")
        out = action.cpu().numpy()
        return out[0] if single else out

    def reset(self, done: Any = None) -> None:
        """Start new episodes: every batch row's (``done`` None) or those where ``done`` is
        true; their hidden state is zero at the next call. A no-op for a feed-forward policy."""
        if done is None or self._starts is None:
            self._states = None
            return
        self._starts |= torch.as_tensor(np.asarray(done, dtype=bool)).reshape(-1)

    def initial_states(self, batch: int) -> list[torch.Tensor]:
        """Zero hidden states for ``batch`` rows (``[batch, layers, hidden]`` each)."""
        spec = self.env.observation_spec
        return [torch.zeros(batch, *spec[key].shape[-2:]) for key in self.state_keys]

    def step(
        self,
        observation: torch.Tensor,
        is_init: torch.Tensor,
        states: list[torch.Tensor],
        deterministic: bool = True,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One step of a recurrent policy on a batch: ``(action, next states)`` from the
        observations as ``env.step`` returns them, ``is_init`` (``[batch]`` bool: the state is
        zeroed there) and the states; the TorchRL policy itself, in step mode."""
        from tensordict import TensorDict

        data = TensorDict(
            {
                "observation": self.deterministic_module.normalize(observation),
                "is_init": is_init.reshape(-1, 1),
                **dict(zip(self.state_keys, states, strict=True)),
            },
            batch_size=observation.shape[:1],
        )
        mode = ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM
        with torch.no_grad(), set_exploration_type(mode):
            out = self.module(data)
        return out.get("action"), [out.get(("next", key)) for key in self.state_keys]

    def _carry(self, batch: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """One stateful step: the states of the previous call (zeros and episode starts after
        :meth:`reset` or a change of batch size)."""
        rows = int(batch.shape[0])
        if self._states is None or self._starts is None or len(self._starts) != rows:
            self._states = self.initial_states(rows)
            self._starts = torch.ones(rows, dtype=torch.bool)
        action, self._states = self.step(batch, self._starts, self._states, deterministic)
        self._starts = torch.zeros(rows, dtype=torch.bool)
        return action

    def close(self) -> None:
        """Close the env."""
        if not self.env.is_closed:
            self.env.close()


def _build_algorithm(spec: RunSpec, env: Any) -> Any:
    """The run's algorithm parts, on the CPU, from its saved spec."""
    return build_algorithm(
        spec.cfg.algorithm.build,
        env,
        frames_per_batch=spec.frames_per_batch,
        device="cpu",
        total_frames=spec.total_frames,
        frame_skip=spec.frame_skip,
        lean=spec.lean,  # the pieces the run trained with (TorchRL's originals when false)
    )


def load_run(
    run_dir: str | Path,
    checkpoint: str = "last",
    *,
    overrides: list[str] | None = None,
    num_envs: int = 1,
    seed: int | None = None,
    render: bool = False,
) -> LoadedPolicy:
    """Rebuild the run's env (``num_envs`` sub-envs) and policy, load ``checkpoint`` into them."""
    folder = check_run_dir(run_dir)
    path = resolve_checkpoint(folder, str(checkpoint))
    saved = saved_config(path)
    config = apply_overrides(saved, list(overrides or []))
    spec = RunSpec.from_saved(config, str(path / CONFIG_FILE))
    env_seed = spec.eval_seed if seed is None else seed
    env = make_env(config, num_envs=num_envs, seed=env_seed, render=render)
    try:
        parts = _build_algorithm(spec, env)
        recurrent = add_recurrent_state(env, parts.eval_policy) is not None
        try:
            _load(path, folder, parts, env)
        except _DoesNotFit as err:
            raise env_mismatch(saved, config, env, list(overrides or [])) or err from None
        taken = policy_input_env(env, config)
        space = taken.env.observation_space
        if taken.owner is not env:
            taken.owner.close()
    except BaseException:
        env.close()
        raise
    vecnorm = observation_norm(env)
    loc = scale = None
    if vecnorm is not None:
        vecnorm.freeze()
        loc, scale = vecnorm.loc["observation"], vecnorm.scale["observation"]
    module = parts.eval_policy
    module.eval()
    return LoadedPolicy(
        module=module,
        env=env,
        config=config,
        spec=spec,
        run_dir=folder,
        checkpoint=path,
        frames=checkpoint_frames(path),
        deterministic_module=DeterministicPolicy(
            module,
            loc,
            scale,
            one_hot=taken.one_hot,
            mask=taken.mask,
            input_dtype=env.observation_spec["observation"].dtype,
        ).eval(),
        obs_shape=tuple(int(n) for n in space.shape),
        obs_dtype=np.dtype(space.dtype),
        recurrent=recurrent,
        state_keys=recurrent_state_keys(module) if recurrent else [],
    )


def load_policy(run_dir: str | Path, checkpoint: str | int = "last") -> LoadedPolicy:
    """A trained policy from its run dir: ``checkpoint`` is ``"last"``, ``"best"``, a frame
    count or a checkpoint path. See :class:`LoadedPolicy`."""
    return load_run(run_dir, str(checkpoint))
