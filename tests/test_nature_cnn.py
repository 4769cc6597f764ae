"""The Nature CNN's space-to-depth first layer against the strided convolution it replaces
(no ALE needed)."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from torch import nn

from xdrl.algorithms import encoders
from xdrl.algorithms.encoders import NatureCNN, space_to_depth_conv


@pytest.mark.parametrize("shape", [(4, 84, 84), (3, 87, 90), (12, 96, 96)])
def test_space_to_depth_first_layer_matches_the_strided_convolution(shape) -> None:
    """The training pass's first layer (blocks moved into channels) gives nn.Conv2d's outputs
    and weight/bias gradients, also where rows and columns are not whole blocks."""
    torch.manual_seed(0)
    conv = nn.Conv2d(shape[0], 32, 8, stride=4)
    frames = torch.randint(0, 256, (6, *shape), dtype=torch.uint8)
    upstream = torch.randn(conv(frames.float()).shape)

    expected = conv(frames.float() / 255.0)
    (expected * upstream).sum().backward()
    grads = [conv.weight.grad.clone(), conv.bias.grad.clone()]
    conv.zero_grad()
    got = space_to_depth_conv(conv, frames)
    (got * upstream).sum().backward()

    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(conv.weight.grad, grads[0], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(conv.bias.grad, grads[1], atol=1e-4, rtol=1e-5)


def test_nature_cnn_trains_through_the_space_to_depth_layer() -> None:
    """A float32 pass that trains takes the space-to-depth first layer, a no-grad or bf16 pass
    the direct one: same features either way."""
    cnn = NatureCNN((4, 84, 84))
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    with mock.patch.object(
        encoders, "space_to_depth_conv", wraps=encoders.space_to_depth_conv
    ) as s2d:
        with torch.no_grad():
            direct = cnn(frames)
        assert s2d.call_count == 0
        trained = cnn(frames)
        assert s2d.call_count == 1
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cnn(frames)  # slower in this form under bf16: the direct convolution
        assert s2d.call_count == 1
    torch.testing.assert_close(trained.detach(), direct, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "conv", [nn.Conv2d(4, 8, 8, stride=4, padding=1), nn.Conv2d(4, 8, 6, stride=4)]
)
def test_space_to_depth_refuses_what_it_does_not_compute(conv) -> None:
    with pytest.raises(ValueError, match="whole strides"):
        space_to_depth_conv(conv, torch.zeros(1, 4, 84, 84, dtype=torch.uint8))
