"""Training settings do what their config comments say: the linear LR schedule ends at 0,
``advantage_every_epoch`` and ``reward_scale`` change the advantages as TorchRL's GAE computes
them, epsilon anneals by frames, and TD3's actor delay counts on across a resume.

Every expected value is computed here, from the config numbers or with TorchRL's own GAE.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torchrl.modules import EGreedyModule
from torchrl.objectives.value import GAE

from tests.conftest import QUIET
from xdrl.algorithms.stepper import DetachedOptimizationStepper
from xdrl.training.build import build_trainer


class _SubBatches(DetachedOptimizationStepper):
    """The default step, keeping a copy of every sub-batch it trained on."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def step(self, trainer, sub_batch):
        self.seen.append(sub_batch.detach().clone())
        return super().step(trainer, sub_batch)


def test_linear_lr_schedule_reaches_zero(make_cfg) -> None:
    cfg = make_cfg(
        "total_frames=256",
        "frames_per_batch=64",
        "env.num_envs=2",
        "algorithm.build.minibatch_size=64",
        "algorithm.build.epochs=1",
        "algorithm.lr_schedule=linear",
        "algorithm.optimizer.lr=0.001",
        *QUIET,
    )
    run = build_trainer(cfg)
    try:
        optimizer = run.trainer.optimizer
        used: list[float] = []
        run.trainer.register_op(
            "pre_optim_steps", lambda: used.append(optimizer.param_groups[0]["lr"])
        )
        run.trainer.train()
        final = optimizer.param_groups[0]["lr"]
    finally:
        run.close()
    # 4 batches: the rate falls by a quarter of 0.001 after each one
    assert used == pytest.approx([0.001, 0.00075, 0.0005, 0.00025])
    assert final == pytest.approx(0.0, abs=1e-12)


def _gae_now(loss, batch, *, gamma: float, lmbda: float, reward_scale: float = 1.0):
    """TorchRL's GAE on a copy of ``batch`` with a copy of the critic as it is now."""
    data = batch.detach().clone()
    if reward_scale != 1.0:
        data.set(("next", "reward"), data.get(("next", "reward")) * reward_scale)
    critic = copy.deepcopy(loss.critic_network)
    with torch.no_grad():
        GAE(gamma=gamma, lmbda=lmbda, value_network=critic, average_gae=False)(data)
    return data.get("advantage").reshape(-1)


def _train_recording_gae(cfg, reward_scale: float = 1.0) -> tuple[list, list]:
    """Train ``cfg``'s PPO run (gamma 0.9, lambda 0.8); the sub-batches it trained on and
    TorchRL's GAE at the start of each epoch."""
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        recorder = _SubBatches()
        trainer.optimization_stepper = recorder
        expected = []

        def at_epoch_start(batch):
            loss = trainer.loss_module
            expected.append(_gae_now(loss, batch, gamma=0.9, lmbda=0.8, reward_scale=reward_scale))
            return batch

        trainer.register_op("pre_epoch", at_epoch_start)
        trainer.train()
    finally:
        run.close()
    return recorder.seen, expected


PPO_ONE_BATCH = [
    "total_frames=64",
    "frames_per_batch=64",
    "env.num_envs=2",
    "algorithm.build.minibatch_size=64",  # one whole-batch step per epoch
    "algorithm.build.gamma=0.9",
    "algorithm.build.lmbda=0.8",
    *QUIET,
]


