"""Resume is exact (issue 18, B): a run stopped at a checkpoint and resumed logs exactly what the
same command never stopped logs: every ``collection/`` and ``train/`` value at every step, the
evaluations and the final evaluation, compared bitwise. Envs whose state cannot be saved resume
approximately, and summary.json and the log say so.

How the stops avoid timing races: the first segment runs until its first checkpoint is complete
(``checksums.json``, written last), then gets SIGINT; it finishes the iteration it is in,
checkpoints and stops, wherever that is (or gets SIGKILL and resumes from its latest complete
checkpoint). Everything the stopped run logged up to there and the resumed run logged after must
equal the uninterrupted run's values; that the stop came before the end is asserted (the budget
leaves several iterations after the first checkpoint). Floats are compared exactly: one thread,
the same machine, the same operations in the same order.
"""

from __future__ import annotations

import copy
import fcntl
import os
import pickle
import pty
import shutil
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchrl.collectors import Collector

from tests.conftest import (
    ENV,
    WANDB_OFFLINE,
    XDRL_TRAIN,
    read_scalars,
    read_summary,
    run_script,
    start_script,
)
from xdrl.algorithms.common import stochastic_actor
from xdrl.envs.factory import make_env
from xdrl.envs.vector_env import VectorGymEnv
from xdrl.lean.collector import VectorCollector, fits
from xdrl.training.env_state import EnvState, dumps

PPO = [
    "num_threads=1",
    "total_frames=2048",
    "frames_per_batch=256",
    "env.num_envs=4",
    "algorithm.build.epochs=2",
    "eval.interval_frames=512",
    "eval.episodes=2",
    "eval.max_steps=100",
    "checkpoint.interval_frames=256",
]
# SAC on one Pendulum env: 200-step episodes, so every checkpoint is mid-episode; the first
# checkpoint (128 frames) falls inside the random warm-up (256), so the resumed run crosses it.
SAC = [
    "num_threads=1",
    "algorithm=sac",
    "env=pendulum",
    "env.num_envs=1",
    "total_frames=768",
    "frames_per_batch=64",
    "algorithm.build.init_random_frames=256",
    "algorithm.build.batch_size=32",
    "algorithm.build.actor_cells=[32,32]",
    "algorithm.build.critic_cells=[32,32]",
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=50",
    "checkpoint.interval_frames=128",  # saves at 128, 256, ... (each multiple's batch)
]
TRAINING = ("collection/", "train/")


# Running xdrl-train
def _command(args: list[str], run_dir: Path) -> list[str]:
    return [XDRL_TRAIN, *args, f"hydra.run.dir={run_dir}"]


