"""Run gated presets (two at a time), check them against their references, or rewrite those.

A reference is ``references/<preset>.json``: pretty-printed, keys sorted, no timestamps, so an
update's diff in review shows exactly which curve moved. It holds the preset's gate overrides,
its frames, and one record per machine (fingerprint, library versions, code version, curves).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from benchmarks.learning_gate.compare import Verdict, choose_record, compare
from benchmarks.learning_gate.presets import GATED, GatedPreset
from benchmarks.learning_gate.record import (
    RunFailed,
    RunResult,
    code_version,
    fingerprint,
    run_preset,
    versions,
)

REFERENCES = Path(__file__).resolve().parent / "references"
JOBS = 2  # runs at a time: one per core of the CI machines


def reference_path(name: str, references: Path = REFERENCES) -> Path:
    """Where ``name``'s reference lives."""
    return references / f"{name}.json"


def load_reference(name: str, references: Path = REFERENCES) -> dict[str, Any] | None:
    """``name``'s reference, or None where there is none."""
    path = reference_path(name, references)
    return json.loads(path.read_text()) if path.is_file() else None


# A [frames, value] pair that json.dumps spread over four lines.
_PAIR = re.compile(r"\[\s+(-?\d+),\s+([^\s\[\]{},]+)\s+\]")


def dump(reference: dict[str, Any]) -> str:
    """The stable text of a reference: 2-space indent, sorted keys, one line per curve point
    (a moved value is one changed line in review), a final newline."""
    return _PAIR.sub(r"[\1, \2]", json.dumps(reference, indent=2, sort_keys=True)) + "\n"


def missing_requirement(preset: GatedPreset) -> str | None:
    """Why ``preset`` cannot run here (its env's module is not installed), or None."""
    if preset.requires and find_spec(preset.requires) is None:
        return f"needs the {preset.requires} module (pip install 'xdrl[all]')"
    return None


def run_all(
    presets: Iterable[GatedPreset],
    jobs: int = JOBS,
    extra: list[str] | None = None,
    on_done: Callable[[str, RunResult | RunFailed], None] | None = None,
) -> dict[str, RunResult | RunFailed]:
    """Run each preset in its own temporary run dir, ``jobs`` at a time; a failed run gives
    its :class:`RunFailed` instead of a result."""
    todo = list(presets)
    with tempfile.TemporaryDirectory(prefix="learning_gate_") as root:

        def one(preset: GatedPreset) -> RunResult | RunFailed:
            try:
                result: RunResult | RunFailed = run_preset(preset, Path(root) / preset.name, extra)
            except RunFailed as exc:
                result = exc
            if on_done:
                on_done(preset.name, result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(one, todo))
    return {p.name: r for p, r in zip(todo, results, strict=True)}


def check(
    names: Iterable[str],
    jobs: int = JOBS,
    references: Path = REFERENCES,
    extra: list[str] | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Run each named preset and compare it with its reference; ``extra`` overrides are added
    to every run (the gate's own test changes a loss coefficient so)."""
    machine, libs = fingerprint(), versions()
    verdicts: dict[str, Verdict] = {}
    runnable = []
    for name in names:
        preset = GATED[name]
        skip = missing_requirement(preset)
        reference = load_reference(name, references)
        if skip:
            verdicts[name] = Verdict(name, "skipped", skip)
        elif reference is None:
            path = reference_path(name, references)
            verdicts[name] = Verdict(
                name, "no-reference", f"no {path}", errors=[_update_hint(name)]
            )
        elif reference["overrides"] != preset.all_overrides():
            verdicts[name] = Verdict(
                name,
                "stale-reference",
                "the reference ran other overrides than the gate table",
                errors=[f"reference: {reference['overrides']}", _update_hint(name)],
            )
        else:
            runnable.append(preset)

    def judge(name: str, result: RunResult | RunFailed) -> None:
        preset, reference = GATED[name], load_reference(name, references)
        assert reference is not None
        if isinstance(result, RunFailed):
            verdict = Verdict(name, "failed-run", "xdrl-train failed", errors=[str(result)])
        else:
            mode, reason, record = choose_record(reference, machine, libs)
            verdict = compare(name, reference, result, mode, reason, record, preset.band)
        verdicts[name] = verdict
        if on_verdict:
            on_verdict(verdict)

    for verdict in verdicts.values():
        if on_verdict:
            on_verdict(verdict)
    run_all(runnable, jobs, extra, judge)
    return [verdicts[name] for name in names]


def update(
    names: Iterable[str],
    jobs: int = JOBS,
    references: Path = REFERENCES,
    keep_other_machines: bool = False,
    on_done: Callable[[str, str], None] | None = None,
) -> dict[str, str]:
    """Run each named preset and write its reference; returns what happened to each file
    (``written``, ``unchanged``, ``skipped: ...``, ``failed: ...``).

    The new record replaces every record of the file (a code change that moves the curves here
    moves them on other machines too), unless ``keep_other_machines``: then it replaces only the
    record of this machine and these versions and keeps the others (to add a second CI machine's
    exact record after a change that did not move the numbers). A file whose curves, overrides
    and machines did not change is left as it was, its code version included.
    """
    machine, libs, code = fingerprint(), versions(), code_version()
    references.mkdir(parents=True, exist_ok=True)
    outcome: dict[str, str] = {}
    presets = []
    for name in names:
        skip = missing_requirement(GATED[name])
        if skip:
            outcome[name] = f"skipped: {skip}"
            if on_done:
                on_done(name, outcome[name])
        else:
            presets.append(GATED[name])

    def write(name: str, result: RunResult | RunFailed) -> None:
        took = ""
        if isinstance(result, RunFailed):
            outcome[name] = f"failed: {result}"
        else:
            took = f" ({result.wall_s:.0f} s)"
            record = {
                "fingerprint": machine,
                "versions": libs,
                "code_version": code,
                "eval": result.eval,
                "train": result.train,
            }
            outcome[name] = _write_reference(
                GATED[name], result.frames, record, references, keep_other_machines
            )
        if on_done:
            on_done(name, outcome[name] + took)

    run_all(presets, jobs, None, write)
    return outcome


def _write_reference(
    preset: GatedPreset,
    frames: int,
    record: dict[str, Any],
    references: Path,
    keep_other_machines: bool,
) -> str:
    """Write ``preset``'s reference with ``record``; ``written`` or ``unchanged``."""
    old = load_reference(preset.name, references)
    same_machine = [
        r
        for r in (old or {}).get("machines", [])
        if r["fingerprint"] == record["fingerprint"] and r["versions"] == record["versions"]
    ]
    if same_machine and _curves_equal(same_machine[0], record):
        record = {**record, "code_version": same_machine[0]["code_version"]}
    others = [
        r for r in (old or {}).get("machines", []) if keep_other_machines and r not in same_machine
    ]
    new = {
        "preset": preset.name,
        "overrides": preset.all_overrides(),
        "frames": frames,
        "band": preset.band,
        "note": preset.note,
        "machines": [record, *others],
    }
    path = reference_path(preset.name, references)
    text = dump(new)
    if path.is_file() and path.read_text() == text:
        return "unchanged"
    path.write_text(text)
    return "written"


def _curves_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["eval"] == b["eval"] and a["train"] == b["train"]


def _update_hint(name: str) -> str:
    return f"write it with: python -m benchmarks.learning_gate update --preset {name}"
