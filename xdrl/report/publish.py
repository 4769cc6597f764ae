"""Write a report folder as a whole: every file or none.

The report is built in a hidden folder beside the destination (same filesystem, so a rename
moves it) and swapped in by two renames: the earlier folder aside, the new one in its place. A
failure at any step (a full disk, an unwritable folder) removes the hidden folder and leaves the
earlier report as it was: never PNGs of one metric beside the tables of another, never a 0-byte
temporary file. Only a process killed between the two renames leaves the earlier report under
a hidden name (``.xdrl-report-<name>-<hex>``) beside the destination.

Entries of the earlier folder that a report does not write (a W&B run logged from it, a user's
notes) are carried into the new one; the report's own files are replaced as a set, so a file
the new report does not write (``pareto.png`` of an earlier weight sweep) is gone with the rest.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import shutil
from collections.abc import Callable, Collection
from pathlib import Path

STAGING_PREFIX = ".xdrl-report-"  # hidden folders beside the destination, while one is written


def _hidden_name(out: Path) -> Path:
    """A new hidden path beside ``out``."""
    return out.parent / f"{STAGING_PREFIX}{out.name}-{secrets.token_hex(4)}"


def _swap(staging: Path, out: Path, own: Callable[[str], bool]) -> None:
    """Put ``staging`` at ``out``; on failure ``out`` is left as it was."""
    if not out.exists():
        os.rename(staging, out)
        return
    moved: list[str] = []
    old = _hidden_name(out)
    try:
        for entry in sorted(os.listdir(out)):  # carry what the report does not write
            if not own(entry) and not (staging / entry).exists():
                os.rename(out / entry, staging / entry)
                moved.append(entry)
        os.rename(out, old)
        try:
            os.rename(staging, out)
        except OSError:
            os.rename(old, out)
            raise
    except OSError:
        for entry in moved:
            os.rename(staging / entry, out / entry)
        raise
    shutil.rmtree(old, ignore_errors=True)


def publish(out: Path, build: Callable[[Path], None], own: Collection[str]) -> None:
    """Run ``build(folder)`` on an empty hidden folder, then swap it in at ``out``.

    Args:
        out: the report folder (created with its parents; replaced when it exists).
        build: writes every file of the report into the folder it is given.
        own: names (``fnmatch`` patterns) of the report's own files; the earlier folder's
            other entries are carried over.

    Raises:
        OSError: building or swapping failed; nothing under ``out`` changed.
    """

    def is_own(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in own)

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = _hidden_name(out)
    staging.mkdir()  # the umask's mode, as a plain mkdir of the report folder would have
    try:
        build(staging)
        _swap(staging, out, is_own)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