def _run(args: list[str], run_dir: Path) -> str:
    """``xdrl-train`` to the end, output on a pipe."""
    proc = run_script("xdrl-train", [*args, f"hydra.run.dir={run_dir}"], env=WANDB_OFFLINE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def _first_checkpoint_written(run_dir: Path) -> bool:
    return any((run_dir / "checkpoints").glob("checkpoint-*/checksums.json"))


def _stop_at_first_checkpoint(
    args: list[str], run_dir: Path, *, terminal: bool = False, sig: int = signal.SIGINT
) -> int:
    """Start ``xdrl-train``, send ``sig`` once its first checkpoint is complete; the frames it
    will resume from. ``terminal``: its output goes to a pseudo-terminal (a progress bar)."""
    if terminal:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        proc = subprocess.Popen(
            _command(args, run_dir), env=ENV, stdin=slave, stdout=slave, stderr=slave
        )
        os.close(slave)
        drain = threading.Thread(target=_drain, args=(master,), daemon=True)
        drain.start()
    else:
        proc = start_script("xdrl-train", [*args, f"hydra.run.dir={run_dir}"], env=WANDB_OFFLINE)
    try:
        while not _first_checkpoint_written(run_dir):
            assert proc.poll() is None, "the run ended before its first checkpoint"
            time.sleep(0.01)
        proc.send_signal(sig)
        assert proc.wait(timeout=300) == (-sig if sig == signal.SIGKILL else 128 + sig)
    finally:
        if proc.poll() is None:
            proc.kill()
        if terminal:
            drain.join(timeout=60)
    total = int(next(a for a in args if a.startswith("total_frames=")).split("=")[1])
    if sig == signal.SIGKILL:  # no summary: the latest complete checkpoint is where it resumes
        assert not (run_dir / "summary.json").exists()
        done = (run_dir / "checkpoints").glob("checkpoint-*/checksums.json")
        return max(int(p.parent.name.split("-")[1]) for p in done)
    summary = read_summary(run_dir)
    assert summary["status"] == "interrupted"
    assert summary["total_frames"] < total, "stopped at the end: nothing left to resume"
    return int(summary["total_frames"])


def _drain(master: int) -> None:
    """Read a pseudo-terminal until the child closes it (a full one would block the child)."""
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:
            break
    os.close(master)


# Comparing runs
def _logged(run_dir: Path, prefixes: tuple[str, ...]) -> dict[str, list[tuple[int, float]]]:
    scalars = read_scalars(run_dir / "logs")
    return {k: v for k, v in scalars.items() if k.startswith(prefixes)}


def _assert_same_run(reference: Path, resumed: Path, stopped_at: int) -> None:
    """Every collection/ and train/ value at every step bitwise equal (before and after the
    stop), every evaluation of the reference logged alike, the same final evaluation."""
    want, got = _logged(reference, TRAINING), _logged(resumed, TRAINING)
    assert want and set(want) == set(got)
    for key, rows in want.items():
        assert any(step > stopped_at for step, _ in rows), key  # the resume is compared too
        assert got[key] == rows, f"{key} differs from the uninterrupted run"
    want_eval, got_eval = _logged(reference, ("eval/",)), _logged(resumed, ("eval/",))
    assert want_eval
    for key, rows in want_eval.items():
        # the stopped segment may add an evaluation at its stop; every reference one is there
        assert [r for r in got_eval[key] if r[0] in dict(rows)] == rows, key
    final, final_resumed = read_summary(reference), read_summary(resumed)
    assert final_resumed["eval"] == final["eval"] and final["eval"]
    assert final_resumed["status"] == "completed"
    assert final_resumed["resume_exact"] is True


@pytest.fixture(scope="module")
def ppo_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PPO command, never stopped."""
    run_dir = tmp_path_factory.mktemp("ppo") / "reference"
    _run(PPO, run_dir)
    return run_dir


@pytest.mark.parametrize(
    ("terminal", "sig"),
    [(False, signal.SIGINT), (True, signal.SIGINT), (False, signal.SIGKILL)],
    ids=["sigint", "sigint-terminal-then-pipe", "sigkill-after-a-checkpoint"],
)
def test_ppo_cartpole_stopped_and_resumed_logs_what_the_uninterrupted_run_logs(
    tmp_path: Path, ppo_reference: Path, terminal: bool, sig: int
) -> None:
    run_dir = tmp_path / "run"
    stopped_at = _stop_at_first_checkpoint(PPO, run_dir, terminal=terminal, sig=sig)
    out = _run(PPO, run_dir)  # the same command, on a pipe (a batch job)
    assert f"at {stopped_at} frames" in out and "Resume is exact" in out
    _assert_same_run(ppo_reference, run_dir, stopped_at)


def _left_by_a_kill_after(checkpoint: Path, reference: Path, run_dir: Path) -> int:
    """What a run killed right after ``checkpoint`` leaves in ``run_dir``, made from the
    uninterrupted ``reference`` run: its ``.hydra/``, that checkpoint, and its CSV logs up to that
    checkpoint's frames (no summary). Returns those frames."""
    frames = int(checkpoint.name.split("-")[1])
    if (reference / ".hydra").exists():  # an in-process run (xdrl.run.lifecycle.run) has none
        shutil.copytree(reference / ".hydra", run_dir / ".hydra")
    shutil.copytree(checkpoint, run_dir / "checkpoints" / checkpoint.name)
    for path in (reference / "logs").rglob("*"):
        target = run_dir / "logs" / path.relative_to(reference / "logs")
        if path.suffix == ".csv":
            rows = [
                r for r in path.read_text().splitlines() if int(float(r.split(",")[0])) <= frames
            ]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(f"{r}\n" for r in rows))
    return frames


def test_sac_pendulum_killed_in_the_warm_up_and_resumed_logs_what_the_uninterrupted_run_logs(
    tmp_path: Path,
) -> None:
    """A run killed right after its first checkpoint, at 128 of the 256 random warm-up frames: the
    resume finishes the warm-up from that checkpoint, then trains, as the uninterrupted run.
    The kill's leftovers are built from the uninterrupted run's own checkpoint, so the stop is
    exactly there: a signal sent once the first checkpoint appears lands wherever the random
    frames (~0.1 ms each) have got to (a clean clone's run once stopped at 256)."""
    reference, run_dir = tmp_path / "reference", tmp_path / "run"
    args = [*SAC, "checkpoint.keep_last=20"]  # keeps the warm-up's checkpoints
    _run(args, reference)
    first = min((reference / "checkpoints").glob("checkpoint-*"), key=lambda p: p.name)
    stopped_at = _left_by_a_kill_after(first, reference, run_dir)
    assert stopped_at == 128  # inside the random warm-up
    out = _run(args, run_dir)
    assert f"at {stopped_at} frames" in out and "Resume is exact" in out
    _assert_same_run(reference, run_dir, stopped_at)


