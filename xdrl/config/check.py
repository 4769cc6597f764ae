"""Typed, ranged config check: every value is checked before anything heavy is imported or built.

A bad value fails as one :class:`~xdrl.config.errors.ConfigError` (``<key>: <what is wrong>; <how to
fix>``), which the CLI prints as one line on stderr with exit code 2.

Where the schema lives (one signature per group, no mirror table):

- the top-level keys, ``algorithm.*``, ``eval.*``, ``checkpoint.*`` and ``logging.*``: the
  classes of :mod:`xdrl.config.settings` (``eval``, ``checkpoint`` and ``logging`` name theirs as
  their
  ``_target_``); the example in a fix is the key's value in the composed default config;
- ``env.*`` and ``algorithm.build.*``: the signature of the function their ``_target_`` names
  (``xdrl.envs.factory.make_env``, ``xdrl.algorithms.<name>.build``), with the range types of
  :mod:`xdrl.config.types` (``gamma: Discount``); the example is the parameter's default;
- ``pareto.*``: the signature of ``pareto._target_``
  (:func:`hydra_plugins.xdrl_pareto.settings.pareto_settings`: the sweeper owns its settings);
- ``algorithm.optimizer.*``: the ranges of torch's optimizers (``OPTIMIZER_KEYS`` below).

Builders trust what was checked here and do not check ranges again. Signatures are read without
importing their modules (the algorithm modules import torch): the ``def`` (or the dataclass) is
parsed from its source file with :mod:`ast` and each annotation is evaluated against the range
types only (an annotation that needs anything else counts as ``Any``);
``tests/test_config_errors.py`` checks that this reading equals ``typing.get_type_hints``.
Values are validated with pydantic in strict mode, so ints stay ints (``total_frames=2048.7`` is
an error, not a rounding).

Only :func:`check_device` imports torch, and only for a device other than ``cpu``; the env check
creates the env once with ``gymnasium.make`` (its observation space). Nothing here creates a file
or a folder.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import logging
import os
import re
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from xdrl.config.errors import ConfigError
from xdrl.config.signatures import read_signature
from xdrl.config.spec import RunSpec, composed_defaults
from xdrl.config.types import Fraction, NonNegativeFloat, PositiveFloat
from xdrl.envs.atari import check_atari, is_atari_id
from xdrl.envs.factory import check_env, is_image_shape
from xdrl.envs.masking import check_mask

log = logging.getLogger(__name__)

ATARI_FACTORY = "xdrl.envs.atari.make_atari_env"

_STRICT = ConfigDict(strict=True)

# A budget the warm-up refusal suggests: this many times the warm-up (RL-Zoo's CartPole DQN warms
# up for 1,000 of 50,000 steps; a tenth is a short run that still trains).
WARM_UP_SHARE = 10

# Device types torch knows (the light check); check_device then asks torch what this machine has.
DEVICE_PATTERN = r"^(cpu|cuda|mps|xpu|hip|hpu|mtia|meta|xla|ipu|privateuseone)(:\d+)?$"

# The settings class each group is checked against (a group's own _target_ wins), in check order.
SETTINGS = {
    "": "xdrl.config.settings.RunSettings",
    "eval": "xdrl.config.settings.EvalSettings",
    "checkpoint": "xdrl.config.settings.CheckpointSettings",
    "collector": "xdrl.config.settings.CollectorSettings",
    "logging": "xdrl.config.settings.LoggingSettings",
    "algorithm": "xdrl.config.settings.AlgorithmSettings",
}
# Optimizer keys of torch.optim classes that have a range; others go to the class unchecked.
OPTIMIZER_KEYS: dict[str, tuple[Any, Any]] = {
    "lr": (PositiveFloat, 3.0e-4),
    "eps": (PositiveFloat, 1.0e-8),
    "weight_decay": (NonNegativeFloat, 0.0),
    "momentum": (NonNegativeFloat, 0.9),
    "alpha": (Fraction, 0.99),
    "betas": (
        Annotated[list[Annotated[float, Field(ge=0, lt=1)]], Field(min_length=2, max_length=2)],
        "[0.9, 0.999]",
    ),
    "fused": (bool | None, "true"),
    "foreach": (bool | None, "null"),
    "amsgrad": (bool, "false"),
    "nesterov": (bool, "false"),
    "centered": (bool, "false"),
}
# Arguments the builders receive from xdrl, not from YAML.
SUPPLIED = {
    "env": {"seed": "seed", "device": "device", "render": "eval.render", "evaluation": "xdrl"},
    "algorithm.build": {
        "env": "env",
        "frames_per_batch": "frames_per_batch",
        "device": "device",
        "total_frames": "total_frames",  # only to builders that take it (DQN's buffer_size: all)
        "frame_skip": "env.frame_skip",  # only to builders that take it (DQN's buffer_size: all)
        "lean": "lean",  # only to builders that take it (TorchRL's originals when false)
    },
}
# Evaluation metric names (xdrl.trainer_hooks.logging._common; not imported: it imports torch).
EVAL_SUBGROUPS = ("deterministic", "stochastic")
STATS = ("min", "mean", "max")


def check_config(cfg: DictConfig) -> RunSpec:
    """Check every key of a composed run config and return its :class:`RunSpec` (the one typed
    reading of it); raises :class:`ConfigError` on the first bad one.

    Imports no torch unless ``device`` is not ``cpu``; creates nothing on disk; ``cfg`` is not
    changed.

    Example:
        >>> check_config(compose("config", overrides=["total_frames=abc"]))
        Traceback (most recent call last):
        xdrl.config.errors.ConfigError: total_frames: got 'abc' (str), not an integer; set an ...
    """
    for key in _missing(cfg):
        raise ConfigError(key, f"required but not set (???); set {key}=<value>")
    _check_recurrent(cfg)  # before the keys: a builder without the key gets a clearer line
    for group in SETTINGS:
        _check_group(cfg, group, _settings_schema(cfg, group), closed=True)
    _check_group(cfg, "algorithm.optimizer", OPTIMIZER_KEYS, closed=False)
    check_extras(cfg)
    _check_target(cfg, "env")
    if str(cfg.env._target_) == ATARI_FACTORY:
        check_atari(str(cfg.env.id))
    else:
        _check_not_atari(str(cfg.env.id))
    shape = check_env(
        str(cfg.env.id),
        _value(cfg, "env.import_modules") or [],
        _value(cfg, "env.make_kwargs"),
        _value(cfg, "env.reward_weights"),
        _value(cfg, "env.observation_encoding") or "none",
    )
    _check_target(cfg, "algorithm.build")
    _check_observations(cfg, shape)
    _check_mask(cfg, shape)
    _check_target(cfg, "pareto")  # hydra_plugins.xdrl_pareto.settings.pareto_settings
    _check_sizes(cfg)
    _check_collector(cfg)
    _check_threads(cfg)
    _check_budget(cfg)
    _check_objective(cfg)
    _check_paths(cfg)
    check_environment_variables(cfg)
    check_device(cfg.device)
    return RunSpec.of(cfg)


# Values


def _missing(node: DictConfig, prefix: str = "") -> list[str]:
    """Keys left at ``???`` (e.g. ``env.id`` of ``env=gym``), without resolving anything."""
    keys = []
    for name in map(str, node):
        if OmegaConf.is_missing(node, name):
            keys.append(f"{prefix}{name}")
        elif not OmegaConf.is_interpolation(node, name):
            child = node._get_node(name)
            if isinstance(child, DictConfig):
                keys += _missing(child, f"{prefix}{name}.")
    return keys


def _value(cfg: DictConfig, key: str) -> Any:
    """The plain Python value at ``key`` (interpolations resolved; containers as dict/list)."""
    node = OmegaConf.select(cfg, key, throw_on_missing=False)
    if isinstance(node, DictConfig | ListConfig):
        try:
            return OmegaConf.to_container(node, resolve=True)
        except Exception:  # noqa: BLE001 - ${hydra:...} inside: the container's shape suffices
            return OmegaConf.to_container(node, resolve=False)
    return node


def _resolvable(cfg: DictConfig, key: str) -> bool:
    """Whether ``key`` resolves here (``${hydra:...}`` does not before Hydra starts the job)."""
    try:
        OmegaConf.select(cfg, key, throw_on_missing=True)
    except Exception:  # noqa: BLE001 - any resolver failure: the key is not checkable yet
        return False
    return True


FROM_DEFAULTS = object()  # check_value's example: the key's value in the composed defaults


def default_value(key: str) -> Any:
    """``key``'s value in the default config (``xdrl-train`` with no overrides); None where it is
    null, not there, or only resolvable inside a run (``${hydra:...}``)."""
    defaults = composed_defaults()
    if defaults is None or not _resolvable(defaults, key):
        return None
    return _value(defaults, key)


def check_value(key: str, value: Any, annotation: Any, example: Any = None) -> Any:
    """Validate ``value`` against ``annotation`` (strict: no int from float, no str to number);
    ``example`` goes into the fix (:data:`FROM_DEFAULTS`: the key's default)."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return value
    adapter = TypeAdapter(annotation, config=_STRICT)
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError as err:
        expected = _describe(adapter.json_schema())
        if example is FROM_DEFAULTS:
            example = default_value(key)
        fix = f"set {expected}" + (f", e.g. {key}={_show(example)}" if example is not None else "")
        raise ConfigError(key, f"{_what_is_wrong(value, err)}; {fix}") from err


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


_REASONS = {
    "greater_than": "too small",
    "greater_than_equal": "too small",
    "less_than": "too large",
    "less_than_equal": "too large",
    "finite_number": "not finite",
    "literal_error": "not one of the options",
    "string_too_short": "empty",
    "too_short": "too short",
    "too_long": "too long",
}


def _what_is_wrong(value: Any, err: ValidationError) -> str:
    """'got 'abc' (str), not an integer', 'got [1, 'a'] (list): item 1 ('a') not a number'."""
    first = err.errors()[0]
    kind = first["type"]
    reason = _REASONS.get(kind, "of the wrong type")
    if kind.startswith("int_"):
        reason = "not an integer"
    elif kind.startswith("float_"):
        reason = "not a number"
    elif kind.startswith("bool_"):
        reason = "not true or false"
    elif kind.startswith("string_type"):
        reason = "not a string"
    where = [str(p) for p in first["loc"] if isinstance(p, int)]
    item = f": item {where[0]} ({first['input']!r})" if where else ","
    return f"got {value!r} ({type(value).__name__}){item} {reason}"


def _describe(schema: Mapping[str, Any]) -> str:
    """A JSON schema (from pydantic) in a few words: 'an integer >= 1', 'a number in (0, 1]'."""
    if "anyOf" in schema:
        return " or ".join(_describe(s) for s in schema["anyOf"])
    if "enum" in schema or "const" in schema:
        options = schema.get("enum", [schema.get("const")])
        return "one of " + ", ".join(repr(o) for o in options)
    kind = schema.get("type")
    if kind in ("integer", "number"):
        noun = "an integer" if kind == "integer" else "a number"
        return noun + _bounds(schema)
    if kind == "boolean":
        return "true or false"
    if kind == "null":
        return "null"
    if kind == "string":
        return "a non-empty string" if schema.get("minLength") else "a string"
    if kind == "array":
        items = schema.get("prefixItems")
        if items:
            return f"a list of {len(items)} items, each " + _describe(items[0])
        return "a list, each item " + _describe(schema.get("items", {}))
    if kind == "object":
        return "a mapping"
    return "a value of the declared type"


def _bounds(schema: Mapping[str, Any]) -> str:
    low = ("[", schema["minimum"]) if "minimum" in schema else None
    low = ("(", schema["exclusiveMinimum"]) if "exclusiveMinimum" in schema else low
    high = ("]", schema["maximum"]) if "maximum" in schema else None
    high = (")", schema["exclusiveMaximum"]) if "exclusiveMaximum" in schema else high
    if low and high:
        return f" in {low[0]}{low[1]}, {high[1]}{high[0]}"
    if low:
        return f" {'>=' if low[0] == '[' else '>'} {low[1]}"
    if high:
        return f" {'<=' if high[0] == ']' else '<'} {high[1]}"
    return ""


# Groups checked against a table (pareto) or a settings class (xdrl.config.settings)


def _settings_schema(cfg: DictConfig, group: str) -> dict[str, tuple[Any, Any]]:
    """``{key: (annotation, FROM_DEFAULTS)}`` from the group's settings class (its ``_target_``,
    else :data:`SETTINGS`)."""
    node = OmegaConf.select(cfg, group) if group else cfg
    target = SETTINGS[group]
    if group and isinstance(node, DictConfig) and "_target_" in node:
        target = str(node._target_)
    read = read_signature(target)
    if read is None:
        raise ConfigError(
            f"{group}._target_", f"{target!r} is not a readable class; set {SETTINGS[group]}"
        )
    return {name: (param.annotation, FROM_DEFAULTS) for name, param in read[0].items()}


def _check_group(
    cfg: DictConfig, group: str, schema: Mapping[str, tuple[Any, Any]], *, closed: bool
) -> None:
    node = OmegaConf.select(cfg, group) if group else cfg
    if not isinstance(node, DictConfig):
        return
    prefix = f"{group}." if group else ""
    for name in map(str, node):
        key = f"{prefix}{name}"
        if name.startswith("_") or (not group and name == "hydra"):
            continue
        if name not in schema:
            if closed:
                raise ConfigError(key, _not_a_key(name, list(schema), prefix))
            continue
        if not _resolvable(cfg, key):
            continue
        annotation, example = schema[name]
        check_value(key, _value(cfg, key), annotation, example)


def _not_a_key(name: str, known: Sequence[str], prefix: str) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {prefix}{close[0]}?" if close else f"keys here: {', '.join(known)}"
    return f"not a config key; {hint}"


# Groups whose schema is a builder's signature


def _check_target(cfg: DictConfig, group: str) -> None:
    """Every key under ``group`` is a parameter of its ``_target_`` and fits its annotation."""
    node = OmegaConf.select(cfg, group)
    if not isinstance(node, DictConfig) or "_target_" not in node:
        return
    target = str(node._target_)
    read = read_signature(target)
    if read is None:
        return  # instantiation reports an unreadable target with the key's name
    params, takes_kwargs = read
    supplied = SUPPLIED.get(group, {})
    for name in map(str, node):
        key = f"{group}.{name}"
        if name.startswith("_"):
            continue
        if name in supplied:
            raise ConfigError(key, f"set by xdrl from {supplied[name]}; remove it from {group}")
        if name not in params:
            if takes_kwargs:
                continue
            known = [p for p in params if p not in supplied]
            foreign = _other_algorithms_keys(node, params, target) if group == ALGO_GROUP else ""
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {group}.{close[0]}?" if close else f"parameters: {known}"
            raise ConfigError(key, f"not a parameter of {target}; {foreign or hint}")
        if _resolvable(cfg, key):
            param = params[name]
            default = param.default if param.default is not inspect.Parameter.empty else None
            check_value(key, _value(cfg, key), param.annotation, default)


ALGO_GROUP = "algorithm.build"


def _other_algorithms_keys(node: DictConfig, params: Mapping[str, Any], target: str) -> str:
    """When the keys of ``algorithm.build`` that ``target`` lacks are all parameters of other
    algorithms (a preset written for PPO run with ``algorithm=a2c``): which keys, whose, and how
    to drop them; "" otherwise (a typo gets its "did you mean")."""
    from importlib.resources import files

    lacking = [str(n) for n in node if not str(n).startswith("_") and str(n) not in params]
    owners = []
    for entry in sorted(files("xdrl.conf").joinpath("algorithm").iterdir(), key=str):
        other = f"xdrl.algorithms.{entry.name.removesuffix('.yaml')}.build"
        read = read_signature(other) if other != target else None
        if read is not None and all(k in read[0] for k in lacking):
            owners.append(entry.name.removesuffix(".yaml"))
    if not lacking or not owners:
        return ""
    name = target.rsplit(".", 2)[-2]
    removal = " ".join(f"~{ALGO_GROUP}.{k}" for k in lacking)
    what = "parameters" if len(lacking) > 1 else "a parameter"
    return (
        f"the config sets {', '.join(lacking)}: {what} of {' and '.join(owners)}, not of {name} "
        f"(a preset written for another algorithm?); remove {'them' if len(lacking) > 1 else 'it'}"
        f" ({removal}) or use algorithm={' or '.join(owners)}"
    )


# Cross-key checks


def _check_observations(cfg: DictConfig, shape: tuple[int, ...]) -> None:
    """The encoder fits the observations (a CNN for images, an MLP for vectors) and a frame
    stack is only asked of image envs."""
    image = is_image_shape(shape)
    stack = _value(cfg, "env.frame_stack") if "frame_stack" in cfg.env else None
    if stack is not None and stack > 1 and not image:
        raise ConfigError(
            "env.frame_stack",
            f"{cfg.env.id} observes vectors {list(shape)}, not images; stacking frames is for "
            "image observations: set env.frame_stack=1",
        )
    read = read_signature(str(cfg.algorithm.build._target_))
    takes_encoder = read is not None and "encoder" in read[0]
    encoder = _value(cfg, "algorithm.build.encoder") if "encoder" in cfg.algorithm.build else None
    if image and not takes_encoder:
        name = str(cfg.algorithm.build._target_).rsplit(".", 2)[-2]
        raise ConfigError(
            "algorithm",
            f"{name} has no image encoder and {cfg.env.id} observes images {list(shape)}; "
            "use algorithm=ppo, a2c or dqn",
        )
    kind = "images" if image else "vectors"
    if (encoder == "cnn" and not image) or (encoder == "mlp" and image):
        raise ConfigError(
            "algorithm.build.encoder",
            f"{encoder} does not fit {cfg.env.id}, which observes {kind} {list(shape)}; set "
            f"algorithm.build.encoder=auto (or {'cnn' if image else 'mlp'})",
        )


def _check_mask(cfg: DictConfig, shape: tuple[int, ...]) -> None:
    """``env.mask_observations`` names entries of a vector observation."""
    mask = _value(cfg, "env.mask_observations") if "mask_observations" in cfg.env else None
    if mask:
        check_mask(mask, shape, str(cfg.env.id))


def _check_recurrent(cfg: DictConfig) -> None:
    """``algorithm.build.recurrent`` only for builders that take it (PPO, A2C)."""
    build = cfg.algorithm.build
    if not _recurrent(cfg):
        return
    read = read_signature(str(build._target_))
    if read is None or "recurrent" in read[0]:
        return
    raise ConfigError("algorithm.build.recurrent", _no_recurrent(str(build._target_)))


def _no_recurrent(target: str) -> str:
    name = target.rsplit(".", 2)[-2]
    return (
        f"{name} does not support recurrent policies yet (ppo and a2c do); use "
        "algorithm=ppo or a2c, or remove the key"
    )


def unknown_key_line(key: str, overrides: Sequence[str], config_package: str) -> str:
    """``<key>: <why>; <hint>`` for an override of a key the composed config lacks (Hydra's
    "not in struct"), with hints from the config the other overrides choose: under
    ``algorithm=dqn`` a key of ``algorithm.build`` is matched against DQN's own parameters, and
    ``recurrent`` gets DQN's "does not support recurrent policies" line, with or without ``+``.
    A parameter the builder takes that its YAML leaves out gets ``+key=...``."""
    from hydra import compose, initialize_config_module

    rest = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key]
    try:
        with initialize_config_module(config_package, version_base="1.3"):
            cfg = compose("config", overrides=rest)  # only on an error
    except Exception:  # noqa: BLE001 - another bad override: hint from the defaults alone
        with initialize_config_module(config_package, version_base="1.3"):
            cfg = compose("config")
    group, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, group) if group else None
    if isinstance(node, DictConfig) and "_target_" in node:
        read = read_signature(str(node._target_))
        params = [p for p in read[0] if p not in SUPPLIED.get(group, {})] if read else []
        if name == "recurrent" and read is not None and group == "algorithm.build":
            if name not in params:
                return f"{key}: {_no_recurrent(str(node._target_))}"
        if name in params:
            return f"{key}: a parameter of {node._target_} its config leaves out; use +{key}=..."
        close = difflib.get_close_matches(name, params, n=1)
        if close:
            return f"{key}: not a config key; did you mean {group}.{close[0]}?"
    keys = [k for k in _dotted_keys(OmegaConf.to_container(cfg, resolve=False)) if k != key]
    close = difflib.get_close_matches(key, keys, n=1)
    hint = f"did you mean {close[0]}?" if close else f"to add a new key use +{key}=..."
    return f"{key}: not a config key; {hint}"


