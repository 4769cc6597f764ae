"""ClampedTanh against TorchRL's safetanh_noeps (what TanhNormal squashes with)."""

from __future__ import annotations

import pytest
import torch
from torchrl.modules.distributions.utils import safetanh_noeps

from xdrl.lean.tanh_normal_actor import ClampedTanh


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_same_values_and_gradients_as_safetanh_noeps(dtype) -> None:
    torch.manual_seed(0)
    # ordinary values, and values whose tanh rounds to +-1 (clamped)
    x = torch.cat([torch.randn(64, dtype=dtype) * 2, torch.tensor([-30.0, 9.0, 20.0], dtype=dtype)])
    upstream = torch.randn_like(x)
    ours_in, theirs_in = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours, theirs = ClampedTanh.apply(ours_in), safetanh_noeps(theirs_in)
    (ours * upstream).sum().backward()
    (theirs * upstream).sum().backward()
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    torch.testing.assert_close(ours_in.grad, theirs_in.grad, rtol=0, atol=0)
    assert ours.abs().max() < 1  # the clamp holds
