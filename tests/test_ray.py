"""collector=ray: TorchRL's RayCollector in a run, on a real local Ray (training/ray_workers.py).

Marker ``extra``: ``make test-extra`` installs Ray and runs these; ``make test`` leaves them out,
and without Ray they are skipped. Every run starts a Ray (its GCS, raylet and a fresh
interpreter per actor), so the budgets are a few batches.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import (
    SMALL,
    WANDB_OFFLINE,
    compose_config,
    read_scalars,
    read_summary,
    run_cli,
    start_script,
    wait_for,
)
from tests.test_workers import CRASHING, RUN, WORKERS, _gone, _run_log, _wait, _worker_pids
from xdrl.policy.loading import load_policy

pytestmark = [
    pytest.mark.extra,
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="Ray is not installed (pip install 'xdrl[ray]'; make test-extra installs it)",
    ),
]

RAY = ["collector=ray", "collector.workers=2"]


def _logs(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every logged series but the timers (wall-clock)."""
    return {k: v for k, v in read_scalars(run_dir / "logs").items() if not k.startswith("timers/")}


def test_ray_actors_log_the_in_process_keys_and_the_process_workers_numbers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PPO CartPole: collector=ray has collector=single's metric keys and frame counters, and
    the very numbers of collector=multiprocess with as many workers (each actor steps the envs,
    seeds and generator a worker process does, and gets the learner's weights before every
    batch: a stale policy would act differently from the second batch on)."""
    from xdrl.run.lifecycle import run

    caplog.set_level(logging.INFO, logger="xdrl")
    logged = {}
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, extra in (("single", []), ("process", WORKERS), ("ray", RAY)):
            run(compose_config([*SMALL, "num_threads=1", *extra], tmp_path / name))
            assert read_summary(tmp_path / name)["status"] == "completed"
            logged[name] = read_scalars(tmp_path / name / "logs")
        assert torch.get_num_threads() == 1  # the run's thread count survives Ray
    finally:
        torch.set_num_threads(before)
    assert sorted(logged["ray"]) == sorted(logged["single"])
    batches = [256, 512]
    assert logged["ray"]["counters/total_frames"] == [(0, 0.0)] + [(f, f) for f in batches]
    assert logged["ray"]["counters/current_frames"] == [(f, 256.0) for f in batches]
    assert _logs(tmp_path / "ray") == _logs(tmp_path / "process")
    assert "2 Ray actors x 2 envs on a local Ray, RayLeanCollector" in caplog.text


def test_a_stopped_ray_run_resumes_exactly(tmp_path: Path) -> None:
    """Stopped after its first batch (a stop request: the checkpoint asks the actors for their
    state) and resumed by the same command, a Ray run with observation normalization logs what
    an uninterrupted run with worker processes logs, metric for metric: the actors' envs,
    episodes and generators and the run's statistics came back from the checkpoint."""
    from xdrl.run.lifecycle import run
    from xdrl.trainer_hooks.stop_request import write_stop_request

    args = [*RUN, "env=pendulum", "algorithm=ppo", "env.normalize_observations=true",
            "total_frames=768", "collector.workers=2"]  # fmt: skip
    run(compose_config([*args, "collector=multiprocess"], tmp_path / "process"))
    run_dir = tmp_path / "ray"
    write_stop_request(run_dir, "stopped", "test")
    run(compose_config([*args, "collector=ray"], run_dir))
    stopped = read_summary(run_dir)
    assert (stopped["status"], stopped["total_frames"]) == ("stopped", 256)
    run(compose_config([*args, "collector=ray"], run_dir))
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["resumed_from"].endswith("checkpoint-000000000256")
    assert summary["resume_exact"] is True
    logged, uninterrupted = _logs(run_dir), _logs(tmp_path / "process")
    assert logged == uninterrupted
    assert [step for step, _ in logged["train/agents/loss_objective"]] == [256, 512, 768]