def _dotted_keys(node: object, prefix: str = "") -> list[str]:
    """Every key of a nested config, dotted (``algorithm.build.clip_epsilon``)."""
    if not isinstance(node, dict):
        return [prefix.rstrip(".")] if prefix else []
    keys: list[str] = []
    for name, value in node.items():
        keys += _dotted_keys(value, f"{prefix}{name}.") or [f"{prefix}{name}"]
    return keys


def _recurrent(cfg: DictConfig) -> bool:
    """Whether ``algorithm.build.recurrent`` is set (not absent, not null)."""
    build = cfg.algorithm.build
    return "recurrent" in build and _value(cfg, "algorithm.build.recurrent") is not None


def _check_sizes(cfg: DictConfig) -> None:
    num_envs = cfg.env.num_envs
    if cfg.frames_per_batch % num_envs:
        raise ConfigError(
            "frames_per_batch",
            f"{cfg.frames_per_batch} is not a multiple of env.num_envs={num_envs}; "
            f"set e.g. frames_per_batch={max(1, cfg.frames_per_batch // num_envs) * num_envs}",
        )
    _check_rows(cfg)
    if cfg.eval.enabled and not (cfg.eval.deterministic or cfg.eval.stochastic):
        raise ConfigError(
            "eval.deterministic",
            "eval.deterministic and eval.stochastic are both false, so nothing is evaluated; "
            "set one of them true, or eval=none",
        )


