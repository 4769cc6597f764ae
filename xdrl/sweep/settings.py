"""A sweep's own settings checked against the classes they configure, before Hydra builds them.

Hydra instantiates ``hydra.sweeper`` (and the Optuna sweeper's ``sampler`` and ``pruner``) only
once the sweep starts, and a key the class does not take or a value of the wrong type came out
as its multi-line "Error in call to target ..." with exit 1 (``RandomSampler`` given TPE's
``n_startup_trials``, ``hydra.sweeper.sampler.seed=abc``). Here each key of an xdrl sweeper's
node is looked up in its class's signature and its value checked against the annotation (the
signature is the schema, as for every other group: ``n_jobs: Annotated[int, Field(ge=1)]``);
the sampler and the pruner are then built once, so a value their class refuses is one line
naming the node. A sweeper class may add what its annotations cannot say with a static
``check_settings(settings)``. Optuna is imported only when the Optuna sweeper is chosen.
"""

from __future__ import annotations

import difflib
import inspect
import sys
import types
import typing
import warnings
from typing import Any

from omegaconf import DictConfig, OmegaConf

from xdrl.config.check import check_value
from xdrl.config.errors import ConfigError, first_line

XDRL_SWEEPERS = "hydra_plugins.xdrl_"  # the sweepers whose settings are checked here
PARTS = ("sampler", "pruner")  # the Optuna sweeper's nodes that name a class of their own


def check_sweeper_settings(hydra_cfg: DictConfig) -> None:
    """Every key of ``hydra.sweeper`` (an xdrl sweeper's) and of its ``sampler`` and ``pruner``
    is a parameter of its class and fits its annotation, and the sampler and pruner build;
    raises :class:`ConfigError` on the first that does not.

    Example:
        >>> check_sweeper_settings(compose(..., ["hparams_search=ppo_cartpole",
        ...     "hydra.sweeper.n_jobs=0"]).hydra)
        Traceback (most recent call last):
        xdrl.config.errors.ConfigError: hydra.sweeper.n_jobs: got 0 (int), too small; set ...
    """
    node = hydra_cfg.sweeper
    target = str(node._target_) if "_target_" in node else ""
    if not target.startswith(XDRL_SWEEPERS):
        return  # Hydra's basic sweeper: its own checks
    sweeper = _class(target, "hydra.sweeper")
    settings = _check_node(node, sweeper, "hydra.sweeper")
    hook = getattr(sweeper, "check_settings", None)
    if hook is not None:
        hook(settings)
    for part in PARTS:
        child = node[part] if part in node else None
        if isinstance(child, DictConfig) and "_target_" in child:
            key = f"hydra.sweeper.{part}"
            _build(_class(str(child._target_), key), _check_node(child, None, key), key, part)


def _class(target: str, key: str) -> type:
    """The class ``target`` names (its module imported)."""
    from hydra.utils import get_class

    try:
        return get_class(target)
    except Exception as err:  # noqa: BLE001 - Hydra's ImportError wraps several causes
        raise ConfigError(
            f"{key}._target_", f"{target} does not import ({first_line(err)})"
        ) from err


def _check_node(node: DictConfig, cls: type | None, key: str) -> dict[str, Any]:
    """The node's settings as plain values, each checked against ``cls``'s signature (``cls``
    None: the node's ``_target_``'s, already imported by :func:`_class`)."""
    if cls is None:
        cls = _class(str(node._target_), key)
    params = inspect.signature(cls).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    settings: dict[str, Any] = {}
    for name in map(str, node):
        if name.startswith("_"):
            continue
        child = f"{key}.{name}"
        if name not in params:
            if takes_kwargs:
                continue
            known = [
                p for p, v in params.items() if v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)
            ]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {key}.{close[0]}?" if close else f"its keys: {', '.join(known)}"
            raise ConfigError(child, f"not a setting of {cls.__name__}; {hint}")
        value = node[name]
        if isinstance(value, DictConfig) and "_target_" in value:
            continue  # a class of its own (the sampler, the pruner): checked by itself
        plain = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        settings[name] = plain
        default = params[name].default
        example = default if isinstance(default, bool | int | float | str) else None
        annotation = _annotation(cls, name)
        if _checkable(annotation):
            check_value(child, plain, annotation, example)
    return settings


def _annotation(cls: type, name: str) -> Any:
    """The evaluated annotation of ``cls``'s parameter ``name`` (``Any`` where it names what
    its module imports only for type checkers, as Optuna's ``FrozenTrial``)."""
    init = cls.__init__  # type: ignore[misc]
    raw = getattr(init, "__annotations__", {}).get(name, Any)
    if not isinstance(raw, str):
        return raw
    stub = types.SimpleNamespace(__annotations__={name: raw})
    namespace = vars(sys.modules[init.__module__])
    try:
        return typing.get_type_hints(stub, globalns=namespace, include_extras=True)[name]
    except Exception:  # noqa: BLE001 - a name only type checkers import: not checkable here
        return Any


def _checkable(annotation: Any) -> bool:
    """Whether pydantic can validate ``annotation`` (not an arbitrary class such as a sampler)."""
    from pydantic import TypeAdapter

    if annotation is Any:
        return False
    try:
        TypeAdapter(annotation)
    except Exception:  # noqa: BLE001 - pydantic's schema errors have several types
        return False
    return True


def _build(cls: type, settings: dict[str, Any], key: str, part: str) -> None:
    """Build the sampler or pruner once, as the sweep will: a value its class refuses (a
    negative count, a range its own check finds empty) is one line naming the node."""
    try:
        with warnings.catch_warnings():  # Optuna's ExperimentalWarning: said when the sweep runs
            warnings.simplefilter("ignore")
            cls(**settings)
    except Exception as err:  # noqa: BLE001 - the class's own refusal, whatever its type
        raise ConfigError(
            key,
            f"{cls.__name__} refused its settings ({first_line(err)}); change the value it "
            f"names, or pick another hydra/sweeper/{part}",
        ) from err
