"""Environment factory: a gymnasium or MO-Gymnasium id in, a batched TorchRL env with xdrl's
transforms out (step counter, episode returns, reward scalarization, float observations)."""

from __future__ import annotations

import difflib
import logging
import math
import os
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from xdrl.config_check import FiniteFloat, PositiveInt
from xdrl.errors import ConfigError

log = logging.getLogger(__name__)

# Harmless and repeated for every MO-Gymnasium env with float64 bounds; it would sit above any
# one-line config error on stderr.
warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32.*")

# Extras that unlock optional environment families, keyed by the module gymnasium fails to import.
_EXTRA_FOR_MISSING = {
    "box2d": "box2d",
    "Box2D": "box2d",
    "mujoco": "mujoco",
    "pygame": "video",
}


def _registry() -> dict[str, Any]:
    """gymnasium's registry, with MO-Gymnasium's ids registered."""
    import gymnasium

    try:
        import mo_gymnasium  # noqa: F401  (registers the mo ids)
    except ImportError:  # pragma: no cover - mo-gymnasium is a core dependency
        pass
    return gymnasium.envs.registry


def is_multi_objective(env_id: str) -> bool:
    """Whether ``env_id`` is an MO-Gymnasium environment (vector reward)."""
    spec = _registry()[env_id]
    entry = spec.entry_point if isinstance(spec.entry_point, str) else spec.entry_point.__module__
    return entry.startswith("mo_gymnasium")


def check_env_id(env_id: str, key: str = "env.id") -> None:
    """Fail with one line naming close matches when ``env_id`` is not registered."""
    registry = _registry()
    if env_id in registry:
        return
    close = difflib.get_close_matches(env_id, list(registry), n=3, cutoff=0.6)
    hint = (
        f"did you mean {', '.join(repr(c) for c in close)}?"
        if close
        else ('run `python -c "import gymnasium; gymnasium.pprint_registry()"` for the list')
    )
    raise ConfigError(key, f"unknown environment id {env_id!r}; {hint}")


def _missing_dependency(env_id: str, error: Exception) -> ConfigError:
    text = str(error)
    for module, extra in _EXTRA_FOR_MISSING.items():
        if module in text:
            return ConfigError(
                "env.id",
                f"{env_id} needs an optional package ({module}); install it with "
                f"`pip install 'xdrl[{extra}]'`",
            )
    return ConfigError("env.id", f"{env_id} cannot be created: {text.splitlines()[0]}")


def _make_base(
    env_id: str,
    *,
    multi_objective: bool,
    device: str,
    frame_skip: int,
    max_episode_steps: int | None,
    render: bool,
    make_kwargs: dict[str, Any],
):
    """One TorchRL-wrapped gymnasium env (no batching, no transforms)."""
    import gymnasium
    from torchrl.envs import GymEnv, MOGymEnv

    kwargs = dict(make_kwargs)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    if render:
        kwargs["render_mode"] = "rgb_array"
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # off-screen frames need no display
    cls = MOGymEnv if multi_objective else GymEnv
    try:
        return cls(
            env_id, categorical_action_encoding=True, frame_skip=frame_skip, device=device, **kwargs
        )
    except (gymnasium.error.DependencyNotInstalled, ImportError, ModuleNotFoundError) as err:
        raise _missing_dependency(env_id, err) from err


def _make_vector(
    env_id: str,
    num_envs: int,
    *,
    device: str,
    frame_skip: int,
    max_episode_steps: int | None,
    render: bool,
    make_kwargs: dict[str, Any],
):
    """``num_envs`` gymnasium envs as one :class:`~xdrl.vector_env.VectorGymEnv`, or None when
    their spaces are not plain arrays (Dict/Tuple observations: the caller falls back to serial)."""
    import gymnasium

    from xdrl.vector_env import UnsupportedSpaceError, VectorGymEnv

    kwargs = dict(make_kwargs)  # the same gymnasium.make arguments as _make_base
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    if render:
        kwargs["render_mode"] = "rgb_array"
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        return VectorGymEnv(
            env_id, num_envs, make_kwargs=kwargs, frame_skip=frame_skip, device=device
        )
    except UnsupportedSpaceError as err:
        log.info("env.batching=vector does not fit %s (%s); using serial", env_id, err)
        return None
    except (gymnasium.error.DependencyNotInstalled, ImportError, ModuleNotFoundError) as err:
        raise _missing_dependency(env_id, err) from err


def check_reward_weights(weights: Sequence[float], reward_dim: int, env_id: str) -> list[float]:
    """Validate a scalarization weight vector against the env's reward dimension."""
    key = "env.reward_weights"
    values = [float(w) for w in weights]
    if len(values) != reward_dim:
        raise ConfigError(
            key,
            f"{env_id} has {reward_dim} objectives but {len(values)} weights were given; "
            f"pass {reward_dim} numbers, e.g. {[round(1 / reward_dim, 3)] * reward_dim}",
        )
    if any(math.isnan(v) or math.isinf(v) for v in values):
        raise ConfigError(key, f"weights must be finite numbers, got {values}")
    if sum(values) <= 0:
        raise ConfigError(
            key, f"weights must have a positive sum, got {values} (sum {sum(values)})"
        )
    return values


def _observation_casts(spec) -> list:
    """Transforms that turn integer or float64 observations into float32 for the networks."""
    import torch
    from torchrl.envs import DTypeCastTransform

    casts = []
    for key, leaf in spec.items(include_nested=True, leaves_only=True):
        if leaf.dtype != torch.float32:
            casts.append(
                DTypeCastTransform(dtype_in=leaf.dtype, dtype_out=torch.float32, in_keys=[key])
            )
    return casts