def _check_collector(cfg: DictConfig) -> None:
    """Workers share the training envs evenly (each steps ``env.num_envs / workers``); more
    workers than usable cores is allowed, with a warning (waiting envs still overlap)."""
    workers, num_envs = int(cfg.collector.workers), int(cfg.env.num_envs)
    threads = int(cfg.collector.env_threads)
    batching = cfg.env.batching if "batching" in cfg.env else "(none)"
    if threads > 1 and batching != "vector":
        raise ConfigError(
            "collector.env_threads",
            f"{threads} threads step the envs of env.batching=vector only, not {batching}; "
            "set env.batching=vector, or collector.env_threads=1",
        )
    _check_ray(cfg)
    _check_sync(cfg)
    if cfg.collector.backend == "single":
        if workers != 1:
            raise ConfigError(
                "collector.workers",
                f"{workers} workers with collector=single (in-process); set "
                f"collector=multiprocess collector.workers={workers}, or collector.workers=1",
            )
        return
    if num_envs % workers:
        divisors = [d for d in range(2, num_envs + 1) if num_envs % d == 0]
        hint = f"one of {divisors}" if divisors else "collector=single"
        raise ConfigError(
            "collector.workers",
            f"{workers} workers cannot share env.num_envs={num_envs} envs evenly; set "
            f"collector.workers to {hint}, or env.num_envs to a multiple of {workers}",
        )
    if cfg.env.normalize_observations and not cfg.collector.sync:
        raise ConfigError(
            "env.normalize_observations",
            "true with collector.sync=false is not supported (asynchronous workers collect while "
            "the run merges their observations into the statistics, so what each worker "
            "normalizes with would depend on timing); set collector.sync=true, or "
            "env.normalize_observations=false",
        )
    cores = _usable_cores()
    if workers > cores:
        log.warning(
            "collector.workers=%d is more than the %d cores this process may use: workers "
            "share cores (it still pays where envs wait, e.g. on a remote simulator)",
            workers,
            cores,
        )
    if batching == "parallel":
        log.warning(
            "env.batching=parallel inside collector.backend=%s starts a process per env in every "
            "worker (%d worker processes, each with %d env processes; 11 processes on 2 cores "
            "took 66 s to start): set env.batching=vector or serial, the workers already run in "
            "parallel",
            cfg.collector.backend,
            workers,
            num_envs // workers,
        )


