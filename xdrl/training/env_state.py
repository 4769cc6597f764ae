"""What a checkpoint must hold beyond TorchRL's components for a resume to be exact.

TorchRL's ``Checkpoint`` saves the networks, optimizer, replay buffer, trainer counters, the
registered hooks and (``GlobalRNGState``) the python/numpy/torch RNGs. It does not save the
environments: the gymnasium envs' own generators (``np_random``), their state mid-episode
(CartPole's pole, a MuJoCo body's ``qpos``/``qvel`` and solver warm start), their wrappers'
counters (``TimeLimit``'s elapsed steps) nor the collector's episodes in progress (observation,
``StepCounter``/``RewardSum`` values). :class:`EnvState` is a Trainer module that saves all of
that, so a run stopped at a checkpoint and resumed collects the batches the run that was never
stopped collects.

A gymnasium env is saved by pickling it whole, with ``EzPickle`` classes (Box2D, MuJoCo, most
MO-Gymnasium envs) pickled by their attributes rather than their constructor arguments (which
would give a fresh env). Where that fails (Box2D's SWIG objects, a pygame font, an env in
another process under ``batching=parallel``) the resume is approximate: the train envs are
reseeded and the episodes in progress restart; :attr:`EnvState.approximate` says why.

The saved state is one pickle (base64 text in the checkpoint's JSON): checkpoints are the run's own
files, verified against their checksums before anything loads.
"""

from __future__ import annotations

import base64
import io
import logging
import multiprocessing
import pickle
from typing import Any

from torchrl.collectors import Collector
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv, TransformedEnv
from torchrl.envs.batched_envs import BatchedEnvBase

from xdrl.config import renames
from xdrl.config.errors import first_line
from xdrl.envs.vector_env import VectorGymEnv
from xdrl.lean.collector import VectorCollector

log = logging.getLogger(__name__)

# Saved by an older xdrl: no EnvState component in the checkpoint.
NO_STATE = "the checkpoint holds no environment state (written before exact resume)"


def _rebuild(cls: type, state: dict[str, Any]) -> Any:
    """An object of ``cls`` with attributes ``state`` (the inverse of ``_AttributePickler``)."""
    obj: Any = cls.__new__(cls)  # type: ignore[call-overload]
    obj.__dict__.update(state)
    return obj


def _rebuild_atari(cls: type, args: tuple, kwargs: dict, state: dict[str, Any], ale: Any) -> Any:
    """An ale-py ``AtariEnv`` built with its constructor arguments (a fresh emulator with the
    same game and settings), its attributes restored, then its emulator state (RAM, frame, RNG)."""
    env = cls(*args, **kwargs)
    env.__dict__.update(state)
    env.ale.restoreState(ale)
    return env


def _is_atari(obj: Any) -> bool:
    cls = type(obj)
    return cls.__name__ == "AtariEnv" and cls.__module__.startswith("ale_py")


class _AttributePickler(pickle.Pickler):
    """Pickles ``EzPickle`` objects by their attributes: ``EzPickle`` saves only the constructor
    arguments, so unpickling would build a fresh env and lose the episode in progress. An ale-py
    ``AtariEnv`` holds its emulator in an ``ALEInterface`` that does not pickle: it is saved as
    its constructor arguments, its other attributes and ``ale.cloneState(include_rng=True)``."""

    def reducer_override(self, obj: Any) -> Any:
        from gymnasium.utils import EzPickle

        if _is_atari(obj):
            state = {k: v for k, v in vars(obj).items() if k != "ale"}
            args = (obj._ezpickle_args, obj._ezpickle_kwargs)
            return _rebuild_atari, (type(obj), *args, state, obj.ale.cloneState(include_rng=True))
        if isinstance(obj, EzPickle) and not isinstance(obj, type):
            return _rebuild, (type(obj), vars(obj))
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """``pickle.dumps`` with ``EzPickle`` envs saved by state (see ``_AttributePickler``)."""
    buffer = io.BytesIO()
    _AttributePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _env_name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def gym_envs(env: EnvBase) -> list[Any] | None:
    """The gymnasium envs inside a :func:`xdrl.envs.factory.make_env` env, in batch order (None:
    they
    live in other processes, ``ParallelEnv``)."""
    base = env.base_env if isinstance(env, TransformedEnv) else env
    if isinstance(base, VectorGymEnv):
        return list(base.envs)
    if isinstance(base, ParallelEnv):
        return None
    if isinstance(base, SerialEnv):
        subs = getattr(base, "_envs", None)
        return [sub._env for sub in subs] if subs else None
    inner = getattr(base, "_env", None)
    return [inner] if inner is not None else None


def _closed(env: EnvBase) -> bool:
    """Whether a batched env's sub-envs were closed (``is_closed`` of other envs means nothing:
    a ``VectorGymEnv`` under ``VecNormV2`` reports True while stepping)."""
    base = env.base_env if isinstance(env, TransformedEnv) else env
    return isinstance(base, BatchedEnvBase) and base.is_closed


def _set_gym_envs(env: EnvBase, envs: list[Any]) -> None:
    """Put restored gymnasium envs where :func:`gym_envs` found them."""
    base = env.base_env if isinstance(env, TransformedEnv) else env
    if isinstance(base, VectorGymEnv):
        base.replace_envs(envs)
    elif isinstance(base, SerialEnv):
        for sub, inner in zip(base._envs, envs, strict=True):
            sub._env = inner
    else:
        base._env = envs[0]


