"""The logging hooks inside a real torchrl Trainer: CSV output and checkpoint round trip."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch.distributions import Categorical
from torchrl.checkpoint import Checkpoint
from torchrl.collectors import Collector
from torchrl.envs import (
    SerialEnv,
)
from torchrl.modules import ProbabilisticActor
from torchrl.record.loggers import CSVLogger
from torchrl.trainers import Trainer
from torchrl.trainers.trainers import DefaultOptimizationStepper

from tests.conftest import cartpole
from xdrl.trainer_hooks.logging import (
    LoggingEvaluationHookSet,
    LoggingHookSet,
    ProgressLineHook,
    WandbFlushHook,
)

FRAMES_PER_BATCH = 64
TOTAL_FRAMES = 3 * FRAMES_PER_BATCH


def _actor() -> ProbabilisticActor:
    net = TensorDictModule(torch.nn.Linear(4, 2), in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(
        net, in_keys=["logits"], out_keys=["action"], distribution_class=Categorical
    )


class _DummyLoss(torch.nn.Module):
    """A loss with a vector entry, a nested entry and gradients attached."""

    def __init__(self, actor: ProbabilisticActor):
        super().__init__()
        self.actor_network = actor

    def forward(self, batch: TensorDict) -> TensorDict:
        logits = self.actor_network.module[0](batch["observation"])
        loss = logits.pow(2).mean()
        return TensorDict(
            {
                "loss_dummy": loss,
                "entropy": logits.detach().mean(0),
                "extra": {"kl_approx": loss.detach() * 0.5},
            },
            [],
        )


def _build(tmp_path: Path, *, checkpoint_file: Path):
    torch.manual_seed(0)
    actor = _actor()
    env = cartpole()
    env.set_seed(0)
    collector = Collector(env, actor, frames_per_batch=FRAMES_PER_BATCH, total_frames=TOTAL_FRAMES)
    loss = _DummyLoss(actor)
    logger = CSVLogger(exp_name="exp", log_dir=str(tmp_path / "logs"))
    trainer = Trainer(
        collector=collector,
        total_frames=TOTAL_FRAMES,
        frame_skip=1,
        optim_steps_per_batch=2,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-3),
        optimization_stepper=DefaultOptimizationStepper(),
        logger=logger,
        progress_bar=False,
        log_interval=0,
        auto_log_optim_steps=False,
        checkpoint=Checkpoint(),
        save_trainer_file=checkpoint_file,
        save_trainer_interval=10**9,
    )
    eval_env = SerialEnv(2, cartpole)
    eval_env.set_seed(1)
    evals = LoggingEvaluationHookSet(
        policy=actor,
        environment=eval_env,
        group="agents",
        interval_frames=2 * FRAMES_PER_BATCH,
        max_steps=100,
        deterministic=True,
        non_deterministic=False,
        render=False,
        video_fps=30,
    )
    hooks = LoggingHookSet(group="agents", frame_skip=1, eval_hook_set=evals)
    hooks.register(trainer)
    stream = io.StringIO()
    line = ProgressLineHook(
        TOTAL_FRAMES, interval_s=0.0, stream=stream, progress_hook=hooks.progress_hook
    )
    line.register(trainer)
    flush = WandbFlushHook()
    flush.register(trainer)
    return trainer, hooks, stream


def _read(scalars: Path, name: str) -> list[tuple[int, float]]:
    with open(scalars / f"{name}.csv") as f:
        return [(int(step), float(value)) for step, value in csv.reader(f)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("trainer")
    checkpoint_file = tmp_path / "ckpt"
    trainer, hooks, stream = _build(tmp_path, checkpoint_file=checkpoint_file)
    pre = hooks.run_pre_eval()
    trainer.train()
    hooks.close()
    return tmp_path, trainer, hooks, stream, pre


def test_csv_has_namespaced_keys_at_collected_frames(trained):
    tmp_path, trainer, hooks, stream, pre = trained
    scalars = tmp_path / "logs" / "exp" / "scalars"
    steps = [64, 128, 192]
    every_iteration = [
        "collection/agents/reward/reward_min",
        "collection/agents/reward/reward_mean",
        "collection/agents/reward/reward_max",
        "counters/current_frames",
        "counters/iter",
        "train/agents/optim_steps",
        "train/agents/loss_dummy",
        "train/agents/entropy_min",
        "train/agents/entropy_mean",
        "train/agents/entropy_max",
        "train/agents/extra/kl_approx",
        "train/agents/grad_norm",
        "timers/collection_time",
        "timers/training_time",
        "timers/iteration_time",
        "timers/total_time",
        "timers/fps",
    ]
    for name in every_iteration:
        assert [step for step, _ in _read(scalars, name)] == steps, name
    # the step-0 (pre-training evaluation) row carries the frame counter too
    assert _read(scalars, "counters/total_frames") == [(s, float(s)) for s in [0, *steps]]
    assert not (scalars / "progress" / "total_frames.csv").exists()  # written once, as counters/
    assert [v for _, v in _read(scalars, "counters/iter")] == [1.0, 2.0, 3.0]
    assert [v for _, v in _read(scalars, "train/agents/optim_steps")] == [2.0, 4.0, 6.0]
    # Random CartPole episodes last ~20 steps: episodes end in every 64-step batch.
    for name in ("episode_reward_min", "episode_reward_mean", "episode_reward_max"):
        assert [s for s, _ in _read(scalars, f"collection/agents/reward/{name}")] == steps
    assert [s for s, _ in _read(scalars, "collection/agents/episode_len_mean")] == steps
    # Evaluation: before training (step 0), at the 128-frame interval, after the last batch.
    evaluated = [s for s, _ in _read(scalars, "eval/deterministic/reward/episode_reward_mean")]
    assert evaluated == [0, 128, 192]
    assert [s for s, _ in _read(scalars, "eval/deterministic/episode_len_mean")] == evaluated
    assert [s for s, _ in _read(scalars, "timers/eval_time")] == [128, 192]
    assert pre and set(pre) <= set(hooks.eval_hook_set.last_metrics)


def test_trainer_only_received_python_numbers(trained):
    _, trainer, _, _, _ = trained
    for key, values in trainer._log_dict.items():
        for value in values:
            assert type(value) in (int, float, bool), (key, type(value))


def test_progress_lines_printed(trained):
    _, _, _, stream, _ = trained
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2
    assert "192/192 frames (100.0%)" in lines[-1]


def test_checkpoint_round_trip_into_a_fresh_trainer(trained, tmp_path):
    source_dir, trainer, hooks, _, _ = trained
    assert Checkpoint.is_checkpoint(source_dir / "ckpt")
    fresh, fresh_hooks, _ = _build(tmp_path, checkpoint_file=tmp_path / "unused")
    assert fresh_hooks.counters_hook.total_frames == 0
    fresh.load_from_file(source_dir / "ckpt")
    assert fresh.collected_frames == TOTAL_FRAMES
    assert fresh_hooks.counters_hook.total_frames == TOTAL_FRAMES
    assert fresh_hooks.counters_hook.iteration == 3
    assert fresh_hooks._total_time == pytest.approx(hooks._total_time)
    restored_eval = fresh_hooks.eval_hook_set.hooks[0]
    assert restored_eval.state_dict()["last_eval_frames"] == TOTAL_FRAMES
    assert restored_eval.num_evaluations == 3
    assert restored_eval.last_metrics == pytest.approx(hooks.eval_hook_set.last_metrics)
    assert fresh_hooks.progress_hook.last_episode_reward == pytest.approx(
        hooks.progress_hook.last_episode_reward
    )
    assert fresh_hooks.run_pre_eval() == {}  # resumed: no second step-0 evaluation
    fresh_hooks.close()
