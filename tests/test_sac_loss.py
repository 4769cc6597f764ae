"""LeanSACLoss against TorchRL's SACLoss: same values and gradients on fixed batches; the
ensemble forward against separate networks."""

from __future__ import annotations

import pytest
import torch
from torchrl.modules import MLP
from torchrl.objectives import SACLoss

from tests.conftest import pendulum_transitions
from xdrl.algorithms import sac
from xdrl.envs.factory import make_env
from xdrl.lean.ensemble import ensemble_forward, mlp_forward, mlp_layout
from xdrl.lean.sac_loss import LeanSACLoss


def _pair(**kwargs):
    """A LeanSACLoss and a SACLoss over the same actor, with the same critic weights."""
    torch.manual_seed(0)
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    lean = sac.build(
        env, frames_per_batch=64, actor_cells=(32, 32), critic_cells=(32, 32), **kwargs
    ).loss_module
    assert isinstance(lean, LeanSACLoss)
    reference = SACLoss(
        lean.actor_network,
        lean.qvalue_network,
        num_qvalue_nets=2,
        loss_function=lean.loss_function,
        alpha_init=float(lean.alpha_init),
        fixed_alpha=lean.fixed_alpha,
        action_spec=env.full_action_spec_unbatched["action"],
        delay_qvalue=True,
        deactivate_vmap=True,
    )
    reference.make_value_estimator(gamma=0.99)
    reference.load_state_dict(lean.state_dict())
    with torch.no_grad():  # targets differ from the online critics, as after some training
        for p in lean.target_qvalue_network_params.values(True, True):
            p.add_(0.05 * torch.randn_like(p))
        reference.target_qvalue_network_params.update_(lean.target_qvalue_network_params)
        lean.log_alpha.fill_(-0.7)
        reference.log_alpha.fill_(-0.7)
    env.close()
    return lean, reference


def _run(loss, batch):
    for p in loss.parameters():
        p.grad = None
    torch.manual_seed(123)  # the same random draws for both losses
    out = loss(batch)
    sum(v for k, v in out.items() if k.startswith("loss_")).backward()
    grads = {name: p.grad.clone() for name, p in loss.named_parameters() if p.grad is not None}
    return out, grads


@pytest.mark.parametrize(
    "kwargs", [{}, {"loss_function": "smooth_l1", "fixed_alpha": True, "alpha_init": 0.3}]
)
def test_same_values_and_gradients_as_sac_loss(kwargs, monkeypatch) -> None:
    lean, reference = _pair(**kwargs)
    calls = []
    torchrl_forward = SACLoss.forward
    monkeypatch.setattr(
        SACLoss, "forward", lambda self, td: calls.append(1) or torchrl_forward(self, td)
    )
    lean_batch, reference_batch = pendulum_transitions(), pendulum_transitions()
    ours, our_grads = _run(lean, lean_batch)
    assert calls == []  # the lean path ran
    theirs, their_grads = _run(reference, reference_batch)
    assert calls == [1]
    assert set(ours.keys()) == set(theirs.keys())
    for key in theirs.keys():
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-6, atol=1e-6, msg=key)
    torch.testing.assert_close(
        lean_batch["td_error"], reference_batch["td_error"], rtol=1e-6, atol=1e-6
    )
    assert set(our_grads) == set(their_grads) and len(our_grads) >= 12
    for name, grad in their_grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=1e-6, atol=1e-6, msg=name)


def test_lean_loss_follows_loaded_weights() -> None:
    lean, reference = _pair()
    lean(pendulum_transitions())  # the lean path looks its parameters up once
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.1 * torch.randn_like(p))
    lean.load_state_dict(reference.state_dict())  # what a resume does
    torch.manual_seed(5)
    ours = lean(pendulum_transitions(seed=1))
    torch.manual_seed(5)
    theirs = reference(pendulum_transitions(seed=1))
    for key in theirs.keys():
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-6, atol=1e-6, msg=key)


def test_ensemble_is_the_separate_networks() -> None:
    torch.manual_seed(0)
    nets = [MLP(in_features=4, out_features=1, num_cells=[16, 16]) for _ in range(2)]
    names, act = mlp_layout(nets[0])
    stacked = [
        (
            torch.stack([n.get_submodule(k).weight for n in nets]),
            torch.stack([n.get_submodule(k).bias for n in nets]),
        )
        for k in names
    ]
    x = torch.randn(10, 4)
    out = ensemble_forward(stacked, act, x)
    assert out.shape == (2, 10, 1)
    for i, net in enumerate(nets):
        torch.testing.assert_close(out[i], net(x))
        layers = [(net.get_submodule(k).weight, net.get_submodule(k).bias) for k in names]
        torch.testing.assert_close(mlp_forward(layers, act, x), net(x))
    per_net = torch.randn(2, 10, 4)  # one input per network
    out = ensemble_forward(stacked, act, per_net)
    for i, net in enumerate(nets):
        torch.testing.assert_close(out[i], net(per_net[i]))


def test_other_networks_fall_back_to_sac_loss() -> None:
    assert mlp_layout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout())) is None
