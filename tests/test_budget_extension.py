"""A budget changed on resume (issue 47, item 1): the schedules that anneal over the budget (the
learning rate of ``lr_schedule: linear``, PPO's ``clip_schedule: linear``) follow the new
budget from the frames reached, so a finished run whose ``total_frames`` is raised trains on; one
log line says so and the run's segments record each budget; a ``buffer_size: all`` replay
buffer grows with the budget. A resume under the same budget loads the saved schedule untouched
(bit-for-bit exact: ``tests/test_exact_resume.py``).

Before, an extended ``cartpole_ppo`` run trained every batch past the old budget at lr 0
(``kl_approx`` ~1e-9, ``max_ratio`` 1.0000001) while ``summary.json`` said ``completed``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tests.conftest import ENV, read_scalars, read_summary, run_script
from xdrl.training.schedules import BudgetLinearLR, budget_line

LR0 = 2.0e-3  # cartpole_ppo's learning rate
CLIP0 = 0.2  # PPO's clip_epsilon
BATCH = 256  # cartpole_ppo's frames per batch
# Small runs: a checkpoint every 512 frames, all kept (their schedules are read back)
QUICK = ["num_threads=1", "eval=none", "checkpoint.interval_frames=512", "checkpoint.keep_last=100"]


def _train(run_dir: Path, *overrides: str, preset: str = "cartpole_ppo") -> tuple[str, str]:
    """``xdrl-train`` of ``preset`` (none: the defaults) into ``run_dir``; its stdout and stderr
    (it must exit 0)."""
    args = [*([f"experiment={preset}"] if preset else []), *QUICK, *overrides]
    done = run_script("xdrl-train", [*args, f"hydra.run.dir={run_dir}"], env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


def _component(checkpoint: Path, name: str) -> dict:
    """One saved component (``optimizer``, ``policy``, ...) of ``checkpoint``."""
    (path,) = (checkpoint / "components").glob(f"*-{name}/state.pt")
    return torch.load(path, weights_only=True)


def _checkpoint(run_dir: Path, frames: int) -> Path:
    return run_dir / "checkpoints" / f"checkpoint-{frames:012d}"


def _after(series: list[tuple[int, float]], frames: int) -> list[float]:
    return [value for step, value in series if step > frames]


def test_a_finished_run_extended_as_the_advice_says_trains_with_reanchored_schedules(
    tmp_path: Path,
) -> None:
    """A finished 2,048-frame ``cartpole_ppo`` run with linear lr and clip, re-run: the
    "already complete" line suggests a larger ``total_frames``; that command trains every batch
    past 2,048 (non-zero KL, ratios away from 1, changed weights) with the learning rate and clip
    of a linear schedule to the new budget, says so in one line and records both budgets."""
    run_dir = tmp_path / "run"
    clip = "algorithm.build.clip_schedule=linear"
    _train(run_dir, "total_frames=2048", clip)
    _, complete = _train(run_dir, "total_frames=2048", clip)
    assert "already complete" in complete
    advised = re.search(r"raise total_frames \(e\.g\. total_frames=(\d+)", complete)
    assert advised is not None, complete
    total = int(advised[1])
    assert total > 2048
    out, err = _train(run_dir, f"total_frames={total}", clip)

    batches = total // BATCH
    lr_next = LR0 * (1 - 2048 / BATCH / batches)  # the lr of the first batch past 2,048
    line = (
        f"total_frames raised from 2,048 to {total:,}: the linear schedules (lr, clip) now end "
        f"at {total:,} frames; lr resumes at {lr_next:.3g}"
    )
    assert line in out + err + (run_dir / "ppo_cartpole.log").read_text()

    scalars = read_scalars(run_dir / "logs")
    kl = _after(scalars["train/agents/kl_approx"], 2048)
    ratios = _after(scalars["train/agents/max_ratio"], 2048)
    assert len(kl) == len(ratios) == batches - 2048 // BATCH
    assert min(abs(v) for v in kl) > 1e-6, kl  # lr 0: ~1e-9
    assert min(ratios) > 1.001, ratios  # lr 0: 1.0000001

    before = _component(_checkpoint(run_dir, 2048), "policy")
    after = _component(_checkpoint(run_dir, total), "policy")
    assert max((after[k] - before[k]).abs().max().item() for k in before) > 1e-3

    for frames in range(2560, total + 1, 512):  # each checkpoint of the extension
        checkpoint = _checkpoint(run_dir, frames)
        steps = frames // BATCH
        lr = _component(checkpoint, "optimizer")["param_groups"][0]["lr"]
        assert lr == pytest.approx(LR0 * (1 - steps / batches), rel=1e-9, abs=1e-15)
        scheduler = _component(checkpoint, "trainer_module.lr_scheduler")["scheduler"]
        assert (scheduler["total_iters"], scheduler["last_epoch"]) == (batches, steps)
        clip_now = _component(checkpoint, "loss_module")["clip_epsilon"].item()
        assert clip_now == pytest.approx(CLIP0 * (1 - frames / total), rel=1e-6, abs=1e-7)

    summary = read_summary(run_dir)
    assert (summary["status"], summary["total_frames"]) == ("completed", total)
    first, second = summary["segments"]
    assert first["budget_frames"] == 2048 and "budget_changed_from" not in first
    assert second["frames"] == [2048, total]
    assert (second["budget_frames"], second["budget_changed_from"]) == (total, 2048)


def test_a_run_resumed_mid_way_under_a_lowered_budget_ends_at_the_new_budget(
    tmp_path: Path,
) -> None:
    """The checkpoint at 1,024 frames of a 2,048-frame run, resumed under 1,536: the learning
    rate is the new schedule's at 4 of 6 batches and reaches 0 at 1,536, and the segment names
    both budgets."""
    first = tmp_path / "first"
    _train(first, "total_frames=2048")
    second = tmp_path / "second"
    out, err = _train(second, "total_frames=1536", f"resume={_checkpoint(first, 1024)}")
    line = "total_frames lowered from 2,048 to 1,536: the linear schedules (lr) now end at 1,536"
    assert line in out + err + (second / "ppo_cartpole.log").read_text()
    assert f"lr resumes at {LR0 * (1 - 4 / 6):.3g}" in out + err
    final = _checkpoint(second, 1536)
    assert _component(final, "optimizer")["param_groups"][0]["lr"] == pytest.approx(0, abs=1e-15)
    scheduler = _component(final, "trainer_module.lr_scheduler")["scheduler"]
    assert (scheduler["total_iters"], scheduler["last_epoch"]) == (6, 6)
    kl = _after(read_scalars(second / "logs")["train/agents/kl_approx"], 1024)
    assert len(kl) == 2 and min(abs(v) for v in kl) > 1e-6
    last = read_summary(second)["segments"][-1]
    assert last["frames"] == [1024, 1536]
    assert (last["budget_frames"], last["budget_changed_from"]) == (1536, 2048)


@pytest.mark.slow  # worker processes twice (21 s of make test); without them above
def test_a_finished_run_with_collector_workers_extended_trains(tmp_path: Path) -> None:
    """``collector=multiprocess``: a finished 1,024-frame run extended to 3,072 trains every
    batch past 1,024 at the re-anchored learning rate."""
    run_dir = tmp_path / "run"
    workers = ["collector=multiprocess", "collector.workers=2"]
    _train(run_dir, "total_frames=1024", *workers)
    _train(run_dir, "total_frames=3072", *workers)
    kl = _after(read_scalars(run_dir / "logs")["train/agents/kl_approx"], 1024)
    assert len(kl) == 8 and min(abs(v) for v in kl) > 1e-6, kl
    lr = _component(_checkpoint(run_dir, 2048), "optimizer")["param_groups"][0]["lr"]
    assert lr == pytest.approx(LR0 * (1 - 8 / 12), rel=1e-9)
    assert [s["budget_frames"] for s in read_summary(run_dir)["segments"]] == [1024, 3072]


def test_a_dqn_run_with_buffer_size_all_extended_keeps_its_transitions_and_grows(
    tmp_path: Path,
) -> None:
    """``buffer_size: all`` sizes the replay buffer by the budget: extended from 1,024 to 2,048
    frames, the run loads its 1,024 transitions into the larger buffer (TorchRL's load refused
    the shapes: "does not fit this run") and appends the new ones after them; the linear
    learning rate re-anchors to the new budget (it steps only past the 256-frame warm-up)."""
    run_dir = tmp_path / "run"
    dqn = [
        "algorithm=dqn",
        "env=cartpole",
        "frames_per_batch=128",
        "algorithm.build.buffer_size=all",
        "algorithm.build.init_random_frames=256",
        "algorithm.lr_schedule=linear",
    ]
    _train(run_dir, "total_frames=1024", *dqn, preset="")
    _, err = _train(run_dir, "total_frames=2048", *dqn, preset="")
    assert "does not fit" not in err

    def stored(frames: int) -> TensorDict:
        path = next((_checkpoint(run_dir, frames) / "components").glob("*-replay_buffer"))
        return TensorDict.load_memmap(path / "storage")

    first, final = stored(1024), stored(2048)
    assert (first.shape[0], final.shape[0]) == (1024, 2048)
    assert torch.equal(final["observation"][:1024], first["observation"])
    assert bool((final["observation"][1024:] != 0).any(-1).all())  # every new row written
    before = _component(_checkpoint(run_dir, 1024), "trainer_module.lr_scheduler")["scheduler"]
    after = _component(_checkpoint(run_dir, 2048), "trainer_module.lr_scheduler")["scheduler"]
    assert (before["total_iters"], after["total_iters"]) == (1024 // 128, 2048 // 128)
    assert after["last_epoch"] == before["last_epoch"] + 1024 // 128  # one step per new batch
    lr = _component(_checkpoint(run_dir, 2048), "optimizer")["param_groups"][0]["lr"]
    assert lr == pytest.approx(after["base_lrs"][0] * (1 - after["last_epoch"] / 16), rel=1e-9)
    assert read_summary(run_dir)["segments"][-1]["budget_changed_from"] == 1024


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))], lr=LR0)


def _lrs(hook: BudgetLinearLR, steps: int) -> list[float]:
    """The learning rate after each of ``steps`` scheduler steps."""
    out = []
    for _ in range(steps):
        hook.scheduler.optimizer.step()  # no gradient: nothing moves, the order torch expects
        hook.scheduler.step()
        out.append(hook.learning_rate)
    return out


def test_the_same_budget_loads_the_schedule_bit_for_bit() -> None:
    """A checkpoint of the same budget continues exactly as the uninterrupted schedule."""
    whole = BudgetLinearLR(_optimizer(), batches=24)
    reference = _lrs(whole, 24)
    stopped = BudgetLinearLR(_optimizer(), batches=24)
    _lrs(stopped, 10)
    saved = stopped.state_dict()
    resumed = BudgetLinearLR(opt := _optimizer(), batches=24)
    opt.param_groups[0]["lr"] = stopped.learning_rate  # the optimizer's own saved lr
    resumed.load_state_dict(saved)
    assert resumed.resumed_batches is None
    assert _lrs(resumed, 14) == reference[10:]  # bitwise


@pytest.mark.parametrize(("done", "old", "new"), [(8, 8, 24), (3, 8, 24), (3, 8, 5), (0, 8, 4)])
def test_another_budget_reanchors_to_the_new_linear_schedule(done: int, old: int, new: int) -> None:
    """After ``done`` of ``old`` batches, a resume under ``new``: lr0 * (1 - k / new) from step
    ``done`` on, 0 at ``new`` (each value within float rounding of the closed form)."""
    first = BudgetLinearLR(_optimizer(), batches=old)
    _lrs(first, done)
    resumed = BudgetLinearLR(opt := _optimizer(), batches=new)
    opt.param_groups[0]["lr"] = first.learning_rate
    resumed.load_state_dict(first.state_dict())
    assert resumed.resumed_batches == old
    assert resumed.learning_rate == pytest.approx(LR0 * (1 - done / new), rel=1e-12)
    expected = [LR0 * (1 - k / new) for k in range(done + 1, new + 1)]
    assert _lrs(resumed, new - done) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert _lrs(resumed, 2) == [0.0, 0.0]  # past the end it stays at 0


def test_the_budget_line_names_the_schedules_or_says_there_are_none() -> None:
    """With no schedule over the budget, the line says training simply continues."""
    assert budget_line(2048, 6144, [], None) == (
        "total_frames raised from 2,048 to 6,144: no schedule anneals over the budget; "
        "training continues to 6,144"
    )
