"""Environment factory: a gymnasium or MO-Gymnasium id in, a batched TorchRL env with xdrl's
transforms out (step counter, episode returns, reward scalarization, float observations)."""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from xdrl.config.errors import ConfigError, first_line
from xdrl.config.types import FiniteFloat, NonNegativeInt, PositiveInt

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


# Packages that register well-known third-party env families, by id prefix: (module, pip name).
KNOWN_FAMILIES = {
    "ALE/": ("ale_py", "ale-py"),
    "MiniGrid-": ("minigrid", "minigrid"),
    "BabyAI-": ("minigrid", "minigrid"),
    "popgym-": ("popgym", "popgym"),
    "highway-": ("highway_env", "highway-env"),
    "parking-": ("highway_env", "highway-env"),
    "procgen": ("procgen_gym", "procgen-gym"),
    "crafter": ("crafter", "crafter"),
}
ATARI_EXTRA = "pip install 'xdrl[atari]'"
VECNORM_BATCHED_WARNING = "Support of VecNormV2 for containers with non-empty batch-size"
SUPPORTED_OBSERVATIONS = (
    "flat Box observations (a vector of numbers, e.g. CartPole's Box(4,)) and Box images "
    "(3-D, e.g. Atari's Box(0, 255, (210, 160, 3), uint8))"
)


def register_ale(key: str = "env.id") -> None:
    """Register ale_py's ids with gymnasium; one line with the extra to install when missing.
    The ALE logs warnings and errors only: its info-level banner ("A.L.E: Arcade Learning
    Environment ... [Powered by Stella]") went to stderr once per worker process."""
    try:
        import ale_py
        import gymnasium
    except ImportError as err:
        raise ConfigError(
            key, f"Atari games need the ale-py package; install it with `{ATARI_EXTRA}`"
        ) from err
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
    gymnasium.register_envs(ale_py)


def _registry() -> dict[str, Any]:
    """gymnasium's registry, with MO-Gymnasium's ids registered."""
    import gymnasium

    try:
        import mo_gymnasium  # noqa: F401  (registers the mo ids)
    except ImportError:  # pragma: no cover - mo-gymnasium is a core dependency
        pass
    return gymnasium.envs.registry


def import_env_modules(modules: Sequence[str], key: str = "env.import_modules") -> None:
    """Import the modules that register third-party env ids (``env.import_modules``)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - any failure to import is the user's to fix
            first = first_line(err)
            pip_name = next((p for m, p in KNOWN_FAMILIES.values() if m == module), None)
            fix = f"install it (`pip install {pip_name}`)" if pip_name else "install it"
            raise ConfigError(
                key, f"cannot import {module!r} ({first}); {fix} or fix the module name"
            ) from err


def _bare_id(env_id: str) -> str:
    """``CartPole-v1`` for ``CartPole-v1`` and for gymnasium's ``module:CartPole-v1`` form."""
    return env_id.rpartition(":")[2]


def is_multi_objective(env_id: str) -> bool:
    """Whether ``env_id`` is an MO-Gymnasium environment (vector reward)."""
    spec = _registry()[_bare_id(env_id)]
    entry = spec.entry_point if isinstance(spec.entry_point, str) else spec.entry_point.__module__
    return entry.startswith("mo_gymnasium")


def check_env_id(env_id: str, key: str = "env.id") -> None:
    """Fail with one line when ``env_id`` is not registered: the package to install or import
    for a known third-party family, else close matches. ``module:EnvId`` imports ``module``."""
    module, _, bare = env_id.rpartition(":")
    if module:
        import_env_modules([module], key)
    ale = bare.startswith("ALE/")
    if ale and not module:
        register_ale(key)  # ale-py's ids, or the extra to install
    registry = _registry()
    if bare in registry:
        return
    family = next((f for prefix, f in KNOWN_FAMILIES.items() if bare.startswith(prefix)), None)
    if ale:
        family = None  # registered above: a misspelt game
    if family is not None and not module:
        name, pip_name = family
        how = f"set env.id={name}:{bare} or env.import_modules=[{name}]"
        if importlib.util.find_spec(name) is None:
            how = f"install it (`pip install {pip_name}`), then {how}"
        raise ConfigError(key, f"{bare!r} is registered by the {name} package; {how}")
    close = difflib.get_close_matches(bare, list(registry), n=3, cutoff=0.6)
    hint = (
        f"did you mean {', '.join(repr(c) for c in close)}?"
        if close
        else ('run `python -c "import gymnasium; gymnasium.pprint_registry()"` for the list')
    )
    raise ConfigError(key, f"unknown environment id {bare!r}; {hint}")