def _usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), whatever the load."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def _check_threads(cfg: DictConfig) -> None:
    """Thread counts that cannot help, each one warning line (the run goes on): ``num_threads``
    above the cores this process may use (threads then wait for each other's cores:
    ``num_threads=64`` on 2 cores ran 14x slower), ``collector.env_threads`` above the envs
    one process steps (a thread steps one env at a time; the others idle)."""
    threads = cfg.num_threads
    cores = _usable_cores()
    if isinstance(threads, int) and threads > cores:
        log.warning(
            "num_threads=%d is more than the %d cores this process may use: torch's threads wait "
            "for each other's cores (64 on 2 cores ran 14x slower); set num_threads=auto, or at "
            "most %d",
            threads,
            cores,
            cores,
        )
    env_threads, num_envs = int(cfg.collector.env_threads), int(cfg.env.num_envs)
    per_process = num_envs // max(int(cfg.collector.workers), 1)
    if env_threads > per_process:
        where = "each worker steps" if cfg.collector.backend != "single" else "the run steps"
        log.warning(
            "collector.env_threads=%d is more than the %d envs %s: the extra threads idle; set "
            "collector.env_threads=%d at most",
            env_threads,
            per_process,
            where,
            per_process,
        )


def _check_ray(cfg: DictConfig) -> None:
    """``collector=ray`` has Ray installed, is synchronous, and its ``collector.address`` (a
    running cluster) answers; ``collector.address`` is for ``collector=ray`` only."""
    address = OmegaConf.select(cfg, "collector.address")
    if cfg.collector.backend != "ray":
        if address is not None:
            raise ConfigError(
                "collector.address",
                f"{address} is the Ray cluster of collector=ray, and this run's collector is "
                f"{cfg.collector.backend}; set collector=ray, or remove collector.address",
            )
        return
    hint = extra_hint("collector=ray")
    if hint is not None:
        raise ConfigError("collector", f"collector=ray {hint}")
    if not cfg.collector.sync:
        raise ConfigError(
            "collector.sync",
            "false is not built for collector=ray (a checkpoint needs every actor idle, which "
            "xdrl arranges for asynchronous worker processes only); set collector.sync=true, or "
            "collector=multiprocess for asynchronous workers",
        )
    if address is not None:
        _check_ray_address(str(address))


