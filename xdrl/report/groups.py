"""Group runs whose configs differ only in the seed (and in paths that are per run).

A group's name is the overrides that set it apart from the other groups (``algorithm=a2c``);
overrides every group shares are left out, and a group with none of its own is ``defaults``.
When overrides do not tell two groups apart (runs of other code, with other defaults), the
config keys whose values differ name them instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from xdrl.config.nested import flatten
from xdrl.report.runs import RunRecord

# Per-run keys: they differ between seeds of one configuration without changing it.
PER_RUN_KEYS = frozenset({"seed", "run_dir", "exp_name", "resume"})
MAX_NAME_KEYS = 4  # config keys shown in a name built from the config diff


@dataclass
class Group:
    """Runs of one configuration, every seed.

    Args:
        name: the overrides that set the group apart (``algorithm=a2c``).
        overrides: the same, as {key: value}.
        runs: every run of the configuration, completed or not.
        env: the environment id (probability of improvement compares groups of one env).
    """

    name: str
    overrides: dict[str, str]
    runs: list[RunRecord] = field(default_factory=list)
    env: str | None = None


def override_key(override: str) -> str:
    """``+a.b@pkg=1`` -> ``a.b``."""
    return override.split("=", 1)[0].split("@", 1)[0].lstrip("+~")


def _is_per_run(key: str) -> bool:
    return key in PER_RUN_KEYS or key == "hydra" or key.startswith("hydra.")


def config_identity(run: RunRecord) -> str:
    """The run's config without per-run keys, as a canonical string."""
    flat = {k: v for k, v in flatten(run.config).items() if not _is_per_run(k)}
    return json.dumps(flat, sort_keys=True, default=str)


def _shared_overrides(runs: list[RunRecord]) -> list[str]:
    """Overrides every run of ``runs`` was given, per-run keys left out, in command order."""
    first = [o for o in runs[0].overrides if not _is_per_run(override_key(o))]
    return [o for o in first if all(o in r.overrides for r in runs[1:])]


def _config_diff_names(groups: list[Group]) -> None:
    """Name groups by the config keys whose values differ between them."""
    flats = [
        {k: v for k, v in flatten(g.runs[0].config).items() if not _is_per_run(k)} for g in groups
    ]
    keys = sorted({k for f in flats for k in f if any(f.get(k) != o.get(k) for o in flats)})
    for group, flat in zip(groups, flats, strict=True):
        shown = {k: str(flat.get(k)) for k in keys[:MAX_NAME_KEYS]}
        group.overrides = shown
        more = f" (+{len(keys) - MAX_NAME_KEYS} keys)" if len(keys) > MAX_NAME_KEYS else ""
        group.name = " ".join(f"{k}={v}" for k, v in shown.items()) + more


def group_runs(runs: list[RunRecord]) -> list[Group]:
    """One group per configuration, in order of first appearance."""
    by_config: dict[str, Group] = {}
    for run in runs:
        identity = config_identity(run)
        if identity not in by_config:
            by_config[identity] = Group(name="", overrides={}, env=run.env)
        by_config[identity].runs.append(run)
    groups = list(by_config.values())
    per_group = [_shared_overrides(g.runs) for g in groups]
    common = set.intersection(*(set(o) for o in per_group)) if len(groups) > 1 else set()
    for group, overrides in zip(groups, per_group, strict=True):
        own = [o for o in overrides if o not in common]
        group.overrides = {override_key(o): o.split("=", 1)[1] if "=" in o else "" for o in own}
        group.name = " ".join(own)
    names = [g.name for g in groups]
    if len(set(names)) < len(names):  # same overrides, other configs (e.g. other code defaults)
        _config_diff_names(groups)
    for group in groups:
        if not group.name:  # no override of its own: the defaults (or every run, when alone)
            group.name = "all runs" if len(groups) == 1 else "defaults"
    return groups
