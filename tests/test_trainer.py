"""XdrlTrainer: the same optimization loop as TorchRL's Trainer, the losses (and a lean loss's
deferred diagnostics) averaged over every step of the batch; the lean stepper's gradient norm
equals TorchRL's."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.objectives import ClipPPOLoss
from torchrl.trainers import DefaultOptimizationStepper

from tests.conftest import QUIET
from xdrl.algorithms.stepper import DetachedOptimizationStepper
from xdrl.lean.trainer import XdrlTrainer, mean_of_steps
from xdrl.training.build import build_trainer


class _Recorder(DetachedOptimizationStepper):
    """Keeps every step's outputs, and TorchRL's ``ClipPPOLoss.forward`` of each sub-batch at
    the parameters the step starts from (the reference for the deferred diagnostics)."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[TensorDict] = []
        self.reference: list[TensorDict] = []

    def step(self, trainer, sub_batch):
        with torch.no_grad():
            self.reference.append(ClipPPOLoss.forward(trainer.loss_module, sub_batch.clone()))
        out = super().step(trainer, sub_batch)
        self.outputs.append(out.clone())
        return out


def test_hooks_see_the_mean_of_every_step_of_the_batch(make_cfg) -> None:
    cfg = make_cfg(
        "frames_per_batch=256",
        "env.num_envs=4",
        "algorithm.build.minibatch_size=64",
        "algorithm.build.epochs=3",
        "algorithm.optimizer.lr=0.02",  # large steps: some ratios leave the clip range
        "total_frames=256",
        *QUIET,
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
        for key in ("loss_objective", "loss_critic", "grad_norm"):
            values = torch.stack([out[key] for out in recorder.outputs])
            expected = sum(v.item() for v in values) / len(values)
            assert average[key].item() == pytest.approx(expected, rel=1e-5)
        # the diagnostics were deferred (not in the steps' outputs) and equal TorchRL's, averaged
        diagnostics = ("clip_fraction", "kl_approx", "ESS", "max_ratio", "mean_ratio")
        assert not set(diagnostics) & set(recorder.outputs[0].keys())
        for key in (*diagnostics, "explained_variance"):
            expected = sum(ref[key].item() for ref in recorder.reference) / 12
            assert average[key].item() == pytest.approx(expected, rel=1e-5, abs=1e-6), key
        assert 0 < average["clip_fraction"].item() < 1
    finally:
        run.close()


def test_mean_of_one_step_is_that_step() -> None:
    step = TensorDict({"loss": torch.tensor(2.0)})
    assert mean_of_steps([step]) is step
    two = mean_of_steps([step, TensorDict({"loss": torch.tensor(4.0)})])
    assert two["loss"].item() == 3.0


def test_mean_of_steps_keeps_every_entry_and_shape() -> None:
    """Nested entries and entries of shape [1] (explained variance) average key by key."""
    steps = [
        TensorDict(
            {
                "a": torch.tensor(float(i)),
                "ev": torch.tensor([2.0 * i]),
                "n": {"b": torch.tensor(i + 1.0)},
            }
        )
        for i in range(4)
    ]
    mean = mean_of_steps(steps)
    assert set(mean.keys(True, True)) == {"a", "ev", ("n", "b")}
    assert mean["a"].item() == 1.5 and mean["n", "b"].item() == 2.5
    assert mean["ev"].shape == (1,) and mean["ev"].item() == 3.0


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


@pytest.mark.parametrize("max_norm", [0.5, 1e6])  # clipped, and left alone
def test_global_norm_clip_is_torchs_bit_for_bit(max_norm: float) -> None:
    from xdrl.algorithms.stepper import clip_global_norm, total_norm

    torch.manual_seed(0)
    grads = [torch.randn(256, 4), torch.randn(256), torch.randn(2, 256), torch.randn(2)]
    ours, theirs = [g.clone() for g in grads], [g.clone() for g in grads]
    norm = clip_global_norm(ours, max_norm)
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for param, g in zip(params, theirs, strict=True):
        param.grad = g
    expected = torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    assert torch.equal(norm, expected)
    assert torch.equal(total_norm(grads), torch.nn.utils.get_total_norm(grads, foreach=True))
    for mine, reference in zip(ours, theirs, strict=True):
        assert torch.equal(mine, reference)
    assert (float(norm) > max_norm) == (max_norm == 0.5)  # the first case really clips


# Parity with TorchRL: the same batches through Trainer.optim_steps and XdrlTrainer.optim_steps
_OPTIM_STAGES = (
    "pre_optim_steps",
    "pre_epoch_log",
    "pre_epoch",
    "process_optim_batch",
    "post_optim",
    "post_optim_log",
    "post_epoch_log",
    "post_epoch",
)


def _record_stages(trainer, events: list, averages: list) -> None:
    """Append every optimization-loop hook call to ``events`` (pass-through where one chains)."""
    for stage in _OPTIM_STAGES:

        def op(*args, _stage=stage):
            events.append(_stage)
            return args[0] if _stage in ("pre_epoch", "process_optim_batch") else None

        trainer.register_op(stage, op)
    trainer.register_op(
        "post_optim_complete_log", lambda n, avg: averages.append((n, avg.clone())) and None
    )


def _optimize_once(loop, cfg, batch) -> tuple[list, list, list, list]:
    """A freshly built run's ``loop`` (a class's ``optim_steps``) on ``batch``; what it did."""
    run = build_trainer(cfg)  # seeded: every build starts from the same weights
    try:
        trainer = run.trainer
        recorder = _Recorder()
        trainer.optimization_stepper = recorder
        events: list[str] = []
        averages: list = []
        _record_stages(trainer, events, averages)
        torch.manual_seed(7)  # the minibatch permutation
        loop(trainer, batch.clone())
        params = [p.detach().clone() for p in trainer.loss_module.parameters()]
    finally:
        run.close()
    return events, recorder.outputs, averages, params


@pytest.mark.parametrize("epochs", [1, 3])
def test_same_optimization_as_torchrl_trainer(make_cfg, epochs: int) -> None:
    from torchrl.trainers import Trainer

    cfg = make_cfg(
        "frames_per_batch=128",
        "env.num_envs=4",
        "algorithm.build.minibatch_size=32",
        f"algorithm.build.epochs={epochs}",
        "algorithm.build.advantage_every_epoch=true",  # GAE and buffer fill inside optim_steps
        "total_frames=128",
        *QUIET,
    )
    run = build_trainer(cfg)
    try:
        batch = next(iter(run.trainer.collector))
        start = [p.detach().clone() for p in run.trainer.loss_module.parameters()]
    finally:
        run.close()
    ours = _optimize_once(XdrlTrainer.optim_steps, cfg, batch)
    theirs = _optimize_once(Trainer.optim_steps, cfg, batch)
    (our_events, our_steps, our_avg, our_params) = ours
    (their_events, their_steps, their_avg, their_params) = theirs
    assert our_events == their_events  # the same hooks, in the same order
    assert our_events.count("post_optim") == 4 * epochs
    assert len(our_steps) == len(their_steps) == 4 * epochs
    for mine, ref in zip(our_steps, their_steps, strict=True):  # the same steps
        for key in ("loss_objective", "loss_critic", "grad_norm"):
            torch.testing.assert_close(mine[key], ref[key], rtol=1e-6, atol=1e-7)
    assert any(not torch.equal(p, q) for p, q in zip(our_params, start, strict=True))
    for mine, ref in zip(our_params, their_params, strict=True):
        torch.testing.assert_close(mine, ref, rtol=1e-6, atol=1e-7)
    ((our_count, our_mean),) = our_avg
    ((their_count, their_mean),) = their_avg
    assert our_count == their_count == 4 * epochs
    for key in ("loss_objective", "loss_critic", "grad_norm"):
        every = [float(out[key]) for out in our_steps]
        last_epoch = every[-4:]
        # xdrl: the mean of every step; TorchRL: its running mean restarts each epoch
        assert float(our_mean[key]) == pytest.approx(sum(every) / len(every), rel=1e-5)
        assert float(their_mean[key]) == pytest.approx(sum(last_epoch) / 4, rel=1e-5)
        if epochs == 1:
            assert float(our_mean[key]) == pytest.approx(float(their_mean[key]), rel=1e-5)


@pytest.mark.parametrize("components", [None, ("loss_objective",)])
def test_stepper_takes_the_same_step_as_torchrl(make_cfg, components) -> None:
    import copy

    cfg = make_cfg(
        "frames_per_batch=64",
        "env.num_envs=2",
        "algorithm.build.minibatch_size=64",
        "algorithm.max_grad_norm=0.5",
        "total_frames=64",
        *QUIET,
    )
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        batch = next(iter(trainer.collector)).reshape(-1)
        trainer.loss_module.value_estimator(batch)
        start = (
            copy.deepcopy(trainer.loss_module.state_dict()),
            copy.deepcopy(trainer.optimizer.state_dict()),
        )
        results = []
        for stepper in (
            DetachedOptimizationStepper(components),
            DefaultOptimizationStepper(components),
        ):
            trainer.loss_module.load_state_dict(start[0])
            trainer.optimizer.load_state_dict(start[1])
            out = stepper.step(trainer, batch.clone())
            params = [p.detach().clone() for p in trainer.loss_module.parameters()]
            results.append((out, params))
    finally:
        run.close()
    (ours, our_params), (theirs, their_params) = results
    assert set(ours.keys()) == set(theirs.keys())
    assert not any(value.requires_grad for value in ours.values())  # graphs freed at once
    assert theirs["loss_objective"].requires_grad  # TorchRL's keeps them
    for key in theirs.keys():
        torch.testing.assert_close(ours[key], theirs[key].detach().float(), rtol=1e-5, atol=1e-6)
    moved = [not torch.equal(p, q) for p, q in zip(our_params, start[0].values(), strict=False)]
    assert any(moved)
    for mine, ref in zip(our_params, their_params, strict=True):
        torch.testing.assert_close(mine, ref, rtol=1e-6, atol=1e-7)