def _check_ray_address(address: str) -> None:
    """``auto`` (``RAY_ADDRESS``, else the cluster ``ray start`` recorded on this machine) or
    ``host:port`` must accept a TCP connection within 3 s: an unreachable head fails here, not
    after Ray's own minute of retries."""
    given = address
    if address == "auto":
        recorded = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        address = os.environ.get("RAY_ADDRESS", "")
        if not address and recorded.is_file():
            address = recorded.read_text(encoding="utf-8").strip()
        if not address:
            raise ConfigError(
                "collector.address",
                f"auto found no running Ray cluster (RAY_ADDRESS is unset and {recorded} does "
                "not exist); start one with `ray start --head`, pass its host:port, or set "
                "collector.address=null to start Ray inside the run",
            )
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        raise ConfigError(
            "collector.address",
            f"{given} is not auto or host:port (the head's GCS address, e.g. 10.0.0.5:6379); "
            "pass one of those, or null to start Ray inside the run",
        )
    try:
        socket.create_connection((host, int(port)), timeout=3.0).close()
    except OSError as err:
        raise ConfigError(
            "collector.address",
            f"no Ray head answers at {address} ({err.strerror or err}); start it with "
            f"`ray start --head --port {port}`, fix the address, or set collector.address=null "
            "to start Ray inside the run",
        ) from None


