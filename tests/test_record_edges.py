"""The record stays right at the edges (issue 38, item 2): checkpoints land on the frame counts
``checkpoint.interval_frames`` names, so ``keep_best`` keeps the best evaluation; a run that
trained its whole budget is ``completed`` whatever signal arrived in its last iteration; the seed
is a key a resume may not change, and a complete run re-run with another seed says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ENV, SMALL, read_summary, run_cli
from xdrl.lean.trainer import XdrlTrainer
from xdrl.report.runs import find_runs

ISSUE_COMMAND = [
    "algorithm=ppo",
    "env=cartpole",
    "total_frames=16384",
    "frames_per_batch=1024",
    "eval.interval_frames=2048",
    "checkpoint.interval_frames=2048",
    "checkpoint.keep_last=1",
    "checkpoint.keep_best=true",
    "seed=1",
    "num_threads=1",
]
OBJECTIVE = "eval/deterministic/reward/episode_reward_mean"


def _frames(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def _checkpoint_frames(run_dir: Path) -> list[int]:
    return sorted(_frames(p) for p in (run_dir / "checkpoints").glob("checkpoint-*"))


def _evaluations(run_dir: Path) -> list[dict]:
    lines = (run_dir / "evaluations.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _expected_saves(batch_frames: int, interval: int, total: int) -> list[int]:
    """The first batch boundary at or past each multiple of ``interval``, and the last batch."""
    boundaries = range(batch_frames, total + 1, batch_frames)
    multiples = range(interval, total + 1, interval)
    return sorted({min(b for b in boundaries if b >= m) for m in multiples} | {total})


def _trainer(interval: int, last_save: int, saves: list[int]) -> XdrlTrainer:
    """An XdrlTrainer with only what ``save_trainer`` reads; its saves go to ``saves``."""
    trainer = XdrlTrainer.__new__(XdrlTrainer)
    trainer.save_trainer_interval = interval
    trainer.checkpoint_rotation, trainer.save_trainer_file = object(), None
    trainer.collected_frames, trainer._last_save = last_save, last_save
    trainer._save_trainer = lambda: saves.append(trainer.collected_frames)  # type: ignore[method-assign]
    return trainer


def _train(trainer: XdrlTrainer, batch_frames: int, total: int, stop_at: int | None) -> None:
    """The Trainer's loop end: a forced save at the budget or at a stop, else a scheduled one."""
    while trainer.collected_frames < total:
        trainer.collected_frames += batch_frames
        if trainer.collected_frames >= total or trainer.collected_frames == stop_at:
            trainer.save_trainer(force_save=True)
            return
        trainer.save_trainer()


@pytest.mark.parametrize(
    ("batch_frames", "interval", "total"),
    [
        (1024, 2048, 16384),  # the issue's command
        (768, 1000, 9216),  # 256 frames x frame_skip 3: multiples fall inside batches
        (1024, 3000, 30720),
        (4096, 10_000, 81920),  # Atari PPO: 8 envs x 128 steps x frame_skip 4
        (256, 100, 2048),  # an interval below a batch: every batch
    ],
)
def test_saves_land_on_the_first_batch_at_or_past_each_multiple(
    batch_frames: int, interval: int, total: int
) -> None:
    saves: list[int] = []
    _train(_trainer(interval, 0, saves), batch_frames, total, stop_at=None)
    assert saves == _expected_saves(batch_frames, interval, total)

    # Stopped between scheduled saves and resumed (the trainer state holds _last_save): the
    # schedule goes on as if the run had never stopped, plus the stop's own save.
    stop = 3 * batch_frames
    first: list[int] = []
    stopped = _trainer(interval, 0, first)
    _train(stopped, batch_frames, total, stop_at=stop)
    rest: list[int] = []
    resumed = _trainer(interval, stopped._last_save, rest)
    resumed.collected_frames = stop
    _train(resumed, batch_frames, total, stop_at=None)
    assert first[-1] == stop and first + rest == sorted({*saves, stop})


