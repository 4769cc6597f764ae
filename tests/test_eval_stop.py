"""A stop asked during an evaluation (issue 38, item 4): SIGINT, SIGTERM and SLURM's USR2 end the
evaluation between two env steps; the interrupted evaluation is dropped (no record, no ``eval/``
row) and redone by the resume; ``summary.json`` says so. The evaluation env of
``tests.user_envs.SignallingCorridor`` sends the signal itself after a set number of its steps,
so every count below is in env steps, never in seconds."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from torchrl.envs import GymEnv

from tests import user_envs
from tests.conftest import compose_config, read_summary
from xdrl.envs.factory import make_env
from xdrl.lean.collector import VectorCollector, fast_rollouts
from xdrl.trainer_hooks.evaluation_history import EVALUATIONS_FILE, read_evaluations
from xdrl.trainer_hooks.logging.evaluation_metrics import (
    EvaluationInterrupted,
    evaluation_rollout,
)

# 256-frame batches; evaluations (one episode, 200 steps: the corridor is too long to finish)
# at 0, 256 and 512 frames, so the evaluation env's steps 1-200, 201-400 and 401-600.
RUN = [
    "env.id=XdrlSignallingCorridor-v0",
    "env.import_modules=[tests.user_envs]",
    "total_frames=512",
    "frames_per_batch=256",
    "env.num_envs=2",
    "algorithm.build.epochs=1",
    "eval.interval_frames=256",
    "eval.episodes=1",
    "eval.max_steps=200",
    "checkpoint.interval_frames=256",
    "logging=csv",
]
EVAL_STEPS = 200
STATUS = {signal.SIGINT: "interrupted", signal.SIGTERM: "stopped", signal.SIGUSR2: "stopped"}


@pytest.fixture(autouse=True)
def _counters() -> Any:
    """Fresh step counters and no signal, before and after each test."""

    def clear() -> None:
        user_envs.SIGNAL.update(signum=0, after=0)
        user_envs.SIGNAL_FROM[:] = ["eval"]
        user_envs.STEPS.update(train=0, eval=0)
        user_envs.STEPS_AT_SIGNAL.clear()

    clear()
    yield
    clear()


def _train(run_dir: Path, *overrides: str, signum: int = 0, after: int = 0) -> int | None:
    """Run xdrl's training in process (a signal after ``after`` evaluation steps); the exit
    code the run asked for (None: it returned)."""
    import xdrl.run.lifecycle

    user_envs.SIGNAL.update(signum=int(signum), after=after)
    user_envs.STEPS.update(train=0, eval=0)
    cfg = compose_config([*RUN, *overrides], run_dir)
    try:
        xdrl.run.lifecycle.run(cfg)
    except SystemExit as stop:
        return int(stop.code or 0)
    return None


def _records(run_dir: Path) -> list[dict[str, Any]]:
    """evaluations.jsonl without its clock fields."""
    drop = {"time", "wall_time_s"}
    return [
        {k: v for k, v in r.items() if k not in drop}
        for r in read_evaluations(run_dir / EVALUATIONS_FILE)
    ]


def _eval_rows(run_dir: Path) -> list[int]:
    """The frames of every row of the deterministic evaluation's mean return (CSV logger)."""
    (path,) = run_dir.glob("**/eval/deterministic/reward/episode_reward_mean.csv")
    return [int(float(line.split(",")[0])) for line in path.read_text().split()]


def _checkpoints(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("checkpoint-*"))


def _steps_after_signal() -> dict[str, int]:
    at = user_envs.STEPS_AT_SIGNAL
    assert at, "the evaluation env never sent its signal"
    return {kind: user_envs.STEPS[kind] - at[kind] for kind in ("train", "eval")}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR2])