def _check_sync(cfg: DictConfig) -> None:
    """``collector.sync: false`` needs workers and an off-policy algorithm (its builder takes a
    replay buffer's ``buffer_size``); ``update_interval`` is its setting only."""
    sync, interval = cfg.collector.sync, int(cfg.collector.update_interval)
    if sync:
        if interval != 1:
            raise ConfigError(
                "collector.update_interval",
                f"{interval} applies to collector.sync=false only (a synchronous collector "
                "pushes the weights before every batch); set collector.sync=false, or "
                "collector.update_interval=1",
            )
        return
    if cfg.collector.backend == "single":
        raise ConfigError(
            "collector.sync",
            "false needs worker processes (collector=single acts with the learner's own "
            "weights); set collector=multiprocess, or collector.sync=true",
        )
    read = read_signature(str(cfg.algorithm.build._target_))
    if read is None or "buffer_size" not in read[0]:
        name = str(cfg.algorithm.build._target_).rsplit(".", 2)[-2]
        raise ConfigError(
            "collector.sync",
            f"false is for off-policy algorithms (dqn, sac, td3), not {name}: an on-policy "
            "batch must come from the current policy, and asynchronous workers collect with "
            "older weights; set collector.sync=true",
        )


def _check_rows(cfg: DictConfig) -> None:
    """A recurrent policy's minibatches are whole env rows (``xdrl.algorithms.recurrent``)."""
    if not _recurrent(cfg):
        return
    build = cfg.algorithm.build
    key = "algorithm.build.minibatch_size"
    minibatch = _value(cfg, key) if "minibatch_size" in build else None
    steps = cfg.frames_per_batch // cfg.env.num_envs
    if minibatch is None or (minibatch % steps == 0 and cfg.frames_per_batch % minibatch == 0):
        return
    raise ConfigError(
        key,
        f"{minibatch} must be a whole number of env rows ({steps} steps each: frames_per_batch="
        f"{cfg.frames_per_batch} over env.num_envs={cfg.env.num_envs}) dividing "
        f"frames_per_batch; recurrent policies train on whole rows, e.g. {key}="
        f"{cfg.frames_per_batch}",
    )