def make_env(
    id: str,  # noqa: A002 - the config key users know from gymnasium
    *,
    num_envs: PositiveInt = 1,
    batching: Literal["vector", "serial", "parallel"] = "serial",
    max_episode_steps: PositiveInt | None = None,
    frame_skip: PositiveInt = 1,
    reward_weights: Sequence[FiniteFloat] | None = None,
    normalize_observations: bool = False,
    make_kwargs: dict[str, Any] | None = None,
    seed: int | None = None,
    device: str = "cpu",
    render: bool = False,
    pareto: dict[str, Any] | None = None,
):
    """Build a batched TorchRL env for a gymnasium or MO-Gymnasium id.

    Transforms, in order: float32 observations, ``StepCounter`` (episode lengths),
    ``RewardSum`` on the raw reward (so per-objective returns come from the vector reward),
    ``LineariseRewards`` with ``reward_weights`` on multi-objective envs (the training reward),
    ``InitTracker``, and optionally ``VecNormV2`` on observations.

    Args:
        id: registered gymnasium or MO-Gymnasium id.
        num_envs: environments stepped together (batch dimension of every step).
        batching: ``vector`` (one TorchRL env over N gymnasium envs, numpy batching; fastest),
            ``serial`` (``SerialEnv`` of ``GymEnv``) or ``parallel`` (processes).
        max_episode_steps: time limit override.
        frame_skip: action repeat.
        reward_weights: scalarization weights (multi-objective only); equal weights when None.
        normalize_observations: add running observation normalization.
        make_kwargs: extra ``gymnasium.make`` keyword arguments.
        seed: seed of the first sub-env (the others follow).
        device: device of the env's tensors.
        render: create the envs with ``render_mode="rgb_array"`` (evaluation videos).
        pareto: the env's Pareto-report settings (``ref_point``), read by :mod:`xdrl.pareto`
            from the saved config; not used to build the env.

    Example:
        >>> env = make_env("CartPole-v1", num_envs=4, seed=0)
        >>> env.rollout(3).batch_size
        torch.Size([4, 3])
    """
    from torchrl.envs import (
        Compose,
        InitTracker,
        LineariseRewards,
        ParallelEnv,
        RewardSum,
        SerialEnv,
        StepCounter,
        TransformedEnv,
        VecNormV2,
    )

    from xdrl.collector import VectorEnv
    from xdrl.vector_env import VectorGymEnv

    check_env_id(id)
    if num_envs < 1:
        raise ConfigError("env.num_envs", f"must be at least 1, got {num_envs}")
    if frame_skip < 1:
        raise ConfigError("env.frame_skip", f"must be at least 1, got {frame_skip}")
    if batching not in ("vector", "serial", "parallel"):
        raise ConfigError(
            "env.batching", f"must be 'vector', 'serial' or 'parallel', got {batching!r}"
        )
    multi_objective = is_multi_objective(id)
    if reward_weights is not None and not multi_objective:
        raise ConfigError("env.reward_weights", f"{id} has a scalar reward; set it to null")

    def make_one():
        return _make_base(
            id,
            multi_objective=multi_objective,
            device=device,
            frame_skip=frame_skip,
            max_episode_steps=max_episode_steps,
            render=render,
            make_kwargs=dict(make_kwargs or {}),
        )

    base = None
    if batching == "vector":
        base = _make_vector(
            id,
            num_envs,
            device=device,
            frame_skip=frame_skip,
            max_episode_steps=max_episode_steps,
            render=render,
            make_kwargs=dict(make_kwargs or {}),
        )
    probe = base if base is not None else make_one()  # fails fast on a missing package
    reward_dim = int(probe.reward_spec.shape[-1]) if multi_objective else 1
    casts = _observation_casts(probe.observation_spec)
    if base is None and num_envs == 1:
        base = probe
    elif base is None:
        probe.close()
        batch_cls = ParallelEnv if batching == "parallel" else SerialEnv  # vector falls back here
        base = batch_cls(num_envs, make_one, device=device)

    transforms = [*casts, StepCounter(), RewardSum(in_keys=["reward"], out_keys=["episode_reward"])]
    if multi_objective:
        weights = reward_weights if reward_weights is not None else [1.0 / reward_dim] * reward_dim
        weights = check_reward_weights(weights, reward_dim, id)
        transforms.append(LineariseRewards(in_keys=["reward"], weights=weights))
    transforms.append(InitTracker())
    if normalize_observations:
        # One set of statistics over all sub-envs (not one per sub-env), so an evaluation env or an
        # exported policy with another batch size can use them.
        transforms.append(
            VecNormV2(in_keys=["observation"], decay=0.99999, eps=1e-6, reduce_batch_dims=True)
        )
    # VectorEnv: a TransformedEnv with a NumPy path for evaluation rollouts
    env_cls = VectorEnv if isinstance(base, VectorGymEnv) else TransformedEnv
    env = env_cls(base, Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)
    return env


def reward_weights_of(env) -> list[float] | None:
    """The weights a :func:`make_env` env scalarizes its reward with (None for scalar rewards)."""
    from torchrl.envs import LineariseRewards

    for transform in env.transform:
        if isinstance(transform, LineariseRewards):
            return [float(w) for w in transform.weights.flatten().tolist()]
    return None