def check_env(
    env_id: str,
    import_modules: Sequence[str],
    make_kwargs: Mapping[str, Any] | None,
    reward_weights: Sequence[float] | None = None,
    observation_encoding: str = "none",
) -> tuple[int, ...]:
    """The pre-training checks of an env config: its modules import, ``env.id`` is registered,
    ``env.make_kwargs`` are arguments of its constructor, its observation space (after
    ``observation_encoding``) is one xdrl trains on, and ``reward_weights`` fit its reward (one
    ``gymnasium.make``, no torch). Returns the observation shape of one env (before any frame
    stack)."""
    import_env_modules(import_modules)
    check_env_id(env_id)
    kwargs = check_make_kwargs(env_id, make_kwargs or {})
    reward_dim, shape = check_observation_space(env_id, kwargs, observation_encoding)
    if reward_weights is None:
        return shape
    if reward_dim is None:
        raise ConfigError("env.reward_weights", f"{env_id} has a scalar reward; set it to null")
    check_reward_weights(reward_weights, reward_dim, env_id)
    return shape


def check_make_kwargs(env_id: str, make_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Every ``env.make_kwargs`` key is an argument of the env's constructor (its gymnasium
    ``EnvSpec`` entry point) or of ``gymnasium.make``; returns them as a dict."""
    if not isinstance(make_kwargs, Mapping):
        raise ConfigError("env.make_kwargs", "must be a mapping, e.g. {render_mode: rgb_array}")
    if not make_kwargs:
        return {}
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    spec = gymnasium.spec(_bare_id(env_id))
    try:
        entry = spec.entry_point
        creator: Any = load_env_creator(entry) if isinstance(entry, str) else entry
        signature = inspect.signature(creator)
    except Exception:  # noqa: BLE001 - a missing optional package is reported below
        return dict(make_kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return dict(make_kwargs)
    accepted = set(signature.parameters) | {"max_episode_steps", "disable_env_checker"}
    for name in make_kwargs:
        if name not in accepted:
            close = difflib.get_close_matches(str(name), sorted(accepted), n=1)
            hint = f"did you mean {close[0]}?" if close else f"it accepts {sorted(accepted)}"
            raise ConfigError(
                f"env.make_kwargs.{name}",
                f"not an argument of {env_id} ({getattr(creator, '__name__', creator)}); {hint}",
            )
    return dict(make_kwargs)


def check_observation_space(
    env_id: str, make_kwargs: Mapping[str, Any], observation_encoding: str = "none"
) -> tuple[int | None, tuple[int, ...]]:
    """Fail with one line when ``env_id`` observes something xdrl's networks cannot take
    (Discrete without ``env.observation_encoding=one_hot``, Tuple, Dict, 2-D arrays, a one-hot
    too large); creates the env once, without torch. Returns the number of objectives of a
    multi-objective env (None: a scalar reward) and the observation shape."""
    try:
        key = (env_id, tuple(sorted(make_kwargs.items())), observation_encoding)
        hash(key)
    except TypeError:  # unhashable make_kwargs values: no cache
        return _check_space.__wrapped__(env_id, tuple(make_kwargs.items()), observation_encoding)
    return _check_space(*key)


@functools.lru_cache(maxsize=16)
def _check_space(
    env_id: str, make_kwargs: tuple[tuple[str, Any], ...], observation_encoding: str
) -> tuple[int | None, tuple[int, ...]]:
    import gymnasium

    kwargs = {k: v for k, v in make_kwargs if k != "render_mode"}  # no window for a check
    try:
        with _quiet():
            env = gymnasium.make(env_id, disable_env_checker=True, **kwargs)
    except (gymnasium.error.DependencyNotInstalled, ImportError) as err:
        raise _missing_dependency(env_id, err) from err
    except Exception as err:  # noqa: BLE001 - the env's own complaint, in one line
        raise ConfigError(
            "env.make_kwargs" if kwargs else "env.id",
            f"{env_id} cannot be created ({first_line(err)}); check the env's arguments",
        ) from err
    try:
        space = env.observation_space
        reward_space = getattr(env.unwrapped, "reward_space", None)
        check_action_space(env_id, env.action_space)
    finally:
        with _quiet():
            env.close()
    reward_dim = None
    if reward_space is not None and is_multi_objective(env_id):
        reward_dim = int(reward_space.shape[-1])
    if observation_encoding == "one_hot":
        from xdrl.envs.observation_encoding import one_hot_size

        return reward_dim, (one_hot_size(space),)  # a ConfigError for a space it cannot encode
    if isinstance(space, gymnasium.spaces.Box) and (
        len(space.shape) == 1 or is_image_shape(space.shape)
    ):
        return reward_dim, tuple(int(n) for n in space.shape)
    kind = f" ({len(space.shape)}-d)" if isinstance(space, gymnasium.spaces.Box) else ""
    hint = "pick an env with such observations"
    if isinstance(space, gymnasium.spaces.Discrete | gymnasium.spaces.MultiDiscrete):
        hint = "set env.observation_encoding=one_hot"
    raise ConfigError(
        "env.id",
        f"{env_id} observes {space}{kind}, which xdrl does not handle yet; it trains on "
        f"{SUPPORTED_OBSERVATIONS}: {hint}",
    )


def check_action_space(env_id: str, space: Any) -> None:
    """Fail with one line when a ``Box`` action space has an infinite bound (the continuous
    actors squash their actions into the bounds, a tanh scaled by ``high - low``, which an
    infinite bound turns into NaN in the first batch), or a ``Discrete``/``MultiDiscrete`` one
    does not start at 0 (TorchRL's specs drop ``start``: the policy's actions would be off by
    it, silently)."""
    import gymnasium
    import numpy as np

    if isinstance(space, gymnasium.spaces.Discrete | gymnasium.spaces.MultiDiscrete):
        if np.any(space.start != 0):
            raise ConfigError(
                "env.id",
                f"{env_id}'s action space {space} starts at {space.start.tolist()}; xdrl's "
                "discrete actions count from 0: wrap the env to add the start to its actions "
                "(a gymnasium.ActionWrapper)",
            )
        return
    if not isinstance(space, gymnasium.spaces.Box):
        return
    if np.isfinite(space.low).all() and np.isfinite(space.high).all():
        return
    raise ConfigError(
        "env.id",
        f"{env_id}'s action space {space} has infinite bounds; bounds must be finite; wrap the "
        "env or clip (a gymnasium.ActionWrapper with a finite Box action space)",
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No output while the check creates an env: MuJoCo's C library prints a warning on stderr at
    every model load, which would sit beside a one-line config error (the run's own env build
    prints it where it belongs)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def quiet_vecnorm_note() -> Iterator[None]:
    """Without TorchRL's note that ``VecNormV2`` on a batched env is "experimental", printed
    at every env build with ``normalize_observations`` (a training env, its evaluation env, its
    fast-rollout copy): xdrl's use of it (one set of statistics over the batch, shared frozen
    with the evaluation env) is tested in tests/test_observation_norm.py. Other warnings pass."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", VECNORM_BATCHED_WARNING, UserWarning)
        yield


