"""SLURM through hydra-submitit-launcher, on the local cluster of scripts/local-slurm.sh.

Run with ``make test-slurm`` (starts the cluster, then ``pytest -m slurm``). Without a usable
cluster every test here is skipped, unless ``XDRL_REQUIRE_SLURM=1`` (set by ``make test-slurm``)
turns that into a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ENV, REPO, SMALL, XDRL_TRAIN, read_summary, run_cli, wait_for

pytestmark = pytest.mark.slurm

PARTITION = "debug"
# timeout_min >= 15: below 10 minutes submitit counts a preemption signal as a timeout.
SLURM = [
    "hydra/launcher=slurm",
    f"hydra.launcher.partition={PARTITION}",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1",
    "hydra.launcher.timeout_min=15",
    "hydra.launcher.max_num_timeout=1",
]
BUDGET = 12_288  # ~30-60 s of training on 2 busy cores: time to preempt it mid-run


def _cluster_down_reason() -> str | None:
    """Why the local cluster cannot run jobs now (None: it can)."""
    if shutil.which("sinfo") is None or shutil.which("sacct") is None:
        return (
            "SLURM is not installed (no sinfo/sacct); start it: bash scripts/local-slurm.sh start"
        )
    try:
        part = subprocess.run(
            ["sinfo", "-h", "-p", PARTITION, "-o", "%a %T"],
            capture_output=True,
            text=True,
            timeout=15,
        )
        acct = subprocess.run(
            ["sacct", "-n", "-X", "-S", "now-1hours"], capture_output=True, text=True, timeout=15
        )
    except subprocess.TimeoutExpired:
        return "the SLURM cluster does not answer (sinfo/sacct timed out)"
    states = part.stdout.split()
    if part.returncode or len(states) < 2 or states[0] != "up":
        return f"partition {PARTITION!r} is not up: {part.stdout.strip() or part.stderr.strip()}"
    if not states[1].startswith(("idle", "mixed", "allocated", "completing")):
        return f"the node of partition {PARTITION!r} is {states[1]}"
    if acct.returncode:
        return f"accounting (sacct) does not work: {acct.stderr.strip()}"
    return None


@pytest.fixture(scope="module", autouse=True)
def slurm_cluster() -> None:
    """Skip (or, with XDRL_REQUIRE_SLURM=1, fail) when the local cluster is down."""
    reason = _cluster_down_reason()
    if reason is None:
        return
    if os.environ.get("XDRL_REQUIRE_SLURM") == "1":
        pytest.fail(f"XDRL_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


def _job_ids(sweep_dir: Path) -> list[str]:
    """SLURM job ids submitit used, from its folders (``<id>`` or ``<array>_<task>``)."""
    return sorted(p.parent.name for p in sweep_dir.glob(".submitit/*/*_submitted.pkl"))


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Iterator[Path]:
    """The sweep folder; whatever job of it is still queued or running is cancelled at the end."""
    path = tmp_path / "sweep"
    yield path
    ids = _job_ids(path)
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30)


def _sacct_states(job_id: str) -> list[str]:
    out = subprocess.run(
        ["sacct", "-j", job_id, "-D", "-X", "-n", "-P", "--format=JobID,State,Start,End"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


def _submission_python(sweep_dir: Path) -> str:
    script = next(sweep_dir.glob(".submitit/*/*_submission.sh")).read_text()
    (srun,) = [line for line in script.splitlines() if line.startswith("srun ")]
    return next(word for word in srun.split() if word.endswith(("/python", "/python3")))


def test_two_job_sweep_on_slurm(tmp_path: Path, sweep_dir: Path) -> None:
    args = ["-m", *SLURM, "seed=0,1", *SMALL, "logging=none", f"hydra.sweep.dir={sweep_dir}"]
    result = run_cli(args, cwd=tmp_path, timeout=170)
    assert result.returncode == 0, result.stderr[-3000:]

    jobs = sorted(p.parent for p in sweep_dir.glob("*/.hydra"))
    assert len(jobs) == 2
    for job_dir in jobs:
        summary = read_summary(job_dir)
        assert (summary["status"], summary["total_frames"]) == ("completed", 512), job_dir.name
    table = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert [(j["num"], j["overrides"], j["status"]) for j in table["jobs"]] == [
        (0, ["seed=0"], "completed"),
        (1, ["seed=1"], "completed"),
    ]
    assert "2/2 jobs completed" in result.stdout
    # The job runs the submitting venv's interpreter (submitit uses sys.executable).
    assert Path(_submission_python(sweep_dir)).parent == Path(XDRL_TRAIN).parent


def test_preempted_job_is_requeued_and_resumes(tmp_path: Path, sweep_dir: Path) -> None:
    args = [
        "-m",
        *SLURM,
        "seed=0",
        f"total_frames={BUDGET}",
        "frames_per_batch=256",
        "env.num_envs=4",
        "algorithm.build.epochs=2",
        f"eval.interval_frames={BUDGET}",
        "eval.episodes=2",
        "eval.max_steps=50",
        "checkpoint.interval_frames=512",
        "logging=csv",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    log = tmp_path / "xdrl-train.out"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [XDRL_TRAIN, *args], cwd=tmp_path, env=ENV, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(lambda: any(sweep_dir.glob("0_*/checkpoints/checkpoint-*")), proc, log=log)
        (job_id,) = _job_ids(sweep_dir)
        # Without --full the signal goes to the job step, where submitit's handler listens.
        subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)
        proc.wait(timeout=170)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, log.read_text()[-3000:]

    (job_dir,) = sorted(p.parent for p in sweep_dir.glob("*/.hydra"))
    summary = read_summary(job_dir)
    assert summary["status"] == "completed"
    assert summary["total_frames"] == BUDGET
    assert "resumed_from" in summary, summary
    assert int(summary["resumed_from"].rsplit("-", 1)[-1]) < BUDGET  # stopped mid-run

    job_log = "\n".join(p.read_text() for p in job_dir.glob("*.log"))
    assert "SIGUSR2 received" in job_log and "Resumed from" in job_log
    submitit_log = "\n".join(p.read_text() for p in sweep_dir.glob(".submitit/*/*_log.err"))
    assert "this job is preempted" in submitit_log

    deadline = time.monotonic() + 30  # accounting lags a little behind the job
    lines = _sacct_states(job_id)
    while not any("|REQUEUED|" in line for line in lines):
        assert time.monotonic() < deadline, f"no REQUEUED record in sacct: {lines}"
        time.sleep(1)
        lines = _sacct_states(job_id)
    print("\n".join([f"sacct -j {job_id} -D -X:", *lines]))


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (pip install 'xdrl[ray]'; make test-extra installs it)",
)
def test_ray_slurm_script_trains_one_run_on_the_allocation_s_ray_cluster(tmp_path: Path) -> None:
    """``sbatch scripts/ray-slurm.sh``: the Ray head starts on the allocation's node, the run
    joins it (``collector=ray collector.address=<head>``), trains and writes its summary, and
    the job ends with the cluster stopped (its folder under /tmp removed)."""
    run_dir = tmp_path / "run"
    out = tmp_path / "job.out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", f"--partition={PARTITION}", "--nodes=1", "--ntasks-per-node=1",
         "--cpus-per-task=2", "--mem=2G", f"--output={out}",
         f"--export=ALL,XDRL_TRAIN={XDRL_TRAIN}", str(REPO / "scripts" / "ray-slurm.sh"),
         *SMALL, "logging=none", "eval=none", "num_threads=1", "collector.workers=2",
         f"run_dir={run_dir}"],
        capture_output=True, text=True, timeout=60, env=ENV,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    try:
        _wait_for_job(job)
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)
    text = out.read_text()
    states = _sacct_states(job)
    assert states and states[0].split("|")[1] == "COMPLETED", (states, text[-3000:])
    assert read_summary(run_dir)["status"] == "completed"
    assert "ray-slurm.sh: 1 Ray nodes at " in text
    assert "2 Ray actors x 2 envs on the Ray cluster at " in text
    assert not Path(f"/tmp/xdrl-ray-{job}").exists()


def _wait_for_job(job: str) -> None:
    """Until ``job`` has a final state in accounting (``sacct``): not until ``squeue`` prints
    nothing, which it also does when a busy ``slurmctld`` does not answer (CI once saw the job
    still RUNNING after that). 15 minutes is a safety net, not a deadline."""
    deadline = time.monotonic() + 900
    while True:
        states = _sacct_states(job)
        if states and states[0].split("|")[1] not in (
            "PENDING",
            "RUNNING",
            "REQUEUED",
            "SUSPENDED",
        ):
            return
        assert time.monotonic() < deadline, f"job {job} not ended after 15 min: {states}"
        time.sleep(1)
