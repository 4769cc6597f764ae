"""The segments of a run: each process's part of it, and the whole run's timing over them.

A run stopped and resumed is trained by several processes; each writes ``summary.json`` at its
end, listing every segment so far (``frames`` ``[start, end]``, ``started``, ``wall_time_s``,
``train_time_s``, ``frames_per_second``, ``status``, ``resumed_from``, ``budget_frames``) and
whole-run figures summed over them. Torch-free: readers of run folders may use it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def earlier_segments(summary_file: Path | None, start_frames: int) -> list[dict[str, Any]]:
    """The segments before one that starts at ``start_frames``, from ``summary_file`` (the
    ``summary.json`` of the run resumed; None: a fresh run). Frames no segment records (a
    process killed before it wrote its summary) are one segment with ``status: unrecorded``
    and no timing."""
    if summary_file is None:
        return []
    try:
        summary = json.loads(summary_file.read_text())
    except (OSError, ValueError):
        summary = {}
    summary = summary if isinstance(summary, dict) else {}
    segments = summary.get("segments")
    if isinstance(segments, list):
        segments = [s for s in segments if isinstance(s, dict) and _frames(s) is not None]
    else:  # a summary written before segments were recorded
        segments = [_segment_of_old_summary(summary)] if summary.get("total_frames") else []
    covered = max((int(s["frames"][1]) for s in segments), default=0)
    if covered < start_frames:
        segments.append({"frames": [covered, start_frames], "status": "unrecorded"})
    return segments


def _frames(segment: dict[str, Any]) -> list[int] | None:
    frames = segment.get("frames")
    ok = isinstance(frames, list) and len(frames) == 2 and all(isinstance(f, int) for f in frames)
    return frames if ok else None


def _segment_of_old_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The last segment, as a summary without ``segments`` described it."""
    resumed = summary.get("resumed_from")
    first = int(Path(resumed).name.rpartition("-")[2]) if resumed else 0
    keys = ("wall_time_s", "train_time_s", "frames_per_second", "status", "resumed_from")
    return {"frames": [first, int(summary["total_frames"])], **{k: summary.get(k) for k in keys}}


def segment_budget(budget: int, resumed_under: int | None) -> dict[str, int]:
    """A segment's budget fields: ``budget_frames``, the ``total_frames`` it trained towards
    (whole batches), and for a segment that resumed a checkpoint trained under another budget,
    ``budget_changed_from``, that budget (its schedules were re-anchored to the new one)."""
    fields = {"budget_frames": budget}
    if resumed_under is not None and resumed_under != budget:
        fields["budget_changed_from"] = resumed_under
    return fields


def whole_run_timing(segments: list[dict[str, Any]]) -> dict[str, float | None]:
    """``wall_time_s``, ``train_time_s`` and ``frames_per_second`` of the whole run: the sums
    over its segments (those with a recorded timing) and the frames they trained per second."""
    timed = [s for s in segments if s.get("wall_time_s") is not None]
    train = sum(float(s.get("train_time_s") or 0.0) for s in timed)
    trained = sum(s["frames"][1] - s["frames"][0] for s in timed if s.get("train_time_s"))
    return {
        "wall_time_s": round(sum(float(s["wall_time_s"]) for s in timed), 3),
        "train_time_s": round(train, 3),
        "frames_per_second": round(trained / train, 1) if train > 0 else None,
    }
