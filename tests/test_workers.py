"""collector=multiprocess: TorchRL's multi-process collector in a run (xdrl/training/workers.py).

Every run here starts worker processes (a fresh interpreter each: TorchRL spawns them), so the
budgets are a few batches; speed is measured by ``benchmarks/modes/collectors.py``, not here.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from functools import partial
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
from xdrl.config.check import check_config
from xdrl.config.errors import ConfigError
from xdrl.policy.loading import load_policy

WORKERS = ["collector=multiprocess", "collector.workers=2"]
# SleepyCartPole without the wait: sub-env k is seeded seed + k, so fail_seed=2 dooms worker 1's
# first env (4 envs, 2 per worker) once it has taken 150 steps in its process: in the third
# 256-frame batch (64 steps per env per batch), after the checkpoints at 256 and 512 frames.
CRASHING = [
    "env=gym",
    "env.id=xdrl.envs.testing:SleepyCartPole-v1",
    "+env.make_kwargs.step_sleep_s=0.0",
    "+env.make_kwargs.fail_after_steps=150",
    "+env.make_kwargs.fail_seed=2",
]
RUN = [
    "num_threads=1",
    "frames_per_batch=256",
    "env.num_envs=4",
    "algorithm.build.epochs=1",
    "eval.enabled=false",
    "checkpoint.interval_frames=256",
    "logging=csv",
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["collector.workers=3", "collector=multiprocess"],
         "3 workers cannot share env.num_envs=8 envs evenly; set collector.workers to one of "
         "[2, 4, 8]"),
        (["collector.workers=2"], "2 workers with collector=single (in-process)"),
        ([*WORKERS, "algorithm=dqn", "collector.sync=false", "env.normalize_observations=true"],
         "true with collector.sync=false is not supported (asynchronous workers collect while "
         "the run merges"),
        (["collector.env_threads=2", "env.batching=serial"],
         "2 threads step the envs of env.batching=vector only, not serial"),
        ([*WORKERS, "collector.sync=false"],
         "false is for off-policy algorithms (dqn, sac, td3), not ppo: an on-policy batch must "
         "come from the current policy"),
        (["algorithm=dqn", "collector.sync=false"], "false needs worker processes"),
        ([*WORKERS, "algorithm=dqn", "collector.update_interval=4"],
         "4 applies to collector.sync=false only"),
        ([*WORKERS, "collector.address=auto"],
         "auto is the Ray cluster of collector=ray, and this run's collector is process; set "
         "collector=ray, or remove collector.address"),
    ],
)  # fmt: skip
def test_bad_worker_settings_are_config_errors(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(compose_config(overrides, tmp_path / "run"))


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_ray_address_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``collector.address`` is checked with one TCP connection (no Ray needed: make test runs
    without it); ``auto`` with no cluster recorded on the machine names where it looked."""
    from xdrl.config.check import _check_ray_address

    port = _closed_port()
    with pytest.raises(ConfigError, match=re.escape(f"no Ray head answers at 127.0.0.1:{port}")):
        _check_ray_address(f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match="is not auto or host:port"):
        _check_ray_address("ray://head:10001")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # no ray/ray_current_cluster there
    with pytest.raises(ConfigError, match="auto found no running Ray cluster"):
        _check_ray_address("auto")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match=re.escape(f"no Ray head answers at 127.0.0.1:{port}")):
        _check_ray_address("auto")