def test_a_signal_mid_evaluation_ends_it_at_once_and_drops_it(tmp_path: Path, signum: int) -> None:
    """c1ccce2 stepped the evaluation to its cap (150 more steps here) and recorded it."""
    run_dir = tmp_path / "run"
    code = _train(run_dir, signum=signum, after=EVAL_STEPS + 50)  # mid-evaluation at 256
    assert code == 128 + signum
    assert _steps_after_signal() == {"train": 0, "eval": 0}  # not one env step more
    summary = read_summary(run_dir)
    assert summary["status"] == STATUS[signum] and summary["total_frames"] == 256
    assert summary["evaluation_interrupted"] == {"frames": 256, "subgroups": ["deterministic"]}
    assert [r["frames"] for r in _records(run_dir)] == [0]  # no record claims the evaluation
    assert _eval_rows(run_dir) == [0]  # nor any eval/ row
    assert _checkpoints(run_dir) == [256]  # the checkpoint of the stop stays


def test_the_resume_redoes_the_interrupted_evaluation_as_the_uninterrupted_run_did(
    tmp_path: Path,
) -> None:
    """Stochastic evaluation too: the RNGs the dropped evaluation drew from are put back, so the
    resume's evaluation at 256 and everything after equal the run never stopped."""
    stochastic = ["eval.stochastic=true"]
    assert _train(tmp_path / "whole", *stochastic) is None
    expected = _records(tmp_path / "whole")
    assert [r["frames"] for r in expected] == [0, 256, 512]

    run_dir = tmp_path / "stopped"
    # the deterministic evaluation at 256 is steps 401-600 (both subgroups evaluate at 0)
    assert _train(run_dir, *stochastic, signum=signal.SIGTERM, after=2 * EVAL_STEPS + 50) == 143
    assert _steps_after_signal() == {"train": 0, "eval": 0}
    interrupted = read_summary(run_dir)["evaluation_interrupted"]
    assert interrupted == {"frames": 256, "subgroups": ["deterministic", "stochastic"]}
    assert _train(run_dir, *stochastic) is None  # the same command, no signal
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and "evaluation_interrupted" not in summary
    assert _records(run_dir) == expected
    assert _eval_rows(run_dir) == [0, 256, 512]


