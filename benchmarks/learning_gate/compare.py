"""A gated run against its reference: exact where it can be, within a band where it cannot.

Modes (the verdict names the one it used):

- **exact**: the reference holds a record from a machine with the same fingerprint (CPU model,
  torch's CPU capability, ISA flags) and the same library versions. Two uninterrupted same-seed
  runs there write identical CSVs, so every evaluation value and every kept train-loss value must
  equal the reference's to the last digit the CSV wrote. Any change to what the preset computes
  (a loss term, an optimizer, the collection order) moves them.
- **tolerance**: otherwise (another CPU model, e.g. AMD EPYC against Intel Xeon; other torch or
  TorchRL versions). fp32 kernels there sum in another order, and the difference in the last bits
  grows through every batch collected by a policy that differs, until the run is another sample
  of the same learning process. So values are compared by how far feedback can have carried that
  difference:

  1. the evaluation before training (frame 0: the initial policy on seeded envs, no update yet)
     within 1% of the band (:attr:`GatedPreset.band`), every metric ending in
     ``reward/episode_reward_mean``;
  2. the first kept value of each train loss within 1% of itself: it comes from the first
     batch, collected by the untrained policy, after updates on fixed data only (reordered sums
     move it by about 1e-5 of itself; a changed loss term or coefficient by far more);
  3. every later evaluation's mean return within the band: a quarter of the span from random
     play to the preset's mark, in the preset's return units. This catches a preset that stops
     learning, not a drift; later train losses are not compared.

  The 1% bounds were not measured across CPU models (the machine that wrote the gate had no
  second model); a rounding-only change stood in for one: ``num_threads=2`` (matmuls split over
  two threads) moved ``cartpole_ppo``'s first ``loss_objective`` by 1e-5 of itself and its last
  evaluation from 182.8 to 181.0, and the tolerance mode passed it (the exact mode did not).
  Where the bounds fail on a machine whose code did not change, ``update --keep-other-machines``
  on it adds its record and the exact mode.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.learning_gate.record import Curves, RunResult

MEAN_RETURN = "reward/episode_reward_mean"
EARLY_SHARE = 0.01  # tolerance mode: what values before feedback may move (module docstring)
Tolerance = Callable[[int, float], float]  # (frames, expected value) -> allowed difference


@dataclass
class Moved:
    """The first value that differs from the reference."""

    frames: int
    metric: str
    expected: float | None  # None: the reference has no value there
    got: float | None  # None: the run has no value there

    def __str__(self) -> str:
        return (
            f"at {self.frames:,} frames: {self.metric} expected {_show(self.expected)}, "
            f"got {_show(self.got)}"
        )


@dataclass
class Verdict:
    """The gate's answer for one preset."""

    preset: str
    mode: str  # exact | tolerance | skipped | failed-run | no-reference
    reason: str  # why this mode
    moved_eval: Moved | None = None
    moved_train: Moved | None = None
    errors: list[str] = field(default_factory=list)
    wall_s: float | None = None  # the run's wall time, shown in the report

    @property
    def passed(self) -> bool:
        """True when nothing moved and the run ran (a skipped preset passes)."""
        return self.moved_eval is None and self.moved_train is None and not self.errors

    def report(self) -> str:
        """One paragraph: PASS/FAIL/SKIP, the preset, the mode and its reason, what moved."""
        if self.mode == "skipped":
            return f"SKIP {self.preset}: {self.reason}"
        took = f", {self.wall_s:.0f} s" if self.wall_s is not None else ""
        head = (
            f"{'PASS' if self.passed else 'FAIL'} {self.preset} ({self.mode}: {self.reason}{took})"
        )
        lines = [head, *(f"  {e}" for e in self.errors)]
        if self.moved_eval:
            lines.append(f"  first moved evaluation {self.moved_eval}")
        if self.moved_train:
            lines.append(f"  first moved train value {self.moved_train}")
        return "\n".join(lines)


