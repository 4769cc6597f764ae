"""Whether a config may resume a checkpoint: the comparison, torch-free.

:class:`ResumeCheck` compares a run's config with each checkpoint's at most once. The CLI's
single-run pre-check runs it before Hydra starts (so a refused resume leaves the run dir exactly
as it was, log file included, and costs no torch import), a sweep job at its start; the run's
later stages (``xdrl.training.checkpointing``: the completed-run test, the restore) read its
answer for the checkpoint they load instead of comparing again.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from xdrl.config.errors import ConfigError
from xdrl.config.nested import flatten
from xdrl.config.renames import renamed_config
from xdrl.config.signatures import read_signature
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
# xdrl's lean pieces and TorchRL's originals checkpoint different state (collector, replay
# buffer, minibatch sampler): a run resumes with the lean it was trained with (a checkpoint
# older than the key was trained lean).
LEAN_KEY = "lean"
# The collector's shape: its checkpoint holds each worker's envs mid-episode (one entry per
# worker; in process: the envs themselves), so a run resumes with the collector it was trained
# with. The values are what a checkpoint written before the collector group meant.
COLLECTOR_KEYS = {"collector.backend": "single", "collector.workers": 1}
# Keys that differ by nature between a run and its resume.
IGNORED_KEYS = ("run_dir", "exp_name", "resume")
EMPTY_DEFAULTS: tuple[Any, ...] = ([], {}, None)


def config_changes(saved: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (saved value, new value)}`` for every key that differs. A key the saved
    config lacks is no change where it was added to xdrl after the checkpoint was written with a
    value that means what its absence meant: empty (``[]``, ``{}``, ``null``, e.g.
    ``env.import_modules: []``) or its node's ``_target_`` default (e.g.
    ``algorithm.build.recurrent_hidden: 64``, unused without ``recurrent``)."""
    old_flat, new_flat = flatten(saved), flatten(new)
    return {
        k: (old_flat.get(k), new_flat.get(k))
        for k in sorted(set(old_flat) | set(new_flat))
        if old_flat.get(k) != new_flat.get(k)
        and not k.startswith(IGNORED_KEYS)
        and not (k not in old_flat and _means_absent(k, new_flat))
    }


def _means_absent(key: str, flat: Mapping[str, Any]) -> bool:
    """Whether ``flat[key]`` is empty or the default of its node's ``_target_`` parameter."""
    value = flat[key]
    if value in EMPTY_DEFAULTS:
        return True
    node, _, name = key.rpartition(".")
    target = flat.get(f"{node}._target_") if node else None
    read = read_signature(str(target)) if target else None
    param = read[0].get(name) if read else None
    return (
        param is not None
        and param.default is not inspect.Parameter.empty
        and (param.default == value)
    )


def refuse_resume_changes(candidate: Path, changes: Mapping[str, tuple[Any, Any]]) -> None:
    """Raise ``ConfigError`` naming each changed key that shapes the model (key ``resume``), a
    changed seed (key ``seed``: the run keeps the seed it was trained with), a changed collector
    backend or worker count, or a changed ``lean``."""
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
    collector = {  # (trained with, asked for); absent: written before the collector group
        k: (default if changes[k][0] is None else changes[k][0], changes[k][1])
        for k, default in COLLECTOR_KEYS.items()
        if k in changes
    }
    collector = {k: (old, new) for k, (old, new) in collector.items() if old != new}
    if collector:
        diff = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in collector.items())
        fix = " ".join(f"{k}={old}" for k, (old, _) in collector.items())
        raise ConfigError(
            next(iter(collector)),
            f"the collector differs from the one {candidate} was trained with in {diff} (its "
            f"checkpoint holds each worker's envs mid-episode); pass {fix} to continue that run, "
            "or another hydra.run.dir (or resume=never) to train with the new collector",
        )
    old_lean, new_lean = changes.get(LEAN_KEY, (True, True))
    if (True if old_lean is None else old_lean) != new_lean:
        was, now = str(old_lean is not False).lower(), str(new_lean).lower()
        raise ConfigError(
            LEAN_KEY,
            f"{now} differs from lean={was} that {candidate} was trained with (xdrl's pieces and "
            f"TorchRL's originals checkpoint different state); pass lean={was} to continue that "
            f"run, or another hydra.run.dir (or resume=never) to train with lean={now}",
        )


def saved_config(checkpoint: Path) -> dict[str, Any] | None:
    """The config ``checkpoint`` was written under (None when unreadable)."""
    try:
        saved = renamed_config(yaml.safe_load((checkpoint / CONFIG_FILE).read_text()) or {})
    except (OSError, yaml.YAMLError):
        return None
    return saved if isinstance(saved, dict) else None


def saved_budget(checkpoint: Path, batch_frames: int) -> int | None:
    """The frame budget ``checkpoint`` was trained under: its config's ``total_frames`` rounded
    up to whole ``batch_frames``-frame batches, as the run trained it (None: no readable
    config). A resume that changes it re-anchors the schedules that anneal over the budget."""
    saved = saved_config(checkpoint)
    total = saved.get("total_frames") if saved is not None else None
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        return None
    return -(-total // batch_frames) * batch_frames


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


class ResumeCheck:
    """A run's config compared with the config of each checkpoint it may resume, once per
    checkpoint: a refused change raises ``ConfigError`` the first time; later asks for the same
    checkpoint return the recorded changes (the run logs those it resumes with).

    Args:
        config: the run's resolved config (``RunSpec.resolved``).

    Example:
        >>> check = ResumeCheck({"seed": 0, "total_frames": 2048})
        >>> check.newest(checkpoints_by_name(None, "outputs/run"))  # the one a resume loads
        PosixPath('outputs/run/checkpoints/checkpoint-000000001024')
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self._changes: dict[Path, dict[str, tuple[Any, Any]]] = {}

    def changes(self, checkpoint: Path) -> dict[str, tuple[Any, Any]] | None:
        """The non-refused changes against ``checkpoint``'s config (None: it has no readable
        config, nothing to compare); refuses (``ConfigError``) a change that shapes the model,
        or the seed. Compared on the first ask for ``checkpoint`` only."""
        key = Path(os.path.abspath(checkpoint))
        if key not in self._changes:
            saved = saved_config(checkpoint)
            if saved is None:
                return None
            changes = config_changes(saved, self.config)
            refuse_resume_changes(checkpoint, changes)
            self._changes[key] = changes
        return self._changes[key]

    def newest(self, candidates: Iterable[Path]) -> Path | None:
        """Check the newest of ``candidates`` (newest first) that has a readable config, the one
        a resume loads unless its files turn out damaged; returns it (None: none has one)."""
        return next((c for c in candidates if self.changes(c) is not None), None)
