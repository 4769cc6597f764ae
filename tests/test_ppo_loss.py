"""LeanClipPPOLoss against TorchRL's ClipPPOLoss: same values and gradients on fixed batches."""

from __future__ import annotations

import pytest
import torch
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from xdrl.algorithms.ppo import build
from xdrl.envs.factory import make_env
from xdrl.lean.collector import VectorCollector
from xdrl.lean.ppo_loss import LeanClipPPOLoss


def _batch_and_nets():
    torch.manual_seed(0)
    env = make_env("CartPole-v1", num_envs=8, batching="vector", seed=0)
    parts = build(env, frames_per_batch=256, minibatch_size=256)
    collector = VectorCollector(env, parts.policy, frames_per_batch=256, total_frames=256)
    batch = next(iter(collector)).reshape(-1)
    collector.shutdown()
    actor, critic = parts.loss_module.actor_network, parts.loss_module.critic_network
    with torch.no_grad():  # a few random steps so the new policy differs from the behaviour one
        for p in actor.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return batch, actor, critic


def _losses(cls, actor, critic, batch, **kwargs):
    loss = cls(actor, critic, functional=False, loss_critic_type="l2", **kwargs)
    loss.make_value_estimator(GAE, gamma=0.98, lmbda=0.8, value_network=critic)
    data = batch.clone()
    with torch.no_grad():
        loss.value_estimator(data)
    for p in loss.parameters():
        p.grad = None
    out = loss(data)
    total = sum(v for k, v in out.items() if k.startswith("loss_"))
    total.backward()
    grads = [p.grad.clone() for p in loss.parameters() if p.grad is not None]
    return out, grads


@pytest.mark.parametrize(
    "kwargs",
    [
        {"clip_epsilon": 0.2, "critic_coeff": 0.5, "normalize_advantage": True},
        {"clip_epsilon": 0.1, "critic_coeff": 1.0, "normalize_advantage": False},
        {
            "clip_epsilon": 0.2,
            "critic_coeff": 0.5,
            "normalize_advantage": True,
            "entropy_bonus": True,
            "entropy_coeff": 0.01,
        },
    ],
)
def test_same_values_and_gradients_as_clip_ppo_loss(kwargs, monkeypatch) -> None:
    batch, actor, critic = _batch_and_nets()
    kwargs.setdefault("entropy_bonus", False)
    fell_back = []
    torchrl_forward = ClipPPOLoss.forward

    def counting_forward(self, tensordict):
        fell_back.append(type(self))
        return torchrl_forward(self, tensordict)

    monkeypatch.setattr(ClipPPOLoss, "forward", counting_forward)
    ours, our_grads = _losses(LeanClipPPOLoss, actor, critic, batch, **kwargs)
    assert fell_back == []  # the lean path ran: ClipPPOLoss.forward was never reached
    theirs, their_grads = _losses(ClipPPOLoss, actor, critic, batch, **kwargs)
    assert fell_back == [ClipPPOLoss]  # the reference ran TorchRL's forward
    assert set(ours.keys()) == set(theirs.keys())
    for key in theirs.keys():
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-6, atol=1e-6, msg=key)
    assert 0 < float(theirs["clip_fraction"]) < 1  # the clip was exercised
    assert len(our_grads) == len(their_grads) > 0
    for mine, ref in zip(our_grads, their_grads, strict=True):
        torch.testing.assert_close(mine, ref, rtol=1e-6, atol=1e-6)


def test_per_batch_statistics_are_recomputed_when_their_tensors_change() -> None:
    """The normalized advantages and the targets' variance (explained variance) are cached per
    tensor: the same tensor again reuses them, a change in place recomputes them."""
    batch, actor, critic = _batch_and_nets()
    loss = LeanClipPPOLoss(actor, critic, functional=False, loss_critic_type="l2")
    reference = ClipPPOLoss(actor, critic, functional=False, loss_critic_type="l2")
    for module in (loss, reference):
        module.make_value_estimator(GAE, gamma=0.98, lmbda=0.8, value_network=critic)
    data = batch.clone()
    with torch.no_grad():
        loss.value_estimator(data)
        for _ in range(2):  # the same tensor twice (whole-batch epochs), then changed in place
            for key in ("loss_objective", "ESS", "clip_fraction", "explained_variance"):
                torch.testing.assert_close(
                    loss(data)[key], reference(data)[key], rtol=1e-6, atol=1e-6
                )
            data.get("advantage").mul_(-2.0).add_(0.3)
            data.get("value_target").mul_(3.0).add_(1.0)


def test_an_annealed_clip_epsilon_is_used_at_once() -> None:
    batch, actor, critic = _batch_and_nets()
    loss = LeanClipPPOLoss(actor, critic, functional=False, loss_critic_type="l2")
    loss.make_value_estimator(GAE, gamma=0.98, lmbda=0.8, value_network=critic)
    data = batch.clone()
    with torch.no_grad():
        loss.value_estimator(data)
        wide = loss(data)["clip_fraction"]
        loss.clip_epsilon.fill_(0.01)  # a schedule anneals the buffer in place
        assert loss(data)["clip_fraction"] > wide


DIAGNOSTICS = ("clip_fraction", "kl_approx", "ESS", "max_ratio", "mean_ratio", "explained_variance")


@pytest.mark.parametrize("sizes", [(256, 256, 256), (256, 100, 256)])
def test_deferred_diagnostics_are_the_mean_of_each_calls(sizes) -> None:
    """Inside ``deferring_diagnostics`` the calls leave the diagnostics out; the block's mean
    equals the mean of ``ClipPPOLoss``'s per call, with the clip annealed between calls and
    (second case) minibatches of unequal size."""
    batch, actor, critic = _batch_and_nets()
    loss = LeanClipPPOLoss(actor, critic, functional=False, loss_critic_type="l2")
    reference = ClipPPOLoss(actor, critic, functional=False, loss_critic_type="l2")
    loss.make_value_estimator(GAE, gamma=0.98, lmbda=0.8, value_network=critic)
    data = batch.clone()
    with torch.no_grad():
        loss.value_estimator(data)
    theirs, clips = [], (0.2, 0.05, 0.1)
    with loss.deferring_diagnostics() as diagnostics:
        for size, clip in zip(sizes, clips, strict=True):
            loss.clip_epsilon.fill_(clip)
            reference.clip_epsilon.fill_(clip)
            ours = loss(data[:size])
            assert not set(DIAGNOSTICS) & set(ours.keys())
            with torch.no_grad():
                theirs.append(reference(data[:size]))
        mean = diagnostics()
    assert set(mean) == set(DIAGNOSTICS)
    for key in DIAGNOSTICS:
        expected = torch.stack([t[key] for t in theirs]).mean(0)
        torch.testing.assert_close(mean[key], expected, rtol=1e-6, atol=1e-6, msg=key)
    assert len({float(t["clip_fraction"]) for t in theirs}) == 3  # each call's clip counted
    assert set(DIAGNOSTICS) <= set(loss(data).keys())  # outside the block: in the output again