def test_an_actor_whose_env_raises_stops_the_run_with_one_line_and_a_checkpoint_that_loads(
    tmp_path: Path,
) -> None:
    """As ``collector=multiprocess``'s test: worker 1's env raises in the third batch; the
    run names it, its last checkpoint loads with the run's statistics, and the same command
    resumes exactly and completes."""
    run_dir = tmp_path / "run"
    args = [*RUN, *RAY, *CRASHING, "env.normalize_observations=true", "total_frames=1024",
            f"run_dir={run_dir}"]  # fmt: skip
    result = run_cli(args, tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "xdrl-train: error: collector worker 1 failed: SimulatorCrash: simulated crash of the "
        "sub-env seeded 2; run the same command to resume from the last checkpoint"
    ), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert read_summary(run_dir)["status"] == "failed"
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert saved == ["checkpoint-000000000256", "checkpoint-000000000512"]
    policy = load_policy(run_dir)
    assert policy.frames == 512 and policy.deterministic_module.normalized
    assert policy(np.zeros(4, dtype=np.float32)) in (0, 1)

    result = run_cli(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_summary(run_dir)
    assert (summary["status"], summary["resume_exact"]) == ("completed", True)
    assert summary["resumed_from"].endswith("checkpoint-000000000512")
    last = sorted((run_dir / "checkpoints").glob("checkpoint-*"))[-1]
    state = torch.load(last / "components" / "0000-collector" / "state.pt", weights_only=False)
    counts = [v for k, v in state["env_state_dict"].items() if k.endswith("_extra_state")]
    assert last.name.endswith("1024") and int(counts[0]["count.-|-.observation"]) == 4 + 1024


def _descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` now (``/proc``), with its name."""
    parents, names = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat.split(" (", 1)[1].rsplit(") ", 1)
            parents[int(entry.name)], names[int(entry.name)] = int(rest.split()[1]), name
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {p: names[p] for p in found}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_to_the_process_group_leaves_no_ray_process(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A terminal's Ctrl-C (or SLURM's SIGTERM) reaches the run and every process it started,
    Ray's own included: the run still checkpoints (asking the actors), then stops the actors and
    its Ray; nothing it started outlives it, and the checkpoint loads."""
    run_dir = tmp_path / "run"
    args = [*RUN, *RAY, "total_frames=1000000", f"run_dir={run_dir}"]
    proc = start_script("xdrl-train", args, tmp_path, WANDB_OFFLINE, stderr=subprocess.PIPE,
                        start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: any((run_dir / "logs").rglob("total_frames.csv")), proc, timeout=300)
        started = _descendants(proc.pid)
        names = set(started.values())
        assert {"raylet", "gcs_server"} <= names, names
        assert sum(n.startswith("ray::RayLean") for n in names) >= 1, names
        os.killpg(proc.pid, sig)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    summary = read_summary(run_dir)
    assert summary["status"] == ("interrupted" if sig == signal.SIGINT else "stopped")
    assert (run_dir / "checkpoints" / f"checkpoint-{summary['total_frames']:012d}").is_dir()
    assert load_policy(run_dir).frames == summary["total_frames"]
    _wait(lambda: all(map(_gone, started)))


def test_a_killed_actor_stops_the_run_with_one_line(tmp_path: Path) -> None:
    """SIGKILL to one actor (a lost node looks the same to the run): Ray's ``RayActorError``
    becomes the one line naming the worker; the run's Ray goes with it."""
    run_dir = tmp_path / "run"
    args = [*RUN, *RAY, "total_frames=1000000", f"run_dir={run_dir}"]
    proc = start_script("xdrl-train", args, tmp_path, WANDB_OFFLINE, stderr=subprocess.PIPE,
                        start_new_session=True)  # fmt: skip
    try:
        # a whole checkpoint (its checksums written last): the failure line then advises a resume
        wait_for(lambda: any(run_dir.glob("checkpoints/*/checksums.json")), proc, timeout=300)
        started = _descendants(proc.pid)
        pids = _worker_pids(run_dir)
        assert len(pids) == 2 and set(pids) <= set(started)
        os.kill(pids[0], signal.SIGKILL)
        assert proc.wait(timeout=300) == 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.stderr is not None
    last = proc.stderr.read().splitlines()[-1]
    assert last.startswith("xdrl-train: error: collector worker 0 died (") and last.endswith(
        "; run the same command to resume from the last checkpoint"
    ), last
    assert read_summary(run_dir)["status"] == "failed"
    _wait(lambda: all(map(_gone, started)))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_run_joins_a_running_ray_head_and_leaves_it_running(tmp_path: Path) -> None:
    """``ray start --head`` on a free port (this test's, stopped at the end through its process
    group); ``collector.address=127.0.0.1:<port>`` trains on it, and the head outlives the run."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    port = _free_port()
    # the cluster's token, which a run joining an explicit address sends only when told to
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    temp = Path("/tmp") / f"xdrl-ray-{port}"  # Ray's socket paths must stay short
    head = subprocess.Popen(
        [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--block",
         "--include-dashboard=false", f"--temp-dir={temp}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, **auth},
    )  # fmt: skip
    try:
        wait_for(lambda: _answers(port), head, timeout=300)
        run_dir = tmp_path / "run"
        result = run_cli([*SMALL, *RAY, f"collector.address=127.0.0.1:{port}", "num_threads=1",
                          f"run_dir={run_dir}"], tmp_path, env=auth)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert read_summary(run_dir)["status"] == "completed"
        assert f"2 Ray actors x 2 envs on the Ray cluster at 127.0.0.1:{port}" in _run_log(run_dir)
        assert head.poll() is None and _answers(port)  # the run left the cluster running
        cluster = _descendants(head.pid)
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=120)
    _wait(lambda: all(map(_gone, cluster)))
    shutil.rmtree(temp, ignore_errors=True)


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return False
    return True


def test_the_private_names_ray_workers_inherits_are_in_the_tripwire() -> None:
    """tests/test_private_apis.py walks the modules make test can import; this one needs Ray."""
    from tests.test_private_apis import inherited_but_unlisted

    assert inherited_but_unlisted(["xdrl.training.ray_workers"]) == {}