@pytest.mark.parametrize("every_epoch", [False, True])
def test_advantage_every_epoch(make_cfg, every_epoch: bool) -> None:
    flag = str(every_epoch).lower()
    cfg = make_cfg(
        *PPO_ONE_BATCH,
        "algorithm.build.epochs=3",
        f"algorithm.build.advantage_every_epoch={flag}",
    )
    seen, expected = _train_recording_gae(cfg)
    used = [sub.get("advantage").reshape(-1) for sub in seen]
    assert len(used) == len(expected) == 3
    torch.testing.assert_close(used[0], expected[0], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(expected[1], expected[0])  # the critic moved between epochs
    for epoch in (1, 2):
        if every_epoch:  # recomputed with the critic of that epoch
            torch.testing.assert_close(used[epoch], expected[epoch], rtol=1e-5, atol=1e-6)
        else:  # computed once per batch, before the first epoch
            torch.testing.assert_close(used[epoch], expected[0], rtol=1e-5, atol=1e-6)


def test_reward_scale_scales_the_value_targets_only(make_cfg) -> None:
    cfg = make_cfg(*PPO_ONE_BATCH, "algorithm.build.epochs=1", "algorithm.build.reward_scale=0.1")
    (sub,), expected = _train_recording_gae(cfg, reward_scale=0.1)
    assert torch.all(sub.get(("next", "reward")) == 1.0)  # CartPole's reward, in env units
    scaled = sub.get(("next", "train_reward"))
    torch.testing.assert_close(scaled, torch.full_like(scaled, 0.1))
    torch.testing.assert_close(sub.get("advantage").reshape(-1), expected[0], rtol=1e-5, atol=1e-6)


def test_epsilon_anneals_by_collected_frames(make_cfg) -> None:
    cfg = make_cfg(
        "algorithm=dqn",
        "total_frames=256",
        "frames_per_batch=64",
        "env.num_envs=2",
        "algorithm.build.q_cells=[16]",
        "algorithm.build.batch_size=16",
        "algorithm.build.init_random_frames=0",
        "algorithm.build.eps_init=1.0",
        "algorithm.build.eps_end=0.1",
        "algorithm.build.eps_annealing_frames=512",
        *QUIET,
    )
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        (greedy,) = [m for m in trainer.collector.policy.modules() if isinstance(m, EGreedyModule)]
        eps = []
        trainer.register_op("post_steps", lambda: eps.append(float(greedy.eps)))
        trainer.train()
    finally:
        run.close()
    # linear from 1.0 towards 0.1 over 512 frames: 0.9 / 512 per frame, 64 frames a batch
    assert eps == pytest.approx(
        [1.0 - 0.9 * 64 * k / 512 for k in (1, 2, 3, 4)], abs=1e-5
    )  # float32 steps


def _td3_cfg(make_cfg, total_frames: int):
    return make_cfg(
        "algorithm=td3",
        "env=pendulum",
        f"total_frames={total_frames}",
        "frames_per_batch=8",
        "env.num_envs=2",
        "algorithm.build.actor_cells=[16]",
        "algorithm.build.critic_cells=[16]",
        "algorithm.build.batch_size=4",
        "algorithm.build.init_random_frames=0",
        "algorithm.build.utd=0.375",  # 3 optimizer steps per batch of 8
        "algorithm.build.policy_delay=2",
        "checkpoint.interval_frames=8",
        "logging=none",
        "eval=none",
    )


def test_td3_actor_delay_counts_on_across_a_resume(make_cfg) -> None:
    first = build_trainer(_td3_cfg(make_cfg, 8))
    try:
        first.trainer.train()  # steps 1-3: the actor moved at step 2; checkpoint at 8 frames
    finally:
        first.close()
    second = build_trainer(_td3_cfg(make_cfg, 16))
    try:
        assert second.resumed_from is not None
        trainer = second.trainer
        stepper = trainer.optimization_stepper
        actor_params = trainer.loss_module.actor_network_params
        moved = []
        step = stepper.step

        def watched(trainer_, sub_batch):
            before = actor_params.detach().clone()
            out = step(trainer_, sub_batch)
            moved.append(not (actor_params.detach() == before).all())
            return out

        stepper.step = watched
        trainer.train()
    finally:
        second.close()
    # steps 4-6 of the run: with a delay of 2 the actor moves at steps 4 and 6 (not at the
    # resumed run's second step, as a counter restarted at 0 would have it)
    assert moved == [True, False, True]
