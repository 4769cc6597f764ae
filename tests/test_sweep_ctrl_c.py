"""One Ctrl-C on a joblib sweep: every running job finishes its iteration, checkpoints and stops;
no job starts after; the sweep table says interrupted; the same command continues the sweep.

The sweep runs in its own session (its own process group), as a terminal's foreground job does,
and gets one SIGINT for the whole group once every running job has written a checkpoint: no
timing race, only events the jobs leave on disk.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import STOPPABLE_JOB, ctrl_c_when, read_summary, run_cli

SWEEP = [
    "-m",
    "hydra/launcher=joblib",
    "hydra.launcher.n_jobs=2",
    "seed=0,1,2",
    "hydra.sweep.subdir=${hydra.job.num}",  # the job folders do not depend on the budget
    *STOPPABLE_JOB,
]


def _checkpoints(job_dir: Path) -> list[Path]:
    return sorted(p.parent for p in job_dir.glob("checkpoints/checkpoint-*/manifest.json"))


def test_one_ctrl_c_stops_every_job_at_a_checkpoint_and_the_command_continues(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    args = [*SWEEP, "total_frames=1000000", f"hydra.sweep.dir={sweep_dir}"]

    def both_checkpointed() -> bool:
        return all(_checkpoints(sweep_dir / job) for job in ("0", "1"))

    code, stderr = ctrl_c_when(args, tmp_path, both_checkpointed)
    assert code == 130, stderr[-3000:]
    assert "second Ctrl-C" not in stderr and "Traceback" not in stderr
    assert f"sweep interrupted in {sweep_dir}" in stderr

    # Both running jobs stopped at a checkpoint holding what they trained; job 2 never started.
    for job in ("0", "1"):
        summary = read_summary(sweep_dir / job)
        assert summary["status"] == "interrupted", summary
        assert 0 < summary["total_frames"] < 1_000_000
        latest = _checkpoints(sweep_dir / job)[-1]
        assert latest.name == f"checkpoint-{summary['total_frames']:012d}"
        manifest = json.loads((latest / "manifest.json").read_text())
        assert manifest, "empty checkpoint manifest"
    assert read_summary(sweep_dir / "2")["status"] == "not_started"
    assert not _checkpoints(sweep_dir / "2")
    table = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert [j["status"] for j in table["jobs"]] == ["interrupted", "interrupted", "not_started"]
    assert "interrupted (Ctrl-C)" in table["note"]
    frames = {job: read_summary(sweep_dir / job)["total_frames"] for job in ("0", "1")}

    # The same command, with a budget just above what was trained, resumes jobs 0 and 1 from
    # their checkpoints (loading them) and runs job 2.
    budget = (max(frames.values()) // 256 + 2) * 256
    again = [*SWEEP, f"total_frames={budget}", f"hydra.sweep.dir={sweep_dir}"]
    result = run_cli(again, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for job in ("0", "1", "2"):
        summary = read_summary(sweep_dir / job)
        assert summary["status"] == "completed" and summary["total_frames"] == budget
    for job in ("0", "1"):
        resumed = read_summary(sweep_dir / job)["resumed_from"]
        assert Path(resumed).name == f"checkpoint-{frames[job]:012d}"
    assert "resumed_from" not in read_summary(sweep_dir / "2")
    table = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert [j["status"] for j in table["jobs"]] == ["completed"] * 3
    assert not (sweep_dir / ".interrupted").exists()


def test_loky_workers_ignore_ctrl_c_between_jobs() -> None:
    """An idle loky worker used to die of the KeyboardInterrupt and break joblib's pool."""
    code = (
        "import signal, xdrl.sweep.stop as s; s.use_loky_workers_that_ignore_ctrl_c();"
        "from joblib import Parallel, delayed;"
        "print(Parallel(n_jobs=2, backend='loky')(delayed(signal.getsignal)(signal.SIGINT)"
        " for _ in range(2)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[<Handlers.SIG_IGN: 1>, <Handlers.SIG_IGN: 1>]"