def test_a_bad_worker_count_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    result = run_cli([*WORKERS, "collector.workers=3", f"run_dir={tmp_path / 'run'}"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "xdrl-train: config error: collector.workers: 3 workers cannot share env.num_envs=8 envs "
        "evenly; set collector.workers to one of [2, 4, 8], or env.num_envs to a multiple of 3"
    ]
    assert not (tmp_path / "run").exists()


def test_more_workers_than_cores_is_a_warning(tmp_path: Path, caplog) -> None:
    workers = len(os.sched_getaffinity(0)) * 2
    cfg = compose_config(
        ["collector=multiprocess", f"collector.workers={workers}", f"env.num_envs={workers}",
         f"frames_per_batch={workers * 16}"], tmp_path / "run")  # fmt: skip
    assert check_config(cfg).collector.workers == workers
    assert f"collector.workers={workers} is more than the" in caplog.text


def test_workers_log_the_same_metric_keys_and_counters_as_the_in_process_run(
    tmp_path: Path,
) -> None:
    from xdrl.run.lifecycle import run

    logged = {}
    before = torch.get_num_threads()  # this test process's (earlier tests may have set it)
    torch.set_num_threads(1)  # below the initial pool size, which TorchRL's shutdown restores
    try:
        # the workers step their envs in 2 threads each (collector.env_threads)
        for name, extra in (("single", []), ("workers", [*WORKERS, "collector.env_threads=2"])):
            run(compose_config([*SMALL, "num_threads=1", *extra], tmp_path / name))
            logged[name] = read_scalars(tmp_path / name / "logs")
            assert read_summary(tmp_path / name)["status"] == "completed"
        assert torch.get_num_threads() == 1  # the run's thread count survives the workers
    finally:
        torch.set_num_threads(before)
    assert sorted(logged["workers"]) == sorted(logged["single"])
    batches = [256, 512]  # SMALL: 512 frames in 256-frame batches
    for name in logged:
        assert logged[name]["counters/total_frames"] == [(0, 0.0)] + [(f, f) for f in batches]
        assert logged[name]["counters/current_frames"] == [(f, 256.0) for f in batches]
        assert [step for step, _ in logged[name]["train/agents/loss_objective"]] == batches


def test_recurrent_workers_store_the_states_their_steps_ran_from(tmp_path: Path) -> None:
    """A recurrent PPO collected by a worker: every stored log-probability and value of the
    second batch (rows that start mid-episode from a carried state, episodes that start inside
    rows) is what TorchRL's recurrent-mode forward gives from the stored states, so the worker's
    envs carried the cells' states step to step and zeroed them at ``is_init``. One worker:
    each costs a fresh interpreter, and the primers reach every worker the same way."""
    from torchrl.modules import set_recurrent_mode

    from xdrl.algorithms.recurrent import state_keys, zero_at_starts
    from xdrl.training.build import build_trainer

    cfg = compose_config(
        ["experiment=cartpole_novel_lstm", "collector=multiprocess", "collector.workers=1",
         "env.num_envs=4", "frames_per_batch=256",
         "total_frames=512", "logging=none", "eval=none", "checkpoint=none", "num_threads=1"],
        tmp_path / "run",
    )  # fmt: skip
    run_ = build_trainer(cfg)
    try:
        batches = [batch.clone() for batch in itertools.islice(run_.trainer.collector, 2)]
    finally:
        run_.close()
    batch = batches[1]
    assert batch.batch_size == torch.Size([4, 64])
    assert batch["is_init"][:, 1:].any(), "no episode started inside a row: the test would not bite"
    assert (~batch["is_init"][:, 0]).any() and batch["actor_c"][:, 0].abs().sum() > 0
    loss = run_.trainer.loss_module
    actor, critic = loss.actor_network, loss.critic_network
    keys = [*state_keys(actor), *state_keys(critic)]
    with set_recurrent_mode(True), torch.no_grad():
        log_prob = actor.get_dist(zero_at_starts(batch, keys)).log_prob(batch["action"])
        value = critic(zero_at_starts(batch, keys))["state_value"]
    torch.testing.assert_close(log_prob, batch["action_log_prob"], rtol=0, atol=1e-5)
    torch.testing.assert_close(value, batch["state_value"], rtol=0, atol=1e-5)


def test_async_dqn_workers_train_stop_and_resume_with_the_in_process_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """collector.sync=false: DQN with an asynchronous worker, stopped after its first batch (a
    stop request: the checkpoint asks the worker for its state while it collects) and resumed by
    the same command, logs the in-process run's metric keys, every batch once. One worker: each
    costs a fresh interpreter; 2 asynchronous workers run in the collectors benchmark."""
    from xdrl.run.lifecycle import run
    from xdrl.trainer_hooks.stop_request import write_stop_request

    dqn = ["algorithm=dqn", "total_frames=768", "algorithm.build.init_random_frames=256",
           *(o for o in RUN if not o.startswith("algorithm."))]  # fmt: skip
    caplog.set_level(logging.INFO, logger="xdrl")
    asynchronous = ["collector=multiprocess", "collector.workers=1", "collector.sync=false",
                    "collector.update_interval=2"]  # fmt: skip
    run(compose_config(dqn, tmp_path / "single"))
    run_dir = tmp_path / "async"
    write_stop_request(run_dir, "stopped", "test")
    run(compose_config([*dqn, *asynchronous], run_dir))
    stopped = read_summary(run_dir)
    assert (stopped["status"], stopped["total_frames"]) == ("stopped", 256)
    run(compose_config([*dqn, *asynchronous], run_dir))
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["resumed_from"].endswith("checkpoint-000000000256")
    assert summary["resume_exact"] is True  # each worker's envs, episodes and generator
    assert "1 processes x 4 envs, AsyncWorkerCollector" in caplog.text
    assert "Resume is exact" in caplog.text
    single, logged = read_scalars(tmp_path / "single" / "logs"), read_scalars(run_dir / "logs")
    assert sorted(logged) == sorted(single)
    batches = [256, 512, 768]
    assert logged["counters/total_frames"] == single["counters/total_frames"]
    assert logged["counters/current_frames"] == [(f, 256.0) for f in batches]
    assert [step for step, _ in logged["train/agents/loss"]] == batches
    assert all(np.isfinite(value) for _, value in logged["train/agents/loss"])


def test_a_worker_whose_env_raises_stops_the_run_with_one_line_and_a_checkpoint_that_loads(
    tmp_path: Path,
) -> None:
    """With observation normalization (the workers collect on TorchRL's Collector): the last
    checkpoint holds the run's statistics where xdrl-eval reads them."""
    run_dir = tmp_path / "run"
    args = [*RUN, *WORKERS, *CRASHING, "env.normalize_observations=true", "total_frames=1024",
            f"run_dir={run_dir}"]  # fmt: skip
    result = run_cli(args, tmp_path)
    assert result.returncode == 1
    line = (
        "xdrl-train: error: collector worker 1 failed: SimulatorCrash: simulated crash of the "
        "sub-env seeded 2; run the same command to resume from the last checkpoint"
    )
    assert result.stderr.splitlines()[-1] == line, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    summary = read_summary(run_dir)
    assert summary["status"] == "failed"
    assert summary["error"].startswith("collector worker 1 failed: SimulatorCrash")
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert saved == ["checkpoint-000000000256", "checkpoint-000000000512"]
    policy = load_policy(run_dir)  # what xdrl-eval and xdrl-export load
    assert policy.frames == 512
    assert policy.deterministic_module.normalized  # else load_policy raises: no statistics
    assert policy(np.zeros(4, dtype=np.float32)) in (0, 1)

    # Another worker count would find no saved envs for its workers: one line, nothing touched.
    result = run_cli([*args, "collector.workers=4"], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1:] == [  # after the warning: 4 workers > 2 cores
        "xdrl-train: config error: collector.workers: the collector differs from the one "
        f"{run_dir / 'checkpoints' / saved[-1]} was trained with in collector.workers 2 -> 4 (its "
        "checkpoint holds each worker's envs mid-episode); pass collector.workers=2 to continue "
        "that run, or another hydra.run.dir (or resume=never) to train with the new collector"
    ]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == saved

    # The same command resumes exactly from 512 frames (the doomed env restored mid-episode, in a
    # new worker that counts its steps from 0) and completes the 1,024 frames before step 150.
    result = run_cli(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert summary["resumed_from"].endswith("checkpoint-000000000512")
    assert summary["resume_exact"] is True
    assert "Resume is exact" in _run_log(run_dir)
    # the run's statistics went on from the checkpoint's: the 4 envs' first observations and
    # every frame since (a restart from fresh statistics would count 4 + 512)
    last = sorted((run_dir / "checkpoints").glob("checkpoint-*"))[-1]
    saved = torch.load(last / "components" / "0000-collector" / "state.pt", weights_only=False)
    counts = [v for k, v in saved["env_state_dict"].items() if k.endswith("_extra_state")]
    assert last.name.endswith("1024") and int(counts[0]["count.-|-.observation"]) == 4 + 1024


def _run_log(run_dir: Path) -> str:
    return "".join(p.read_text() for p in run_dir.glob("*.log"))


def _worker_pids(run_dir: Path) -> list[int]:
    match = re.search(r"Collector workers started: .*\(pids ([\d, ]+)\)", _run_log(run_dir))
    return [int(p) for p in match[1].split(", ")] if match else []


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie awaiting its reaper counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize(
    ("sig", "target"),
    [(signal.SIGINT, "group"), (signal.SIGKILL, "run"), (signal.SIGKILL, "worker")],
    ids=["ctrl-c-to-the-process-group", "sigkill-to-the-run-only", "sigkill-to-the-worker"],
)
def test_no_worker_outlives_the_run(tmp_path: Path, sig: signal.Signals, target: str) -> None:
    run_dir = tmp_path / "run"
    one_worker = ["collector=multiprocess", "collector.workers=1"]  # each start costs seconds
    args = [*RUN, *one_worker, "total_frames=1000000", f"run_dir={run_dir}"]
    proc = start_script("xdrl-train", args, tmp_path, WANDB_OFFLINE, stderr=subprocess.PIPE,
                        start_new_session=True)  # fmt: skip
    try:
        # a whole checkpoint (its checksums written last): the failure line then advises a resume
        wait_for(lambda: any(run_dir.glob("checkpoints/*/checksums.json")), proc)
        pids = _worker_pids(run_dir)
        assert len(pids) == 1 and not any(map(_gone, pids))
        if target == "group":  # as a terminal's Ctrl-C: the run and its workers get it
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid if target == "run" else pids[0], sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig == signal.SIGINT:  # the run checkpointed (asking the worker), then joined it
        assert proc.returncode == 128 + signal.SIGINT
        summary = read_summary(run_dir)
        assert summary["status"] == "interrupted"
        assert (run_dir / "checkpoints" / f"checkpoint-{summary['total_frames']:012d}").is_dir()
        assert all(map(_gone, pids))
    elif target == "worker":  # the run fails with one line, whatever it was doing
        assert proc.returncode == 1
        assert proc.stderr is not None
        assert proc.stderr.read().splitlines()[-1] == (
            "xdrl-train: error: collector worker 0 died (killed by SIGKILL); run the same "
            "command to resume from the last checkpoint"
        )
        assert read_summary(run_dir)["status"] == "failed"
    else:  # the kernel kills the worker as the run dies (PR_SET_PDEATHSIG)
        _wait(lambda: all(map(_gone, pids)))


def _wait(predicate: Callable[[], bool]) -> None:
    """Poll until ``predicate`` holds (a 60 s safety net, not a deadline)."""
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, "a worker still alive 60 s after the run died"
        time.sleep(0.05)


def test_worker_state_round_trip_gives_the_batch_the_workers_would_have_given() -> None:
    """A checkpoint's collector state, loaded into a freshly started worker, continues its
    episodes and generator: the next batch is the one the first worker collected next. The
    workers collect on xdrl's lean path (LeanWorkerCollector); the second is asynchronous
    (collector.sync=false: a run may switch on resume), and the learner's new weights reach
    it."""
    from tensordict import assert_close

    from xdrl.algorithms.ppo import build
    from xdrl.envs.factory import make_env
    from xdrl.training.workers import build_worker_collector

    factory = partial(make_env, "CartPole-v1", batching="vector")
    parts = build(factory(num_envs=2, seed=0), frames_per_batch=32, minibatch_size=32)
    kwargs = dict(workers=1, num_envs=2, seed=0, frames_per_batch=32, total_frames=32 * 10,
                  init_random_frames=0, device="cpu", lean=True)  # fmt: skip
    first = build_worker_collector(factory, parts.policy, **kwargs)
    try:
        batches = iter(first)
        for _ in range(3):  # 16 steps per env each: episodes run across the saved boundary
            next(batches)
        state = first.state_dict()
        expected = next(batches)
    finally:
        first.shutdown()
    second = build_worker_collector(factory, parts.policy, **kwargs, sync=False)
    try:
        second.load_state_dict(state)
        assert second.resume_note is None
        batches = iter(second)
        got = next(batches)  # the worker starts its next batch meanwhile, with the first weights
        # new weights whose logits pick action 1 whatever the observation
        last = [m for m in parts.policy.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            last.weight.zero_()
            last.bias.copy_(torch.tensor([-30.0, 30.0]))
        second.update_policy_weights_()
        next(batches)  # begun before the push
        pushed = next(batches)
    finally:
        second.shutdown()
    assert bool((expected["step_count"][:, 0] > 0).any())  # mid-episode at the boundary
    assert "collector" not in got.keys()  # the batch keys of collector=single
    assert_close(got, expected)
    assert bool((got["action"] == 0).any())  # the first weights pick both actions
    assert bool((pushed["action"] == 1).all())
    assert torch.equal(pushed["logits"], torch.tensor([-30.0, 30.0]).expand(2, 16, 2))


def _ema(loc, var, count, rows, decay=0.99999):
    """VecNormV2's update with ``reduce_batch_dims`` (``xdrl.envs.factory``'s decay), in numpy."""
    count += len(rows)
    weight = 1 - decay ** len(rows)
    return loc + weight * (rows.mean(0) - loc), var + weight * ((rows**2).mean(0) - var), count


def test_workers_normalize_with_the_runs_statistics_merged_from_every_batch() -> None:
    """env.normalize_observations with 2 workers: the run's statistics are VecNormV2's running
    moments of the envs' first observations and of every step's raw next observation (computed
    here in numpy from an in-process run without normalization: a policy that always pushes
    right makes the same episodes whatever it sees); each batch is normalized with the statistics
    of the batches before it; a state load rewinds workers and statistics, bit for bit."""
    from tensordict import assert_close
    from torchrl.collectors import Collector

    from xdrl.algorithms.ppo import build
    from xdrl.envs.factory import make_env
    from xdrl.training.worker_norm import RunObservationNorm
    from xdrl.training.workers import build_worker_collector

    factory = partial(make_env, "CartPole-v1", batching="vector")
    train_env = factory(num_envs=4, seed=0, normalize_observations=True)
    parts = build(train_env, frames_per_batch=64, minibatch_size=64)
    last = [m for m in parts.policy.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():  # always action 1: CartPole episodes of ~10 steps, 16 steps a batch
        last.weight.zero_()
        last.bias.copy_(torch.tensor([-30.0, 30.0]))
    norm = RunObservationNorm(train_env)
    collector = build_worker_collector(
        partial(factory, normalize_observations=True), parts.policy, workers=2, num_envs=4,
        seed=0, frames_per_batch=64, total_frames=64 * 8, init_random_frames=0, device="cpu",
        observation_norm=norm)  # fmt: skip
    try:
        batches, got, stats = iter(collector), [], []
        for k in range(4):
            got.append(next(batches).clone())
            stats.append(norm.statistics())
            if k == 1:
                state = collector.state_dict()
        collector.load_state_dict(state)  # back to 2 batches: the workers and the statistics
        rewound = norm.statistics()
        again = [next(batches).clone() for _ in range(2)]
        again_stats = norm.statistics()
    finally:
        collector.shutdown()
    for mine, theirs in ((rewound, stats[1]), (again_stats, stats[3])):
        assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    for mine, theirs in zip(again, got[2:], strict=True):
        assert_close(mine, theirs, rtol=0, atol=0)  # the 4th batch read the merged 3rd
    raw = list(Collector(factory(num_envs=4, seed=0), parts.policy, frames_per_batch=64,
                         total_frames=64 * 4))  # fmt: skip
    assert all(bool(b["next", "done"].any()) for b in raw)  # episodes end inside each batch
    loc, var, count = _ema(0.0, 0.0, 0, raw[0]["observation"][:, 0].double().numpy())
    for k, (batch, reference) in enumerate(zip(got, raw, strict=True)):
        assert "raw_observation" not in batch.keys() and "collector" not in batch.keys()
        if k:  # normalized with the statistics after the batches before it (bias-corrected)
            correction = 1 - 0.99999**count
            mean, std = loc / correction, np.sqrt((var - loc**2) / correction)
            expected = (reference["observation"][:, 1:].double().numpy() - mean) / std
            np.testing.assert_allclose(batch["observation"][:, 1:].numpy(), expected, atol=1e-4)
        for step in range(reference.shape[1]):
            rows = reference["next", "observation"][:, step].double().numpy()
            loc, var, count = _ema(loc, var, count, rows)
        np.testing.assert_allclose(stats[k][0].numpy(), loc, rtol=1e-5)
        np.testing.assert_allclose(stats[k][1].numpy(), var, rtol=1e-5)
    assert norm.count == count == 4 + 4 * 64


@pytest.mark.parametrize(
    ("saved", "new", "fix"),
    [
        (None, {"backend": "process", "workers": 2},
         "collector.backend=single collector.workers=1"),  # written before the collector group
        ({"backend": "single", "workers": 1}, {"backend": "process", "workers": 2},
         "collector.backend=single collector.workers=1"),
        ({"backend": "process", "workers": 2}, {"backend": "single", "workers": 1},
         "collector.backend=process collector.workers=2"),
        ({"backend": "process", "workers": 4}, {"backend": "process", "workers": 2},
         "collector.workers=4"),
        ({"backend": "process", "workers": 2}, {"backend": "process", "workers": 2}, None),
        (None, {"backend": "single", "workers": 1}, None),
    ],
)  # fmt: skip
def test_a_resume_keeps_the_collector_it_was_trained_with(saved, new, fix: str | None) -> None:
    """Each worker's envs are saved under that worker: another backend or worker count is one
    line naming the values that continue the run; ``sync`` and ``env_threads`` may change."""
    from xdrl.config.errors import ConfigError
    from xdrl.config.resume import config_changes, refuse_resume_changes

    target = {"_target_": "xdrl.config.settings.CollectorSettings"}
    old = {"seed": 0} if saved is None else {"seed": 0, "collector": {**target, **saved}}
    changes = config_changes(
        old, {"seed": 0, "collector": {**target, **new, "sync": False, "env_threads": 2}}
    )
    if fix is None:
        refuse_resume_changes(Path("checkpoint-1"), changes)
        return
    with pytest.raises(ConfigError, match=r"^collector\.(backend|workers): ") as err:
        refuse_resume_changes(Path("checkpoint-1"), changes)
    assert f"; pass {fix} to continue that run" in str(err.value)
