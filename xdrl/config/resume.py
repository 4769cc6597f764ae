"""Whether a config may resume a checkpoint: the comparison, torch-free.

The CLI's single-run pre-check runs it before Hydra starts (so a refused resume leaves the run
dir exactly as it was, log file included, and costs no torch import);
``xdrl.training.checkpointing`` runs
it again inside every run, sweep jobs included.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from xdrl.config.errors import ConfigError
from xdrl.config.nested import flatten
from xdrl.config.renames import renamed_config
from xdrl.run.layout import CHECKPOINT_CONFIG_FILE as CONFIG_FILE
from xdrl.run.layout import CHECKPOINT_DIR, CHECKPOINT_NAME

NEVER = "never"

# Keys whose change makes a checkpoint meaningless or unloadable: the networks, losses and
# optimizer (everything under algorithm), the environment, and the batch the algorithm was sized
# for. Any other difference (total_frames, logging, eval, checkpoint, ...) resumes and is logged.
SHAPING_PREFIXES = ("algorithm.", "env.", "frames_per_batch")
# The seed is the run's record: a checkpoint holds that seed's RNG states, so a resume under
# another seed would continue the old seed's streams while summary.json and .hydra/ named the new.
SEED_KEY = "seed"
# Keys that differ by nature between a run and its resume.
IGNORED_KEYS = ("run_dir", "exp_name", "resume")
EMPTY_DEFAULTS: tuple[Any, ...] = ([], {}, None)


def config_changes(saved: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (saved value, new value)}`` for every key that differs. A key the saved
    config lacks and the new one leaves empty (``[]``, ``{}``, ``null``) is no change: it was
    added to xdrl after the checkpoint was written, with a default that means what its absence
    meant (e.g. ``env.import_modules: []``)."""
    old_flat, new_flat = flatten(saved), flatten(new)
    return {
        k: (old_flat.get(k), new_flat.get(k))
        for k in sorted(set(old_flat) | set(new_flat))
        if old_flat.get(k) != new_flat.get(k)
        and not k.startswith(IGNORED_KEYS)
        and not (k not in old_flat and new_flat[k] in EMPTY_DEFAULTS)
    }


def refuse_resume_changes(candidate: Path, changes: Mapping[str, tuple[Any, Any]]) -> None:
    """Raise ``ConfigError`` naming each changed key that shapes the model (key ``resume``), or
    a changed seed (key ``seed``: the run keeps the seed it was trained with)."""
    shaping = [k for k in changes if k.startswith(SHAPING_PREFIXES)]
    if shaping:
        diff = ", ".join(f"{k} {changes[k][0]!r} -> {changes[k][1]!r}" for k in shaping)
        raise ConfigError(
            "resume",
            f"the config differs from the one {candidate} was written under in {diff}; "
            "to start afresh pass resume=never (earlier output moves to superseded/) or "
            "another hydra.run.dir",
        )
    if SEED_KEY in changes:
        old, new = changes[SEED_KEY]
        raise ConfigError(
            SEED_KEY,
            f"{new!r} differs from the seed {old!r} that {candidate} was trained with (a resume "
            f"continues seed {old!r}'s random streams); pass seed={old} to continue that run, or "
            f"another hydra.run.dir (or resume=never) to train seed {new!r}",
        )


def saved_config(checkpoint: Path) -> dict[str, Any] | None:
    """The config ``checkpoint`` was written under (None when unreadable)."""
    try:
        saved = renamed_config(yaml.safe_load((checkpoint / CONFIG_FILE).read_text()) or {})
    except (OSError, yaml.YAMLError):
        return None
    return saved if isinstance(saved, dict) else None


def checkpoints_by_name(resume: str | None, run_dir: str | Path) -> list[Path]:
    """The checkpoints a run would try, newest first, found by name only (the run itself also
    recognizes checkpoints by their manifest and verifies them)."""
    if resume == NEVER:
        return []
    target = Path(run_dir) / CHECKPOINT_DIR if resume is None else Path(resume).expanduser()
    if CHECKPOINT_NAME.fullmatch(target.name):
        return [target]
    if (target / CHECKPOINT_DIR).is_dir():
        target = target / CHECKPOINT_DIR
    found = [p for p in target.glob("checkpoint-*") if CHECKPOINT_NAME.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]), reverse=True)


def check_resume_config(config: Mapping[str, Any], resume: str | None, run_dir: str) -> None:
    """Refuse (``ConfigError``) a config that changed what shapes the model, or the seed, against
    the newest checkpoint with a readable config that the run would resume from."""
    for candidate in checkpoints_by_name(resume, run_dir):
        saved = saved_config(candidate)
        if saved is not None:
            refuse_resume_changes(candidate, config_changes(saved, config))
            return