def _train_state(env: EnvBase, collector: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The train envs and the collector's episodes in progress, or (None, why not)."""
    if getattr(collector, "saves_episodes", False):  # its own state_dict holds them (workers)
        return None, None
    if _closed(env):  # TorchRL's Collector closes them with its last batch
        return None, "the train envs were closed after the collector's last batch"
    envs = gym_envs(env)
    if envs is None:
        return None, f"{type(env.base_env).__name__}'s envs run in other processes"
    if isinstance(collector, VectorCollector):
        episodes: Any = collector.episode_state()
    elif isinstance(collector, Collector):
        episodes = collector._carrier.clone()
    else:
        return None, f"{type(collector).__name__} keeps no reachable episode state"
    try:
        pickled = [dumps(e) for e in envs]
    except Exception as err:  # noqa: BLE001 - any env may hold an object that does not pickle
        return None, f"{_env_name(envs[0])} cannot be saved mid-episode ({first_line(err)})"
    base = env.base_env if isinstance(env, TransformedEnv) else env
    flags = base.flags_state() if isinstance(base, VectorGymEnv) else None
    return {"envs": pickled, "flags": flags, "episodes": episodes}, None


def _eval_state(env: EnvBase | None) -> tuple[dict[str, Any] | None, str | None]:
    """The evaluation envs' generators (each evaluation starts from an unseeded reset) and their
    transforms' state (a ``VecNormV2``'s statistics)."""
    if env is None:
        return {}, None
    envs = None if _closed(env) else gym_envs(env)
    if envs is None:
        return None, "the evaluation envs run in other processes"
    transform = env.transform.state_dict() if isinstance(env, TransformedEnv) else {}
    return {"generators": [e.unwrapped.np_random for e in envs], "transform": transform}, None


def _load_eval_state(env: EnvBase, state: dict[str, Any]) -> str | None:
    """Restore :func:`_eval_state`; why not, when the evaluation envs changed."""
    envs = gym_envs(env)
    if envs is None or len(envs) != len(state["generators"]):
        return f"eval.episodes changed ({len(state['generators'])} evaluation envs were saved)"
    for inner, generator in zip(envs, state["generators"], strict=True):
        inner.unwrapped.np_random = generator
    if isinstance(env, TransformedEnv) and state["transform"]:
        env.transform.load_state_dict(state["transform"])
    return None


class EnvState:
    """Trainer module saving the train envs (mid-episode), the collector's episodes in progress
    and the evaluation envs' generators; its :meth:`load_state_dict` puts them back.

    Args:
        train_env: the collector's env (a :func:`xdrl.envs.factory.make_env` env).
        collector: xdrl's ``VectorCollector`` or TorchRL's ``Collector`` over ``train_env``.
        eval_env: the evaluation env, or None.

    Example:
        >>> state = EnvState(train_env, collector, eval_env)
        >>> trainer.register_module("env_state", state)  # saved and loaded with the Trainer
        >>> state.approximate  # after a load: None, or why the resume is not exact
    """

    def __init__(self, train_env: EnvBase, collector: Any, eval_env: EnvBase | None = None):
        self.train_env = train_env
        self.collector = collector
        self.eval_env = eval_env
        self.approximate: str | None = NO_STATE
        # why the last state_dict is incomplete (None: it is not)
        self.saved_note: str | None = None
        self.train_restored = False
        self._warned = False

    def state_dict(self) -> dict[str, Any]:
        """One pickle of the train and evaluation env state, with why it is incomplete."""
        train, train_why = _train_state(self.train_env, self.collector)
        evaluation, eval_why = _eval_state(self.eval_env)
        why = "; ".join(w for w in (train_why, eval_why) if w) or None
        self.saved_note = why
        # Said by the run's own process only: each collector worker saves its envs too, and
        # printed the line bare on stderr, once per worker; the run says it when it resumes.
        in_worker = multiprocessing.parent_process() is not None
        if why and not self._warned and not _closed(self.train_env) and not in_worker:
            log.warning("A resume from this run's checkpoints will be approximate: %s", why)
            self._warned = True
        blob = dumps({"train": train, "eval": evaluation, "approximate": why})
        # text, not a tensor: TorchRL writes it into the component's JSON with a plain write,
        # which fails with ENOSPC on a full disk; a memory-mapped tensor file dies of SIGBUS
        return {"blob": base64.b64encode(blob).decode("ascii")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Put the saved envs, episodes and generators back (what was saved of them)."""
        blob = base64.b64decode(state_dict["blob"])
        saved = renames.loads(blob)  # the run's own checkpoint, verified
        train, evaluation = saved["train"], saved["eval"]
        if train is not None:
            self._load_train(train)
        why = [saved["approximate"]]
        if evaluation and self.eval_env is not None:
            why.append(_load_eval_state(self.eval_env, evaluation))
        self.train_restored = train is not None
        self.approximate = "; ".join(w for w in why if w) or None

    def _load_train(self, train: dict[str, Any]) -> None:
        envs = [renames.loads(b) for b in train["envs"]]  # the run's own, verified
        old = gym_envs(self.train_env) or []
        _set_gym_envs(self.train_env, envs)
        for env in old:
            env.close()
        base = (
            self.train_env.base_env
            if isinstance(self.train_env, TransformedEnv)
            else self.train_env
        )
        if isinstance(base, VectorGymEnv) and train["flags"] is not None:
            base.load_flags_state(train["flags"])
        if isinstance(self.collector, VectorCollector):
            self.collector.load_episode_state(train["episodes"])
        elif isinstance(self.collector, Collector):
            self.collector._carrier.update(train["episodes"])
