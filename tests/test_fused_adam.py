"""FusedAdamStep against torch's own fused Adam/AdamW step: same parameters and state, bit for
bit, through LR schedules, missing gradients, a state reload and the cases it hands back."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from xdrl.lean.fused_adam import FusedAdamStep


def _net(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2)
    )


def _counted(opt: torch.optim.Optimizer, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of ``opt.step`` (through its class, so LR schedulers still wrap it)."""
    calls = [0]
    step = type(opt).step

    def counting(self, *args, **kwargs):
        calls[0] += self is opt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(type(opt), "step", counting)
    return calls


def _grads(net: nn.Module, step: int, only_last: bool) -> None:
    """Deterministic gradients of a loss on a fixed batch (only the last layer's when
    ``only_last``: TD3's critic-only steps leave the actor's gradients None)."""
    gen = torch.Generator().manual_seed(step)
    x = torch.randn(16, 4, generator=gen)
    out = net(x)
    loss = out.pow(2).mean()
    if only_last:
        loss = net[4](net[3](net[2](net[1](net[0](x))).detach())).pow(2).mean()
    loss.backward()


def _step_both(a, b, opt_a, lean: FusedAdamStep, step: int, only_last: bool = False) -> None:
    """The same gradients on both networks, then torch's step on ``a`` and the lean one on
    ``b``, each followed by its ``zero_grad``."""
    for net in (a, b):
        _grads(net, step, only_last)
    opt_a.step()
    opt_a.zero_grad(set_to_none=True)
    lean()
    lean.zero_grad()


def _two_groups(net: nn.Sequential) -> list[dict]:
    """Hidden layers in one group, the output layer in another with its own learning rate."""
    return [
        {"params": list(net[0].parameters()) + list(net[2].parameters())},
        {"params": list(net[4].parameters()), "lr": 3e-3},
    ]


def _assert_same(a: nn.Module, b: nn.Module, opt_a, opt_b) -> None:
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
        sa, sb = opt_a.state.get(pa, {}), opt_b.state.get(pb, {})
        assert sa.keys() == sb.keys()
        for key in sa:
            assert torch.equal(sa[key], sb[key]), key


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_same_update_as_torch_bit_for_bit(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    a = _net()
    b = copy.deepcopy(a)
    opt_a = cls(_two_groups(a), lr=1e-2, weight_decay=0.01, betas=(0.8, 0.99), fused=True)
    opt_b = cls(_two_groups(b), lr=1e-2, weight_decay=0.01, betas=(0.8, 0.99), fused=True)
    calls = _counted(opt_b, monkeypatch)
    sched_a = torch.optim.lr_scheduler.LinearLR(opt_a, 1.0, 0.1, total_iters=8)
    sched_b = torch.optim.lr_scheduler.LinearLR(opt_b, 1.0, 0.1, total_iters=8)
    lean = FusedAdamStep(opt_b)
    # step 0 trains only the last layer: the other layers' state comes later (torch makes it)
    plan = [True, False, True, True, False, False, True, False, False, False]
    for i, only_last in enumerate(plan):
        _step_both(a, b, opt_a, lean, i, only_last)
        assert all(p.grad is None for p in b.parameters())
        sched_a.step()
        sched_b.step()
        _assert_same(a, b, opt_a, opt_b)
    # torch's step ran for the first step and the first with state to create; the rest lean
    assert calls[0] == 2
    assert opt_b.param_groups[0]["lr"] == opt_a.param_groups[0]["lr"] != 1e-2


def test_state_reload_rebuilds_its_lists() -> None:
    a = _net()
    b = copy.deepcopy(a)
    opt_a = torch.optim.Adam(a.parameters(), lr=1e-2, fused=True)
    opt_b = torch.optim.Adam(b.parameters(), lr=1e-2, fused=True)
    lean = FusedAdamStep(opt_b)
    for i in range(3):
        _step_both(a, b, opt_a, lean, i)
    saved = copy.deepcopy(opt_a.state_dict())
    params = copy.deepcopy(list(a.parameters()))
    for i in range(3, 5):  # a moves on; b's cached lists point at state about to be replaced
        _grads(a, i, False)
        opt_a.step()
        opt_a.zero_grad()
    with torch.no_grad():
        for pa, pb, saved_p in zip(a.parameters(), b.parameters(), params, strict=True):
            pa.copy_(saved_p)
            pb.copy_(saved_p)
    opt_a.load_state_dict(copy.deepcopy(saved))
    opt_b.load_state_dict(copy.deepcopy(saved))
    for i in range(5, 8):
        _step_both(a, b, opt_a, lean, i)
        _assert_same(a, b, opt_a, opt_b)


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.Adam(p, lr=1e-2),  # not fused
        lambda p: torch.optim.Adam(p, lr=1e-2, fused=True, amsgrad=True),
        lambda p: torch.optim.SGD(p, lr=1e-2),
    ],
    ids=["unfused", "amsgrad", "sgd"],
)
def test_other_optimizers_step_themselves(make, monkeypatch: pytest.MonkeyPatch) -> None:
    net = _net()
    opt = make(net.parameters())
    calls = _counted(opt, monkeypatch)
    lean = FusedAdamStep(opt)
    for i in range(4):
        _grads(net, i, False)
        lean()
        lean.zero_grad()
    assert calls[0] == 4
    assert all(p.grad is None for p in net.parameters())


def test_a_step_hook_sends_it_back_to_torch() -> None:
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    lean = FusedAdamStep(opt)
    seen = []
    for i in range(3):
        _grads(net, i, False)
        lean()
        lean.zero_grad()
    opt.register_step_post_hook(lambda *_: seen.append(1))
    for i in range(3, 5):
        _grads(net, i, False)
        lean()
        lean.zero_grad()
    assert len(seen) == 2