def test_keep_best_keeps_the_checkpoint_of_the_best_evaluation(tmp_path: Path) -> None:
    """The issue's command: the best evaluation (482.9 at 10240 on c1ccce2) had no checkpoint
    and ``best`` was the 12288 save."""
    run_dir = tmp_path / "run"
    out = run_cli([*ISSUE_COMMAND, f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    evaluations = _evaluations(run_dir)
    assert [e["frames"] for e in evaluations] == list(range(0, 16385, 2048))
    scored = [(e[OBJECTIVE], e["frames"]) for e in evaluations if e["frames"] > 0]
    best_value, best_frames = max(scored)
    assert [v for v, _ in scored].count(best_value) == 1, "a tie: pick a seed without one"
    assert best_frames < 16384, "the best is the last save: pick a seed that tests keep_best"
    summary = read_summary(run_dir)
    assert summary["best_checkpoint"] == f"checkpoint-{best_frames:012d}"
    assert _checkpoint_frames(run_dir) == [best_frames, 16384]  # keep_last=1 plus the best
    manifest = run_dir / "checkpoints" / summary["best_checkpoint"] / "manifest.json"
    assert json.loads(manifest.read_text())["metadata"]["objective"] == best_value


def test_checkpoints_and_evaluations_share_one_schedule_with_frame_skip(tmp_path: Path) -> None:
    """frame_skip 3: 768 frames a batch, intervals of 1000 inside batches. TorchRL's strict
    rule saved at 1536, 3072, 4608; ``interval - 1`` would too (the save at 2304 lands
    before 1536 + 1000)."""
    run_dir = tmp_path / "run"
    args = [
        *[o for o in SMALL if not o.startswith(("total_frames", "eval.interval_frames"))],
        "env.frame_skip=3",
        "total_frames=4608",
        "eval.interval_frames=1000",
        "checkpoint.interval_frames=1000",
        "checkpoint.keep_last=100",
        "checkpoint.keep_best=false",
        "num_threads=1",
        f"hydra.run.dir={run_dir}",
    ]
    out = run_cli(args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    expected = _expected_saves(3 * 256, 1000, 4608)
    assert expected == [1536, 2304, 3072, 4608]
    assert _checkpoint_frames(run_dir) == expected
    assert [e["frames"] for e in _evaluations(run_dir)] == [0, *expected]


# xdrl-train with SIGTERM raised by the process itself when the last batch reaches the Trainer
# method named first on the command line.
SIGTERM_IN_LAST_ITERATION = """
import signal, sys
from xdrl.cli import main
from xdrl.lean.trainer import XdrlTrainer

name = sys.argv.pop(1)
original = getattr(XdrlTrainer, name)

def with_sigterm_at_the_last_batch(self, *args, **kwargs):
    if self.collected_frames >= self.total_frames:
        signal.raise_signal(signal.SIGTERM)
    return original(self, *args, **kwargs)

setattr(XdrlTrainer, name, with_sigterm_at_the_last_batch)
sys.argv = ["xdrl-train", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    ("method", "settings"),
    [
        ("save_trainer", []),  # after the final evaluation, as the final checkpoint is saved
        ("optim_steps", ["eval=none"]),  # while the last batch trains
    ],
    ids=["final-save", "last-optimization"],
)
def test_a_sigterm_in_the_last_iteration_leaves_a_completed_run(
    tmp_path: Path, method: str, settings: list[str]
) -> None:
    """c1ccce2 wrote ``stopped`` (re-running said "already complete", xdrl-report left the run
    out). A signal that interrupts the final evaluation itself is the evaluation's matter (the
    run stays ``stopped`` and the same command evaluates it)."""
    run_dir = tmp_path / "run"
    args = [*SMALL, "num_threads=1", "logging=csv", *settings, f"hydra.run.dir={run_dir}"]
    out = subprocess.run(
        [sys.executable, "-c", SIGTERM_IN_LAST_ITERATION, method, *args],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 128 + 15, out.stderr[-2000:]  # the signal is still honoured
    assert "SIGTERM received" in out.stdout + out.stderr, "the signal did not arrive"
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["total_frames"] == 512
    assert summary["signal"] == "SIGTERM" and summary["segments"][-1]["status"] == "completed"
    assert "trained its whole budget (512 frames) and is complete" in out.stderr
    if not settings:
        assert _evaluations(run_dir)[-1]["frames"] == 512  # the final evaluation is recorded
    assert _checkpoint_frames(run_dir)[-1] == 512
    (record,) = find_runs([run_dir])
    assert record.status == "completed"  # xdrl-report averages it

    again = run_cli(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "is already complete" in again.stderr
    assert read_summary(run_dir) == summary


def _files(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run dir but the log and the lock's holder record."""
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.suffix != ".log" and p.name != ".xdrl-run.lock"
    }


def test_a_resume_keeps_its_seed_and_a_complete_run_says_the_seed_differs(tmp_path: Path) -> None:
    """c1ccce2 resumed ``seed=4`` on seed 3's checkpoint (continuing seed 3 bit for bit) and
    labelled the run seed 4; a complete run re-run with seed 4 said "already complete"."""
    run_dir = tmp_path / "run"
    base = [*SMALL, "num_threads=1", "logging=csv", f"hydra.run.dir={run_dir}"]
    first = run_cli([*base, "seed=3"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _files(run_dir)
    checkpoint = run_dir / "checkpoints" / f"checkpoint-{512:012d}"
    for total in ("total_frames=1024", "total_frames=512"):  # a resume, then the complete run
        out = run_cli([*base, "seed=4", total], cwd=tmp_path)
        assert out.returncode == 2, out.stderr[-2000:]
        assert out.stderr.strip() == (
            f"xdrl-train: config error: seed: 4 differs from the seed 3 that {checkpoint} was "
            "trained with (a resume continues seed 3's random streams); pass seed=3 to continue "
            "that run, or another hydra.run.dir (or resume=never) to train seed 4"
        )
        assert _files(run_dir) == before  # nothing written, .hydra/ included
    resumed = run_cli([*base, "seed=3", "total_frames=1024"], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert read_summary(run_dir)["seed"] == 3 and read_summary(run_dir)["total_frames"] == 1024
    assert "seed: 3" in (run_dir / ".hydra" / "config.yaml").read_text()
    assert not os.path.exists(run_dir / "superseded")
