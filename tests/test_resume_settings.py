"""A checkpoint resumes whatever the run that wrote it ran under: a terminal or not, with or
without evaluation and logging (issue 11, problem 1)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from tests.conftest import ENV, SMALL, WANDB_OFFLINE, XDRL_TRAIN, read_summary, run_script

BASE = [
    *[o for o in SMALL if not o.startswith("total_frames")],
    "checkpoint.interval_frames=256",
]


def _run(args: list[str], run_dir: Path, terminal: bool) -> str:
    """``xdrl-train`` to the end, its output on an 80-column pseudo-terminal or on a pipe."""
    cmd = [XDRL_TRAIN, *BASE, *args, f"hydra.run.dir={run_dir}"]
    if not terminal:
        proc = run_script("xdrl-train", cmd[1:], env=WANDB_OFFLINE)
        assert proc.returncode == 0, proc.stderr[-2000:]
        logs = "".join(p.read_text() for p in run_dir.glob("*.log"))
        assert "\x1b" not in proc.stdout + proc.stderr + logs  # no ANSI codes in files
        return proc.stdout + proc.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(cmd, env=ENV, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:  # drain the terminal until the child closes it
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.wait(timeout=600) == 0, text[-2000:]
    return text


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((["logging=csv"], True), (["logging=csv"], False)),  # terminal, then a batch job
        ((["logging=csv"], False), (["logging=csv"], True)),  # and the reverse
        ((["eval=none", "logging=none"], False), (["logging=csv"], False)),
        ((["logging=csv"], False), (["eval=none", "logging=none"], False)),
    ],
    ids=["terminal-then-pipe", "pipe-then-terminal", "bare-then-full", "full-then-bare"],
)
def test_a_checkpoint_resumes_under_other_settings(tmp_path: Path, first, second) -> None:
    run_dir = tmp_path / "run"
    _run([*first[0], "total_frames=512"], run_dir, terminal=first[1])
    assert read_summary(run_dir)["total_frames"] == 512
    out = _run([*second[0], "total_frames=1024"], run_dir, terminal=second[1])
    summary = read_summary(run_dir)
    assert summary["status"] == "completed", out[-2000:]
    assert summary["total_frames"] == 1024
    assert int(Path(summary["resumed_from"]).name.split("-")[-1]) == 512
    assert "could not be loaded" not in out and "does not fit" not in out


def test_terminal_bar_fits_80_columns_keeps_log_lines_whole_and_starts_at_resumed_frames(
    tmp_path: Path,
) -> None:
    """Issue 11, progress on a terminal: one bar within 80 columns (frames, percent, ETA,
    fps, return), log lines above it rather than through it, a resumed bar at its frames."""
    run_dir = tmp_path / "run"
    _run(["logging=csv", "total_frames=512"], run_dir, terminal=False)
    out = _run(["logging=csv", "total_frames=1536"], run_dir, terminal=True)
    screens = [s for line in out.split("\n") for s in line.split("\r") if s.strip()]
    bars = [s for s in screens if "%|" in s]
    assert bars, out
    assert all(len(s) <= 80 for s in screens if "%|" in s), bars
    assert bars[0].lstrip().startswith("33%|") and "512/1.54k" in bars[0], bars[0]
    assert bars[-1].lstrip().startswith("100%|") and "1.54k/1.54k" in bars[-1], bars[-1]
    assert "frames/s" in bars[-1] and ", R " in bars[-1], bars[-1]
    assert not any("%|" in s and "[INFO]" in s for s in screens)  # no log line through the bar
    logs = [s for s in screens if "][INFO] - " in s]
    assert any("Resumed from" in s for s in logs) and any("Wrote" in s for s in logs)
    assert "\x1b[92m" not in out  # TorchRL's green log prefix is gone
