"""Nested configs as flat ``{"a.b": value}`` dicts (config diffs, report groups, hparams)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(node: Any, sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": {}}`` -> ``{"a.b": 1, "c": {}}``: every leaf by its joined key; an
    empty mapping is a leaf (so a diff still sees it); a non-mapping ``node`` is ``{prefix: node}``.
    """
    if not isinstance(node, Mapping) or not node:
        return {prefix: node}
    flat: dict[str, Any] = {}
    for key, value in node.items():
        flat.update(flatten(value, sep, f"{prefix}{sep}{key}" if prefix else str(key)))
    return flat
