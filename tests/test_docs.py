"""README stays a short guide (no commit hashes, no dated measurements, links that resolve) and
the documentation site builds with warnings as errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_readme_is_short() -> None:
    assert len(README.splitlines()) < 300


def test_readme_names_no_commit_and_no_date() -> None:
    assert not re.findall(r"\b[0-9a-f]{7,40}\b", README)
    dates = r"\b20\d\d-\d\d-\d\d\b|\b(?:January|February|March|April|May|June|July|August|"
    dates += r"September|October|November|December) \d"
    assert not re.findall(dates, README)


def test_readme_links_to_docs_resolve() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)", README)
    assert "docs/benchmarks.md" in links
    assert [link for link in links if not (REPO / link).is_file()] == []


def test_docs_build_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, heading anchor or API reference fails it."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    api = (tmp_path / "api" / "index.html").read_text()
    assert 'id="xdrl.trainer_hooks.logging.LoggingHookSet"' in api
