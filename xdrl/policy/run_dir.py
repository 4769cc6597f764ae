"""A run dir's checkpoints and saved config: which checkpoint ``last``, ``best``, a frame count
or a path means, and the config it was written under. Imports no torch, so that the commands
refuse a path that is not a run dir at once."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from xdrl.config.errors import ConfigError
from xdrl.config.resume import CHECKPOINT_DIR, CONFIG_FILE
from xdrl.config.spec import load_saved_config
from xdrl.run.layout import HYDRA_CONFIG_FILE, HYDRA_DIR, MANIFEST_FILE, SUMMARY_FILE


def _frames(path: Path) -> int | None:
    head, _, tail = path.name.partition("-")
    return int(tail) if head == "checkpoint" and tail.isdigit() else None


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's ``checkpoint-<frames>`` folders, oldest first."""
    folder = run_dir / CHECKPOINT_DIR
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and _frames(p) is not None]
    return sorted(found, key=lambda p: _frames(p) or 0)


def check_run_dir(path: str | Path) -> Path:
    """``path`` as a run dir (it has ``.hydra/config.yaml`` or ``checkpoints/``), else one line."""
    run_dir = Path(path).expanduser()
    if not run_dir.is_dir():
        raise ConfigError("RUN_DIR", f"{run_dir} is not a folder; pass a run dir of xdrl-train")
    if (
        not (run_dir / HYDRA_DIR / HYDRA_CONFIG_FILE).is_file()
        and not (run_dir / CHECKPOINT_DIR).is_dir()
    ):
        raise ConfigError(
            "RUN_DIR",
            f"{run_dir} is not a run dir (no .hydra/config.yaml, no checkpoints/); pass the "
            "folder xdrl-train wrote",
        )
    return run_dir


def resolve_checkpoint(run_dir: Path, which: str = "last") -> Path:
    """The checkpoint ``which`` names: ``last``, ``best``, a frame count or a checkpoint path."""
    found = checkpoints(run_dir)
    if which not in ("last", "best") and not which.isdigit():
        path = Path(which).expanduser()
        if not (path / MANIFEST_FILE).is_file():
            raise ConfigError(
                "--checkpoint", f"{path} is not a checkpoint; pass last, best, N or a checkpoint"
            )
        return path
    if not found:
        raise ConfigError(
            "--checkpoint",
            f"{run_dir} has no checkpoints (trained with checkpoint.enabled=false, or stopped "
            "before the first save)",
        )
    if which == "last":
        return found[-1]
    if which == "best":
        return _best(run_dir, found)
    by_frames = {_frames(p): p for p in found}
    if int(which) not in by_frames:
        have = ", ".join(str(f) for f in by_frames)
        raise ConfigError("--checkpoint", f"no checkpoint at {int(which)} frames; there are {have}")
    return by_frames[int(which)]


def _best(run_dir: Path, found: list[Path]) -> Path:
    from xdrl.training.checkpointing import BEST_SUMMARY_KEY  # imports torch

    summary = run_dir / SUMMARY_FILE
    name = None
    if summary.is_file():
        try:
            name = json.loads(summary.read_text()).get(BEST_SUMMARY_KEY)
        except ValueError:
            name = None
    if name is None or not (run_dir / CHECKPOINT_DIR / name).is_dir():
        raise ConfigError(
            "--checkpoint",
            f"{run_dir} names no best checkpoint (trained with checkpoint.keep_best=false or "
            f"eval=none); pass last or one of {', '.join(p.name for p in found)}",
        )
    return run_dir / CHECKPOINT_DIR / name


def checkpoint_frames(checkpoint: Path) -> int:
    """Collected frames recorded in the checkpoint's manifest (the folder name as fallback)."""
    try:
        manifest = json.loads((checkpoint / MANIFEST_FILE).read_text())
        return int(manifest["metadata"]["collected_frames"])
    except (OSError, ValueError, KeyError, TypeError):
        return _frames(checkpoint) or 0


def saved_config(checkpoint: Path) -> dict[str, Any]:
    """The resolved config the checkpoint was written under, as plain data (moved ``_target_``
    paths renamed); :meth:`~xdrl.config.spec.RunSpec.from_saved` reads it."""
    path = checkpoint / CONFIG_FILE
    try:
        return load_saved_config(path)
    except OSError as err:
        raise ConfigError("--checkpoint", f"{path} cannot be read ({err})") from None
    except ValueError as err:
        raise ConfigError("--checkpoint", f"{err}; pass a checkpoint xdrl-train wrote") from None


def apply_overrides(config: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``env.KEY=VALUE`` / ``eval.KEY=VALUE`` overrides (Hydra's syntax, existing keys only)."""
    from omegaconf import OmegaConf

    merged: Any = OmegaConf.create(config)
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not key.startswith(("env.", "eval.")):
            raise ConfigError(
                "overrides",
                f"{item!r} is not env.KEY=VALUE or eval.KEY=VALUE (e.g. "
                "env.max_episode_steps=1000)",
            )
        if OmegaConf.select(merged, key, default="__missing__") == "__missing__":
            raise ConfigError(key, f"no such key in the run's config (override {item!r})")
        merged = OmegaConf.merge(merged, OmegaConf.from_dotlist([item]))
        check_override(merged, key)
    out = OmegaConf.to_container(merged, resolve=True)
    return {str(k): v for k, v in out.items()} if isinstance(out, dict) else {}


def check_override(config: Any, key: str) -> None:
    """The overridden ``env.*`` / ``eval.*`` value in ``config`` (an OmegaConf node) checked as
    ``xdrl-train`` checks it (:func:`xdrl.config.check.check_value` against the env factory's
    signature or the eval settings class); a nested key checks its top-level key's value."""
    from omegaconf import OmegaConf

    from xdrl.config.check import FROM_DEFAULTS, SETTINGS, check_value
    from xdrl.config.signatures import read_signature

    group, _, rest = key.partition(".")
    name = rest.partition(".")[0]
    top = f"{group}.{name}"
    node = OmegaConf.select(config, group)
    target = str(node["_target_"]) if "_target_" in node else SETTINGS.get(group, "")
    read = read_signature(target)
    if read is None or name not in read[0]:
        return  # not a parameter there: instantiation names the key
    param = read[0][name]
    value = OmegaConf.select(config, top)
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if group == "eval":
        example: Any = FROM_DEFAULTS
    else:
        example = None if param.default is inspect.Parameter.empty else param.default
    check_value(top, value, param.annotation, example)


def checkpoint_sequence(run_dir: Path, checkpoint: Path) -> list[Path]:
    """The checkpoints older than ``checkpoint``, newest first (offered when it is damaged)."""
    frames = _frames(checkpoint) or 0
    return [p for p in reversed(checkpoints(run_dir)) if (_frames(p) or 0) < frames]
