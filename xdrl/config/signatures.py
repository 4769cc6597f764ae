"""Builders' signatures read from source: what a config node's ``_target_`` accepts, without
importing its module (the algorithm modules import torch). The config check reads annotations
and defaults from here; the resume rule reads defaults (a key a checkpoint predates is no change
when its value is the builder's default). A leaf: imports only :mod:`xdrl.config.types`."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from xdrl.config import types as config_types

_NAMESPACE: dict[str, Any] = {  # what a signature's annotations may name (read_signature)
    "Annotated": Annotated,
    "Any": Any,
    "Field": Field,
    "Literal": Literal,
    "Sequence": Sequence,
    **{n: getattr(config_types, n) for n in config_types.RANGE_TYPES},
    **{t.__name__: t for t in (int, float, str, bool, dict, list, tuple)},
    "None": None,
}


@dataclass(frozen=True)
class Param:
    """One parameter of a builder: its annotation (evaluated) and default (if a literal)."""

    annotation: Any
    default: Any = inspect.Parameter.empty


def read_signature(target: str) -> tuple[dict[str, Param], bool] | None:
    """The parameters of the function or dataclass ``target`` names (``pkg.module.name``) and
    whether it takes ``**kwargs``, read from its source without importing its module (None: not
    readable)."""
    module_name, _, func_name = target.rpartition(".")
    try:
        spec = importlib.util.find_spec(module_name)  # imports the parent packages only
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    node = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == func_name
        ),
        None,
    )
    if isinstance(node, ast.ClassDef):  # a dataclass: its annotated fields
        fields = [f for f in node.body if isinstance(f, ast.AnnAssign)]
        return {
            f.target.id: Param(_annotation(f.annotation), _literal(f.value))
            for f in fields
            if isinstance(f.target, ast.Name)
        }, False
    if node is None:
        return None
    func = node
    args = func.args
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = list(zip(positional, [*defaults, *args.defaults], strict=True))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    params = {arg.arg: Param(_annotation(arg.annotation), _literal(d)) for arg, d in pairs}
    return params, args.kwarg is not None


def _annotation(node: ast.expr | None) -> Any:
    if node is None:
        return Any
    source = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
    try:
        expr = source if source is not None else ast.unparse(node)
        return eval(expr, {"__builtins__": {}}, dict(_NAMESPACE))  # noqa: S307 - source code
    except Exception:  # noqa: BLE001 - a type from elsewhere is not checked here
        return Any


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return inspect.Parameter.empty
