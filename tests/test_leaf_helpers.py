"""The leaf helpers every module shares: error lines, atomic writes, flat configs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from xdrl.config.errors import first_line, trace_to_log_files
from xdrl.config.nested import flatten
from xdrl.run.layout import write_atomically


def test_first_line_is_the_first_non_empty_line() -> None:
    assert first_line(ValueError("\n  bad value  \nTraceback detail\nlast")) == "bad value"
    assert first_line(KeyError()) == "KeyError"
    assert first_line(RuntimeError("   \n ")) == "RuntimeError"


def test_write_atomically_replaces_or_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    assert write_atomically(path, "old\n") == path
    write_atomically(path, "new\n")
    assert path.read_text() == "new\n"
    with pytest.raises(TypeError):
        write_atomically(path, 3)  # type: ignore[arg-type]
    assert path.read_text() == "new\n"  # a failed write leaves the previous file whole
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # and no temporary file


def test_flatten_joins_keys_and_keeps_empty_mappings() -> None:
    node = {"env": {"id": "CartPole-v1", "make_kwargs": {}}, "seeds": [0, 1], "lr": None}
    assert flatten(node) == {
        "env.id": "CartPole-v1",
        "env.make_kwargs": {},
        "seeds": [0, 1],
        "lr": None,
    }
    assert flatten({"a": {"b": {"c": 1}}}, sep="/") == {"a/b/c": 1}


def test_trace_goes_to_log_files_only(tmp_path: Path) -> None:
    log_file = tmp_path / "run.log"
    handler = logging.FileHandler(log_file)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError as err:
            trace_to_log_files(err, "Run failed", logging.getLogger("xdrl.test"))
    finally:
        root.removeHandler(handler)
        handler.close()
    text = log_file.read_text()
    assert "Run failed" in text and "Traceback" in text and "No space left on device" in text