def _offscreen_sdl() -> None:
    """Off-screen rendering through SDL (pygame's envs: deep-sea-treasure, CartPole...): no
    display, and no sound device, whose probe prints eight ``ALSA lib ... cannot find card`` lines
    on stderr on a machine without one (an evaluation video of deep-sea-treasure did). A value the
    user set is kept."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _missing_dependency(env_id: str, error: Exception) -> ConfigError:
    text = str(error)
    for module, extra in _EXTRA_FOR_MISSING.items():
        if module in text:
            return ConfigError(
                "env.id",
                f"{env_id} needs an optional package ({module}); install it with "
                f"`pip install 'xdrl[{extra}]'`",
            )
    return ConfigError("env.id", f"{env_id} cannot be created: {first_line(error)}")


def _make_base(
    env_id: str,
    *,
    multi_objective: bool,
    device: str,
    frame_skip: int,
    max_episode_steps: int | None,
    render: bool,
    make_kwargs: dict[str, Any],
    observation_encoding: str = "none",
    wrap: Callable[[Any], Any] | None = None,
):
    """One TorchRL-wrapped gymnasium env (no batching, no transforms)."""
    import gymnasium
    from torchrl.envs import GymEnv, GymWrapper, MOGymEnv, MOGymWrapper

    kwargs = dict(make_kwargs)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    if render:
        kwargs["render_mode"] = "rgb_array"
        _offscreen_sdl()
    common = {"categorical_action_encoding": True, "frame_skip": frame_skip, "device": device}
    try:
        if observation_encoding != "none" or wrap is not None:  # wrapped before TorchRL sees it
            from xdrl.envs.observation_encoding import encode

            if multi_objective:
                import mo_gymnasium

                kwargs.setdefault("disable_env_checker", True)
                raw = mo_gymnasium.make(env_id, **kwargs)
            else:
                raw = gymnasium.make(env_id, **kwargs)
            raw = encode(wrap(raw) if wrap is not None else raw, observation_encoding)
            return (MOGymWrapper if multi_objective else GymWrapper)(raw, **common)
        cls = MOGymEnv if multi_objective else GymEnv
        return cls(env_id, **common, **kwargs)
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
    observation_encoding: str = "none",
    wrap: Callable[[Any], Any] | None = None,
):
    """``num_envs`` gymnasium envs as one :class:`~xdrl.envs.vector_env.VectorGymEnv`, or None when
    their spaces are not plain arrays (Dict/Tuple observations: the caller falls back to serial)."""
    import gymnasium

    from xdrl.envs.vector_env import UnsupportedSpaceError, VectorGymEnv

    kwargs = dict(make_kwargs)  # the same gymnasium.make arguments as _make_base
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    if render:
        kwargs["render_mode"] = "rgb_array"
        _offscreen_sdl()
    try:
        return VectorGymEnv(
            env_id,
            num_envs,
            make_kwargs=kwargs,
            frame_skip=frame_skip,
            device=device,
            observation_encoding=observation_encoding,
            wrap=wrap,
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
    if sum(values) <= 0:
        raise ConfigError(
            key,
            f"weights must have a positive sum, got {values} (sum {sum(values)}); "
            f"pass e.g. {[round(1 / reward_dim, 3)] * reward_dim}",
        )
    return values


def is_image_shape(shape: Sequence[int]) -> bool:
    """Whether an (unbatched) observation shape is an image or a stack of images: 3-D
    (``[C, H, W]``, ``[H, W, C]``, a grayscale stack) or 4-D (a stack of colour images)."""
    return len(shape) in (3, 4)


def _observation_casts(spec) -> list:
    """Transforms that turn integer or float64 observations into float32 for the networks;
    uint8 images stay uint8 (the network scales them: 4x less memory in batches and buffers)."""
    import torch
    from torchrl.envs import DTypeCastTransform

    batch_dims = len(spec.shape)
    casts = []
    for key, leaf in spec.items(include_nested=True, leaves_only=True):
        image = leaf.dtype == torch.uint8 and is_image_shape(leaf.shape[batch_dims:])
        if leaf.dtype != torch.float32 and not image:
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
    observation_encoding: Literal["none", "one_hot"] = "none",
    make_kwargs: dict[str, Any] | None = None,
    import_modules: Sequence[str] = (),
    seed: int | None = None,
    device: str = "cpu",
    render: bool = False,
    evaluation: bool = False,
    frame_stack: PositiveInt = 1,
    mask_observations: Sequence[NonNegativeInt] | None = None,
    pareto: dict[str, Any] | None = None,
):
    """Build a batched TorchRL env for a gymnasium or MO-Gymnasium id.

    Transforms, in order: float32 observations, ``StepCounter`` (episode lengths),
    ``RewardSum`` on the raw reward (so per-objective returns come from the vector reward),
    ``LineariseRewards`` with ``reward_weights`` on multi-objective envs (the training reward),
    ``InitTracker``, and optionally ``VecNormV2`` on observations. Continuous (Box) actions are
    clipped to their bounds before each gymnasium step (:mod:`xdrl.envs.action_clip`).

    Args:
        id: registered gymnasium or MO-Gymnasium id.
        num_envs: environments stepped together (batch dimension of every step).
        batching: ``vector`` (one TorchRL env over N gymnasium envs, numpy batching; fastest),
            ``serial`` (``SerialEnv`` of ``GymEnv``) or ``parallel`` (processes).
        max_episode_steps: time limit override.
        frame_skip: action repeat.
        reward_weights: scalarization weights (multi-objective only); equal weights when None.
        normalize_observations: add running observation normalization.
        observation_encoding: ``none`` or ``one_hot`` (a ``Discrete``, ``MultiDiscrete`` or
            bounded integer ``Box`` observation as the one-hot vector of its joint state, see
            :mod:`xdrl.envs.observation_encoding`).
        make_kwargs: extra ``gymnasium.make`` keyword arguments.
        import_modules: modules to import first, for the env ids they register (third-party
            packages, a user's own envs); ``id`` may also name one, gymnasium's ``module:EnvId``.
        seed: seed of the first sub-env (the others follow).
        device: device of the env's tensors.
        render: create the envs with ``render_mode="rgb_array"`` (evaluation videos).
        evaluation: an evaluation env (set by xdrl; the same env here, Atari's differs).
        frame_stack: stack the last k image observations (gymnasium's
            ``FrameStackObservation``; image observations only).
        mask_observations: observation entries always zero (partial observability, e.g. ``[1,
            3]``: CartPole without its velocities; :mod:`xdrl.envs.masking`).
        pareto: the env's Pareto-report settings (``ref_point``), read by :mod:`xdrl.pareto`
            from the saved config; not used to build the env.

    Example:
        >>> env = make_env("CartPole-v1", num_envs=4, seed=0)
        >>> env.rollout(3).batch_size
        torch.Size([4, 3])
    """
    wrap = None
    if frame_stack > 1:
        wrap = functools.partial(_stack_frames, frame_stack=frame_stack)
    if mask_observations:
        wrap = functools.partial(_masked, indices=tuple(mask_observations), then=wrap)
    return build_env(
        id,
        num_envs=num_envs,
        batching=batching,
        max_episode_steps=max_episode_steps,
        frame_skip=frame_skip,
        reward_weights=reward_weights,
        normalize_observations=normalize_observations,
        observation_encoding=observation_encoding,
        make_kwargs=make_kwargs,
        import_modules=import_modules,
        seed=seed,
        device=device,
        render=render,
        wrap=wrap,
    )


def _masked(env: Any, *, indices: tuple[int, ...], then: Callable[[Any], Any] | None) -> Any:
    """``env`` with ``indices`` of its observations zeroed, then ``then`` (picklable)."""
    from xdrl.envs.masking import mask_observations

    masked = mask_observations(env, indices)
    return then(masked) if then is not None else masked


def _clipped_actions(env: Any, *, then: Callable[[Any], Any] | None) -> Any:
    """``env``'s continuous actions clipped to its bounds
    (:class:`~xdrl.envs.action_clip.ClipActionToBounds`), then ``then`` (picklable)."""
    from xdrl.envs.action_clip import clip_box_actions

    clipped = clip_box_actions(env)
    return then(clipped) if then is not None else clipped


def _guarded(env: Any, *, env_id: str, then: Callable[[Any], Any] | None) -> Any:
    """``then(env)`` (or ``env``) inside a :class:`~xdrl.envs.faults.GuardedEnv`: its
    exceptions and NaN/inf outputs become one line (picklable, for ``ParallelEnv``)."""
    from xdrl.envs.faults import GuardedEnv

    return GuardedEnv(then(env) if then is not None else env, env_id)


def _stack_frames(env: Any, *, frame_stack: int) -> Any:
    """gymnasium's ``FrameStackObservation`` (one picklable wrapping function)."""
    from gymnasium.wrappers import FrameStackObservation

    return FrameStackObservation(env, frame_stack)


def build_env(
    id: str,  # noqa: A002
    *,
    num_envs: int = 1,
    batching: str = "serial",
    max_episode_steps: int | None = None,
    frame_skip: int = 1,
    reward_weights: Sequence[float] | None = None,
    normalize_observations: bool = False,
    observation_encoding: str = "none",
    make_kwargs: dict[str, Any] | None = None,
    import_modules: Sequence[str] = (),
    seed: int | None = None,
    device: str = "cpu",
    render: bool = False,
    wrap: Callable[[Any], Any] | None = None,
):
    """:func:`make_env`'s work, with ``wrap`` applied to every gymnasium env after
    ``gymnasium.make`` (Atari's preprocessing, a frame stack: a picklable callable), then
    ``observation_encoding``. Continuous actions are clipped to the bounds below ``wrap``
    (:class:`~xdrl.envs.action_clip.ClipActionToBounds`)."""
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

    import_env_modules(import_modules)
    check_env_id(id)
    wrap = functools.partial(_clipped_actions, then=wrap)
    multi_objective = is_multi_objective(id)
    if reward_weights is not None and not multi_objective:
        raise ConfigError("env.reward_weights", f"{id} has a scalar reward; set it to null")

    def make_one():
        import_env_modules(import_modules)  # again in a worker process (batching=parallel)
        return _make_base(
            id,
            multi_objective=multi_objective,
            wrap=functools.partial(_guarded, env_id=_bare_id(id), then=wrap),
            device=device,
            frame_skip=frame_skip,
            max_episode_steps=max_episode_steps,
            render=render,
            make_kwargs=dict(make_kwargs or {}),
            observation_encoding=observation_encoding,
        )

    base = None
    if batching == "vector":
        base = _make_vector(
            _bare_id(id),  # module imported above; VectorGymEnv looks the id up in the registry
            num_envs,
            device=device,
            frame_skip=frame_skip,
            max_episode_steps=max_episode_steps,
            render=render,
            make_kwargs=dict(make_kwargs or {}),
            observation_encoding=observation_encoding,
            wrap=wrap,
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
    with quiet_vecnorm_note():
        env = TransformedEnv(base, Compose(*transforms))  # evaluation: collector.fast_rollouts
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
