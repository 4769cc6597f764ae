"""Files a run writes that others read while it runs: their names, and how they are written."""

from __future__ import annotations

import os
from pathlib import Path

SUMMARY_FILE = (
    "summary.json"  # a run's outcome, written by xdrl.run.lifecycle, read by sweeps and reports
)


def write_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a hidden temporary file beside it, flushed to disk and
    renamed into place: a reader, or the next start after a crash, sees the old file or the new
    one, never half of one; a failed write removes its temporary file. Returns ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