def test_an_env_that_cannot_be_saved_resumes_approximately_and_says_so(tmp_path: Path) -> None:
    """LunarLander's Box2D world does not pickle: the resume reseeds the envs, and summary.json
    and the log name the reason."""
    pytest.importorskip("Box2D")
    run_dir = tmp_path / "run"
    args = [*PPO[:1], "env=lunarlander", "frames_per_batch=256", "env.num_envs=4"]
    args += ["algorithm.build.epochs=1", "eval=none", "checkpoint.interval_frames=256"]
    first = _run([*args, "total_frames=512"], run_dir)
    assert "will be approximate: LunarLander-v3 cannot be saved mid-episode" in first
    out = _run([*args, "total_frames=768"], run_dir)
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["total_frames"] == 768
    assert summary["resume_exact"] is False
    assert "LunarLander-v3 cannot be saved mid-episode" in summary["resume_approximate_reason"]
    assert "Resume is approximate: LunarLander-v3 cannot be saved mid-episode" in out


# Unit level: the collector's next batch after a round trip through EnvState
def _collector(batching: str, seed: int, *, normalize: bool = False) -> tuple:
    env = make_env(
        "CartPole-v1", num_envs=3, batching=batching, seed=seed, normalize_observations=normalize
    )
    torch.manual_seed(0)
    actor = stochastic_actor(env, [16], nn.Tanh, "cpu")
    if fits(env, actor):
        collector = VectorCollector(env, actor, frames_per_batch=30, total_frames=300)
    else:
        collector = Collector(
            env, actor, frames_per_batch=30, total_frames=300, track_traj_ids=False
        )
    return env, actor, collector


@pytest.mark.parametrize(
    ("batching", "normalize"),
    [("vector", False), ("serial", False), ("vector", True)],
    ids=["VectorCollector", "Collector-serial", "Collector-VecNorm"],
)
def test_collector_round_trip_mid_episode_gives_the_batch_the_collector_would_have_given(
    batching: str, normalize: bool
) -> None:
    env, actor, collector = _collector(batching, seed=1, normalize=normalize)
    assert isinstance(collector, VectorCollector) == (batching == "vector" and not normalize)
    batches = iter(collector)
    for _ in range(2):  # 20 steps per sub-env: CartPole's first episodes are mid-way
        next(batches)
    saved = EnvState(env, collector).state_dict()
    saved_transform = copy.deepcopy(env.transform.state_dict())  # not the live buffers
    rng = torch.get_rng_state()
    expected = next(batches)

    other_env, other_actor, other = _collector(batching, seed=99, normalize=normalize)
    other_actor.load_state_dict(actor.state_dict())
    other_env.transform.load_state_dict(saved_transform)  # what the collector component loads
    state = EnvState(other_env, other)
    state.load_state_dict(saved)
    assert state.approximate is None and state.train_restored
    torch.set_rng_state(rng)
    got = next(iter(other))
    assert (got["step_count"] > 0).any()  # episodes carried over, not restarted
    for key in expected.keys(True, True):
        assert torch.equal(got[key], expected[key]), key
    collector.shutdown()
    other.shutdown()


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "deep-sea-treasure-v0", "Hopper-v5"])
def test_gymnasium_envs_round_trip_mid_episode_bit_for_bit(env_id: str) -> None:
    """Pickled whole (``EzPickle`` ones by their attributes, so MuJoCo's physics including the
    solver's warm start come along): 300 further steps, resets included, are identical."""
    if env_id.startswith("Hopper"):
        pytest.importorskip("mujoco")
    env = VectorGymEnv(env_id, num_envs=2)
    env.set_seed(3)
    rng = np.random.default_rng(0)
    low = env.action_spec.space.low.numpy() if not env_id.startswith("deep") else None

    def actions() -> np.ndarray:
        if low is None:
            return rng.integers(0, 4, size=(2,))
        return rng.uniform(low, -low).astype(np.float32)

    for _ in range(7):
        env.step_numpy(actions())
    copies = [pickle.loads(dumps(e)) for e in env.envs]
    other = VectorGymEnv(env_id, num_envs=2)
    other.replace_envs(copies)
    other.load_flags_state(env.flags_state())
    for _ in range(300):
        act = actions()
        a, b = env.step_numpy(act), other.step_numpy(act)
        for x, y in zip(a, b, strict=True):
            assert np.array_equal(x, y)
        done = np.flatnonzero(a[2][:, 0] | a[3][:, 0]).tolist()
        if done:
            assert np.array_equal(env.reset_numpy(done), other.reset_numpy(done))
    env.close()
    other.close()