def _check_budget(cfg: DictConfig) -> None:
    """A run that cannot train is a config error: a frame budget that ends inside the algorithm's
    random warm-up.

    Units, as xdrl hands them to TorchRL: ``frames_per_batch`` counts agent steps,
    ``total_frames`` and ``init_random_frames`` count frames, ``frame_skip`` per agent step (the
    Trainer adds ``frames_per_batch * frame_skip`` per batch; xdrl rounds ``total_frames`` up to
    whole batches). TorchRL's Trainer optimizes after a batch once its frames reach
    ``init_random_frames``, so the last batch optimizes exactly when the rounded budget does."""
    key = "algorithm.build.init_random_frames"
    warm_up = _value(cfg, key)
    if warm_up is None:
        read = read_signature(str(cfg.algorithm.build._target_))
        param = read[0].get("init_random_frames") if read else None
        warm_up = param.default if param and isinstance(param.default, int) else 0
    batch = cfg.frames_per_batch * cfg.env.frame_skip  # frames per batch, as the Trainer counts
    frames = -(-cfg.total_frames // batch) * batch  # the budget the run trains (whole batches)
    if frames >= warm_up:
        return
    least = -(-warm_up // batch) * batch  # trains on its last batch only: one round of updates
    suggested = -(-WARM_UP_SHARE * warm_up // batch) * batch
    raise ConfigError(
        "total_frames",
        f"{cfg.total_frames} frames end inside the random warm-up ({key}={warm_up}), so no "
        f"optimizer step would run; set e.g. total_frames={suggested} (the warm-up "
        f"{100 // WARM_UP_SHARE}% of the run; {least} would train on its last batch only), or "
        f"{key}={frames} or less",
    )


def objective_names(cfg: DictConfig) -> list[str]:
    """The evaluation metric names a run of ``cfg`` logs (what ``objective`` may name)."""
    ev = cfg.eval
    if not ev.enabled:
        return []
    subgroups = [
        s for s, on in zip(EVAL_SUBGROUPS, (ev.deterministic, ev.stochastic), strict=True) if on
    ]
    stats = ("mean",) if cfg.logging.reduce_stats is False else STATS
    weights = cfg.env.reward_weights
    objectives = len(weights) if weights is not None else 0
    names = []
    for sub in subgroups:
        base = f"eval/{sub}"
        names += [f"{base}/reward/episode_reward_{s}" for s in stats]
        names.append(f"{base}/episode_len_mean")
        for i in range(objectives):
            names += [f"{base}/reward/objective_{i}/episode_reward_{s}" for s in stats]
    return names


_ANY_OBJECTIVE = re.compile(
    r"^eval/(deterministic|stochastic)/(episode_len_mean|reward/(objective_\d+/)?"
    r"episode_reward_(min|mean|max))$"
)


def _check_objective(cfg: DictConfig) -> None:
    """A name no run can log fails always; one this run does not log fails in an Optuna sweep
    (its trials would train to the end and return nothing)."""
    objective = cfg.objective
    names = objective_names(cfg)
    if _ANY_OBJECTIVE.match(objective) is None:
        default = "eval/deterministic/reward/episode_reward_mean"
        pool = [default, *(n for n in names if n != default)]
        close = difflib.get_close_matches(objective, pool, n=1, cutoff=0.4)
        hint = f"did you mean {close[0]}?" if close else f"e.g. objective={pool[0]}"
        raise ConfigError("objective", f"{objective!r} is not a metric xdrl logs; {hint}")
    if (
        objective in names
        or not _optuna_sweep()
        or cfg.env.reward_weights is None
        and ("/objective_" in objective)
    ):
        return
    reason = "eval is disabled" if not cfg.eval.enabled else "this run does not log it"
    raise ConfigError(
        "objective",
        f"{objective!r} is never logged ({reason}), so every trial would return nothing; "
        f"pick one of {names} or enable the evaluation it needs",
    )


def _optuna_sweep() -> bool:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    sweeper = getattr(HydraConfig.get().sweeper, "_target_", "") or ""
    return "optuna" in str(sweeper).lower()


# Optional packages (the extras of pyproject.toml)

# What each optional feature imports: (the extra that installs it, its modules). A test checks
# that every module comes with its extra's requirements in pyproject.toml.
FEATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "logging=wandb": ("wandb", ("wandb",)),
    "logging=tensorboard": ("tensorboard", ("tensorboard",)),
    "eval=video": ("video", ("moviepy", "imageio", "imageio_ffmpeg", "pygame")),
    "logging.log_model": ("export", ("onnx", "onnxruntime", "onnxscript")),
    "hydra/launcher=joblib": ("sweep", ("hydra_plugins.hydra_joblib_launcher", "joblib")),
    "hydra/launcher=submitit": ("slurm", ("hydra_plugins.hydra_submitit_launcher", "submitit")),
    "hydra/sweeper=optuna": ("sweep", ("optuna", "scipy")),
    "hydra/sweeper=pareto": ("pareto", ("pymoo", "scipy", "matplotlib")),
    "collector=ray": ("ray", ("ray",)),
}
# Options of Hydra's launcher group that only exist once their extra is installed (xdrl's own
# local and slurm presets extend submitit's).
PLUGIN_OPTIONS = {
    "hydra/launcher": {
        "joblib": "hydra/launcher=joblib",
        "submitit_local": "hydra/launcher=submitit",
        "submitit_slurm": "hydra/launcher=submitit",
        "local": "hydra/launcher=submitit",
        "slurm": "hydra/launcher=submitit",
    },
}


def missing_modules(feature: str) -> list[str]:
    """The modules ``feature`` (a key of :data:`FEATURES`) needs and this Python cannot import."""
    missing = []
    for module in FEATURES[feature][1]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package is missing (or blocked)
            found = False
        if not found:
            missing.append(module)
    return missing


def extra_hint(feature: str) -> str | None:
    """``needs the <extra> extra (<modules> not installed); pip install 'xdrl[<extra>]'`` when
    ``feature`` lacks a module (None: nothing missing)."""
    missing = missing_modules(feature)
    if not missing:
        return None
    extra = FEATURES[feature][0]
    return (
        f"needs the {extra} extra ({', '.join(missing)} not installed); pip install 'xdrl[{extra}]'"
    )


def check_extras(cfg: DictConfig) -> None:
    """The logger, the evaluation video and ``logging.log_model`` have their packages, and
    ``log_model`` has the W&B logger it uploads through (without it the flag did nothing)."""
    logger = OmegaConf.select(cfg, "logging.logger")
    target = str(logger.get("_target_")) if isinstance(logger, DictConfig) else ""
    for suffix, feature in (
        ("WandbLogger", "logging=wandb"),
        ("TensorboardLogger", "logging=tensorboard"),
    ):
        hint = extra_hint(feature) if target.endswith(suffix) else None
        if hint is not None:
            raise ConfigError("logging", f"{feature} {hint}")
    hint = extra_hint("eval=video") if cfg.eval.enabled and cfg.eval.render else None
    if hint is not None:
        raise ConfigError("eval.render", f"eval=video {hint}, or set eval=default")
    if not OmegaConf.select(cfg, "logging.log_model", default=False):
        return
    if not target.endswith("WandbLogger"):
        name = target.rsplit(".", 1)[-1] or "none"
        raise ConfigError(
            "logging.log_model",
            f"uploads the policy to W&B, and this run's logger is {name}; set logging=wandb, or "
            "logging.log_model=false",
        )
    hint = extra_hint("logging.log_model")
    if hint is not None:
        raise ConfigError("logging.log_model", f"exports the policy as ONNX and {hint}")


def check_launch_plugins(hydra_cfg: DictConfig) -> None:
    """A sweep's launcher and sweeper have their packages and the Optuna sweeper's sampler and
    pruner exist (checked before Hydra starts them)."""
    for group, features in (
        ("launcher", ("hydra/launcher=joblib", "hydra/launcher=submitit")),
        ("sweeper", ("hydra/sweeper=optuna", "hydra/sweeper=pareto")),
    ):
        target = str(OmegaConf.select(hydra_cfg, f"{group}._target_", default="") or "")
        for feature in features:
            if feature.rpartition("=")[2] in target.lower():
                hint = extra_hint(feature)
                if hint is not None:
                    raise ConfigError(f"hydra/{group}", f"{feature} {hint}")
    check_optuna_parts(hydra_cfg)


def check_optuna_parts(hydra_cfg: DictConfig) -> None:
    """The Optuna sweeper's sampler and pruner name classes that exist (checked before Hydra
    instantiates the sweeper, whose error for a missing class is a multi-line trace)."""
    sweeper = str(OmegaConf.select(hydra_cfg, "sweeper._target_", default="") or "")
    if "xdrl_optuna" not in sweeper:
        return
    import importlib
    import importlib.resources

    for part in ("sampler", "pruner"):
        target = OmegaConf.select(hydra_cfg, f"sweeper.{part}._target_", default=None)
        if not isinstance(target, str):
            continue
        module, _, name = target.rpartition(".")
        try:
            found = hasattr(importlib.import_module(module), name) if module else False
        except ImportError:
            found = False
        if not found:
            folder = importlib.resources.files("xdrl.conf") / "hydra" / "sweeper" / part
            names = sorted(p.name.removesuffix(".yaml") for p in folder.iterdir()
                           if p.name.endswith(".yaml"))  # fmt: skip
            raise ConfigError(
                f"hydra.sweeper.{part}._target_",
                f"{target} does not exist; pick hydra/sweeper/{part}={'|'.join(names)}",
            )


def plugin_option_hint(group: str, option: str) -> str | None:
    """The extra to install for a launcher option Hydra does not find (None: not a plugin's)."""
    feature = PLUGIN_OPTIONS.get(group, {}).get(option)
    return None if feature is None else extra_hint(feature)


def _check_not_atari(env_id: str) -> None:
    """An Atari id goes through ``env=atari`` (its preprocessing: 84x84 grey frames, a frame
    stack, frame skip); ``env=gym`` would train on raw 210x160 RGB screens at a few frames/s."""
    bare = env_id.rpartition(":")[2]
    if not (is_atari_id(env_id) or "NoFrameskip-v" in bare):
        return
    missing = importlib.util.find_spec("ale_py") is None
    extra = " (after pip install 'xdrl[atari]')" if missing else ""
    raise ConfigError(
        "env.id",
        f"{env_id} is an Atari game, which needs Atari preprocessing (grey 84x84 frames, frame "
        f"skip and stack); set env=atari env.id={bare}{extra}",
    )


# Paths and devices


def _check_paths(cfg: DictConfig) -> None:
    resume = cfg.resume
    if resume is not None and resume != "never":
        path = Path(str(resume)).expanduser()
        if not path.exists():
            raise ConfigError("resume", f"{path} does not exist; pass a checkpoint or run dir")
        if not path.is_dir():
            raise ConfigError(
                "resume", f"{path} is a file; pass a checkpoint dir or a run dir instead"
            )
    if _resolvable(cfg, "run_dir"):
        check_writable_dir(str(cfg.run_dir), "run_dir")


def check_writable_dir(path: str, key: str) -> None:
    """``path`` is a writable folder, or can be created (its nearest existing parent is a
    writable folder); creates nothing."""
    target = Path(path).expanduser().absolute()
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is a file" if probe == target else f"cannot be created: {probe} is a file"
        raise ConfigError(key, f"{target} {what}; pick a folder path")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "is read-only" if probe == target else f"cannot be created: {probe} is read-only"
        raise ConfigError(key, f"{target} {what}; pick a writable folder")


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_WANDB_MODES = ("online", "offline", "disabled", "dryrun", "run", "shared")


def check_environment_variables(cfg: DictConfig) -> None:
    """Environment variables xdrl's libraries read at start-up: ``RL_LOGGING_LEVEL`` (TorchRL's
    log level, read when TorchRL is imported) and, with the W&B logger, ``WANDB_MODE``."""
    level = os.environ.get("RL_LOGGING_LEVEL")
    if level is not None and not isinstance(logging.getLevelName(level), int):
        raise ConfigError(
            "RL_LOGGING_LEVEL",
            f"environment variable is {level!r}, not a log level; set one of "
            f"{', '.join(_LOG_LEVELS)}, or unset it",
        )
    logger = OmegaConf.select(cfg, "logging.logger")
    target = str(logger.get("_target_")) if isinstance(logger, DictConfig) else ""
    if not target.endswith("WandbLogger"):
        return
    mode, key = logger.get("mode"), "logging.logger.mode"
    if mode is None:
        mode, key = os.environ.get("WANDB_MODE"), "WANDB_MODE"
    if mode is not None and mode not in _WANDB_MODES:
        what = "environment variable is" if key == "WANDB_MODE" else "got"
        raise ConfigError(
            key,
            f"{what} {mode!r}, not a W&B mode; set online, offline or disabled"
            + (", or unset it" if key == "WANDB_MODE" else ""),
        )


def check_device(device: str) -> None:
    """``device`` names a torch device this machine has (imports torch unless it is ``cpu``)."""
    if device == "cpu":
        return
    if re.match(DEVICE_PATTERN, device) is None:
        raise ConfigError(
            "device", f"{device!r} is not a torch device; set cpu, cuda or cuda:<index>"
        )
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ConfigError(
            "device", f"{device!r} is not a torch device; set cpu, cuda or cuda:<index>"
        ) from err
    if parsed.type in ("cpu", "meta"):
        return
    backend = getattr(torch, parsed.type, None)
    available: Callable[[], bool] | None = getattr(backend, "is_available", None)
    if available is None or not available():
        raise ConfigError(
            "device",
            f"{device!r} is not available here (torch {torch.__version__} sees no "
            f"{parsed.type} device); set device=cpu",
        )
    count = getattr(backend, "device_count", lambda: 1)()
    if parsed.index is not None and parsed.index >= count:
        raise ConfigError(
            "device", f"{device!r}: only {count} {parsed.type} device(s) here; pick 0..{count - 1}"
        )
