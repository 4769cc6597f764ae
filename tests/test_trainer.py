"""XdrlTrainer: the same optimization loop as TorchRL's Trainer, the losses averaged over every
step of the batch; the lean stepper's gradient norm equals TorchRL's."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.trainers import DefaultOptimizationStepper

from xdrl.algorithms.stepper import DetachedOptimizationStepper
from xdrl.build import build_trainer
from xdrl.trainer import XdrlTrainer, mean_of_steps


class _Recorder(DetachedOptimizationStepper):
    """Keeps every step's outputs and the sub-batch sizes it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[TensorDict] = []

    def step(self, trainer, sub_batch):
        out = super().step(trainer, sub_batch)
        self.outputs.append(out.clone())
        return out


def test_hooks_see_the_mean_of_every_step_of_the_batch(make_cfg) -> None:
    cfg = make_cfg(
        "frames_per_batch=256",
        "env.num_envs=4",
        "algorithm.build.minibatch_size=64",
        "algorithm.build.epochs=3",
        "total_frames=256",
        "logging=none",
        "eval=none",
        "checkpoint=none",
    )
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        assert isinstance(trainer, XdrlTrainer)
        recorder = _Recorder()
        trainer.optimization_stepper = recorder
        seen = []
        trainer.register_op("post_optim_complete_log", lambda n, avg: seen.append((n, avg)))
        trainer.train()
        assert len(recorder.outputs) == 3 * 4  # epochs x minibatches, none skipped
        ((count, average),) = seen
        assert count == 12
        for key in ("loss_objective", "loss_critic", "grad_norm", "clip_fraction"):
            values = torch.stack([out[key] for out in recorder.outputs])
            expected = sum(v.item() for v in values) / len(values)
            assert average[key].item() == pytest.approx(expected, rel=1e-5)
    finally:
        run.close()


def test_mean_of_one_step_is_that_step() -> None:
    step = TensorDict({"loss": torch.tensor(2.0)})
    assert mean_of_steps([step]) is step
    two = mean_of_steps([step, TensorDict({"loss": torch.tensor(4.0)})])
    assert two["loss"].item() == 3.0


@pytest.mark.parametrize("clip", [True, False])
def test_gradient_norm_equals_torchrl(clip: bool) -> None:
    torch.manual_seed(0)
    nets = [torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)]
    optimizer = torch.optim.SGD([p for n in nets for p in n.parameters()], lr=0.1)
    nets[1](nets[0](torch.randn(16, 4))).pow(2).sum().backward()
    grads = [p.grad.clone() for n in nets for p in n.parameters()]
    theirs = DefaultOptimizationStepper._compute_and_clip_grad_norm(optimizer, clip, 0.5)
    clipped = [p.grad.clone() for n in nets for p in n.parameters()]
    for p, g in zip((p for n in nets for p in n.parameters()), grads, strict=True):
        p.grad = g.clone()
    ours = DetachedOptimizationStepper._compute_and_clip_grad_norm(optimizer, clip, 0.5)
    assert float(ours) == pytest.approx(theirs, rel=1e-6)
    for p, ref in zip((p for n in nets for p in n.parameters()), clipped, strict=True):
        torch.testing.assert_close(p.grad, ref)