def choose_record(
    reference: dict[str, Any], machine: dict[str, Any], versions: dict[str, str]
) -> tuple[str, str, dict[str, Any]]:
    """The mode, its reason and the record to compare with: the record of this machine and
    these versions (exact), else the first record (tolerance), saying what differs."""
    records = reference["machines"]
    for record in records:
        if record["fingerprint"] == machine and record["versions"] == versions:
            return "exact", "reference from this machine and these library versions", record
    first = records[0]
    differs = [
        f"{key} {first['fingerprint'].get(key)!r} here {machine.get(key)!r}"
        for key in sorted(machine)
        if first["fingerprint"].get(key) != machine.get(key)
    ] + [
        f"{key} {first['versions'].get(key)} here {versions.get(key)}"
        for key in sorted(set(versions) | set(first["versions"]))
        if first["versions"].get(key) != versions.get(key)
    ]
    return "tolerance", "reference's " + "; ".join(differs), first


def compare(
    preset: str,
    reference: dict[str, Any],
    run: RunResult,
    mode: str,
    reason: str,
    record: dict[str, Any],
    band: float,
) -> Verdict:
    """The verdict of ``run`` against ``record`` in ``mode`` (see the module docstring)."""
    verdict = Verdict(preset, mode, reason, wall_s=run.wall_s)
    if run.frames != reference["frames"]:
        verdict.errors.append(f"ran {run.frames:,} frames, the reference {reference['frames']:,}")
    if mode == "exact":
        verdict.moved_eval = first_moved(record["eval"], run.eval, _exact, None)
        verdict.moved_train = first_moved(record["train"], run.train, _exact, None)
    else:

        def near_start(frames: int, expected: float) -> float:
            return band * (EARLY_SHARE if frames == 0 else 1.0)

        def share_of_itself(frames: int, expected: float) -> float:
            return EARLY_SHARE * abs(expected)

        first_rows = {name: rows[:1] for name, rows in record["train"].items()}
        verdict.moved_eval = first_moved(record["eval"], run.eval, near_start, MEAN_RETURN)
        verdict.moved_train = first_moved(
            first_rows, _at(run.train, first_rows), share_of_itself, None
        )
    return verdict


def first_moved(
    expected: Curves, got: Curves, tolerance: Tolerance, only: str | None
) -> Moved | None:
    """The earliest (by frames, the mean return first at equal frames) value of ``expected``
    that ``got`` lacks or that differs by more than ``tolerance(frames, expected value)`` (0:
    by anything); ``only``: just the metrics whose name ends so. A metric the run has and the
    reference lacks moves at its first row."""
    names = sorted(set(expected) | set(got), key=lambda n: (not n.endswith(MEAN_RETURN), n))
    if only is not None:
        names = [n for n in names if n.endswith(only)]
    moved: list[tuple[int, int, Moved]] = []
    for order, name in enumerate(names):
        want = {int(f): v for f, v in expected.get(name, [])}
        have = {int(f): v for f, v in got.get(name, [])}
        for frames in sorted(set(want) | set(have)):
            a, b = want.get(frames), have.get(frames)
            if _differs(a, b, tolerance(frames, a) if a is not None else 0.0):
                moved.append((frames, order, Moved(frames, name, a, b)))
                break
    return min(moved, key=lambda m: (m[0], m[1]))[2] if moved else None


def _exact(frames: int, expected: float) -> float:
    return 0.0


def _at(curves: Curves, frames_of: Curves) -> Curves:
    """The rows of ``curves`` at the frames ``frames_of`` has, metric by metric."""
    out: Curves = {}
    for name, rows in frames_of.items():
        wanted = {int(f) for f, _ in rows}
        out[name] = [row for row in curves.get(name, []) if int(row[0]) in wanted]
    return out


def _differs(a: float | None, b: float | None, tolerance: float) -> bool:
    """True when one value is missing, or they differ by more than ``tolerance`` (by anything
    at all when it is 0); two NaNs are equal."""
    if a is None or b is None:
        return a is not b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) != math.isnan(b)
    return a != b if tolerance == 0 else abs(a - b) > tolerance


def _show(value: float | None) -> str:
    return "nothing" if value is None else repr(value)