def test_a_signal_in_the_step_0_evaluation_ends_the_run_before_it_trains(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert _train(run_dir, signum=signal.SIGTERM, after=50) == 143
    assert _steps_after_signal() == {"train": 0, "eval": 0}
    summary = read_summary(run_dir)
    assert summary["status"] == "stopped" and summary["total_frames"] == 0
    assert summary["evaluation_interrupted"] == {"frames": 0, "subgroups": ["deterministic"]}
    assert not (run_dir / EVALUATIONS_FILE).exists()  # no record, not even an empty file
    assert not list(run_dir.glob("checkpoints/checkpoint-*"))


def test_an_interrupted_final_evaluation_is_evaluated_by_the_same_command(tmp_path: Path) -> None:
    """The whole budget is trained, but the run is not complete without its final evaluation:
    ``stopped``, and the same command evaluates it without training a frame more."""
    run_dir = tmp_path / "run"
    assert _train(run_dir, signum=signal.SIGTERM, after=2 * EVAL_STEPS + 50) == 143
    summary = read_summary(run_dir)
    assert summary["status"] == "stopped" and summary["total_frames"] == 512
    assert summary["evaluation_interrupted"]["frames"] == 512
    assert [r["frames"] for r in _records(run_dir)] == [0, 256]

    assert _train(run_dir) is None
    assert user_envs.STEPS == {"train": 0, "eval": EVAL_STEPS}  # only the evaluation ran
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["total_frames"] == 512
    assert [r["frames"] for r in _records(run_dir)] == [0, 256, 512]
    assert summary["eval"]["eval/deterministic/episode_len_mean"] == EVAL_STEPS


def test_a_final_evaluation_due_after_a_stop_does_not_start(tmp_path: Path) -> None:
    """SIGTERM while the last batch is collected: the batch finishes (the iteration does), but
    the final evaluation, which could take minutes, does not start; the same command runs it."""
    user_envs.SIGNAL_FROM[:] = ["train"]
    run_dir = tmp_path / "run"
    assert _train(run_dir, signum=signal.SIGTERM, after=300) == 143  # of train steps 257-512
    assert _steps_after_signal() == {"train": 512 - 300, "eval": 0}
    summary = read_summary(run_dir)
    assert summary["status"] == "stopped" and summary["total_frames"] == 512
    assert summary["evaluation_interrupted"] == {"frames": 512, "subgroups": ["deterministic"]}
    assert [r["frames"] for r in _records(run_dir)] == [0, 256]
    assert _train(run_dir) is None
    assert user_envs.STEPS == {"train": 0, "eval": EVAL_STEPS}
    assert read_summary(run_dir)["status"] == "completed"
    assert [r["frames"] for r in _records(run_dir)] == [0, 256, 512]


def _always_right() -> Any:
    """A deterministic policy: action 1 (right) for every observation."""
    from tensordict.nn import TensorDictModule

    return TensorDictModule(
        lambda obs: torch.ones(obs.shape[:-1], dtype=torch.long),
        in_keys=["observation"],
        out_keys=["action"],
    )


@pytest.mark.parametrize("batching", ["vector", "serial", "single"])
def test_the_rollout_stops_between_steps_on_every_env_path(
    batching: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xdrl's NumPy fast path (vector), TorchRL's rollout over a SerialEnv, and a plain GymEnv:
    the check runs after each step and raises, naming the steps taken."""
    if batching == "single":
        env: Any = GymEnv(user_envs.ENV_ID, categorical_action_encoding=True)
    else:
        env = fast_rollouts(make_env(user_envs.ENV_ID, num_envs=2, batching=batching, seed=0))
    fast_path = []
    original = VectorCollector.first_episodes

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        fast_path.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(VectorCollector, "first_episodes", spy)
    checks = []

    def stop_requested() -> bool:
        checks.append(1)
        return len(checks) > 6  # the 7th check: one before the reset, then after 6 steps

    with pytest.raises(EvaluationInterrupted) as stopped:
        evaluation_rollout(
            env, _always_right(), 40, deterministic=True, stop_requested=stop_requested
        )
    assert stopped.value.steps == 6  # of the 8 that end the corridor
    assert len(checks) == 7
    assert bool(fast_path) == (batching == "vector")
    env.close()


def test_no_stop_asked_changes_nothing() -> None:
    env = fast_rollouts(make_env(user_envs.ENV_ID, num_envs=2, batching="vector", seed=0))
    policy = _always_right()
    plain = evaluation_rollout(env, policy, 40, deterministic=True)
    checked = evaluation_rollout(env, policy, 40, deterministic=True, stop_requested=lambda: False)
    assert plain.shape == checked.shape == torch.Size([2, 8])  # 8 steps right: the end
    assert (plain["next", "reward"] == checked["next", "reward"]).all()
    env.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_xdrl_eval_stops_mid_episode_in_one_line(
    tmp_path: Path, signum: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """xdrl-eval plays to eval.max_steps (200 here); a signal at its 30th step ends it there with
    one line and exit 128 + signal, and the --json record is not written (c1ccce2: a
    KeyboardInterrupt traceback for SIGINT; SIGTERM killed it without a word)."""
    from xdrl.policy import eval_cli

    run_dir = tmp_path / "run"
    assert _train(run_dir, "eval=none") is None
    capsys.readouterr()
    user_envs.SIGNAL.update(signum=int(signum), after=30)
    user_envs.STEPS.update(train=0, eval=0)
    record = tmp_path / "record.json"
    before = signal.getsignal(signum)
    code = eval_cli.main([str(run_dir), "--episodes", "1", "--json", str(record)])
    assert code == 128 + signum
    assert _steps_after_signal() == {"train": 0, "eval": 0}
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"xdrl-eval: stopped by {signal.Signals(signum).name}; nothing written"]
    assert not record.exists()
    assert signal.getsignal(signum) is before  # the handler is put back
