"""Image encoders: the Nature CNN torso that PPO and A2C share between actor and critic and
DQN uses under its Q head, picked from the observation spec (``algorithm.build.encoder``).

Observations reach the network as uint8 (env, collector and replay buffer keep them so: a
4x84x84 stack is 28 KB, 113 KB as float32); the conversion to float and the 1/255 scaling
happen here, in the first layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

import torch
from torch import nn

from xdrl.config.errors import ConfigError
from xdrl.envs.factory import is_image_shape

FEATURES = 512  # the Nature CNN's feature width
_KEY = "algorithm.build.encoder"


def observation_shape(env) -> tuple[int, ...]:
    """The unbatched shape of the env's ``observation``."""
    spec = env.observation_spec["observation"]
    return tuple(int(n) for n in spec.shape[len(env.batch_size) :])


def resolve_encoder(env, encoder: str) -> Literal["mlp", "cnn"]:
    """``auto``: a CNN for image observations, an MLP for vectors; a one-line error for a CNN
    on vectors or an MLP on images."""
    shape = observation_shape(env)
    image = is_image_shape(shape)
    if encoder == "auto":
        return "cnn" if image else "mlp"
    if encoder == "cnn" and not image:
        raise ConfigError(
            _KEY, f"cnn needs image observations, this env observes vectors {list(shape)}; "
            "set algorithm.build.encoder=auto (or mlp)",
        )  # fmt: skip
    if encoder == "mlp" and image:
        raise ConfigError(
            _KEY, f"mlp needs vector observations, this env observes images {list(shape)}; "
            "set algorithm.build.encoder=auto (or cnn)",
        )  # fmt: skip
    return "cnn" if encoder == "cnn" else "mlp"


def _channels_first(shape: Sequence[int]) -> tuple[tuple[int, int, int], bool]:
    """``([C, H, W], channels_last)`` of an image shape: ``[C, H, W]``, ``[H, W, C]``
    (colour last: at most 4 channels after two larger sides), or a 4-D stack of either,
    whose frames are merged into channels."""
    *lead, a, b, c = shape
    stack = lead[0] if lead else 1
    if c <= 4 < min(a, b):
        return (stack * c, a, b), True
    return (stack * a, b, c), False


class NatureCNN(nn.Module):
    """The convolutional torso of Mnih et al. (2015): 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions,
    then a 512-unit linear layer, ReLU after each; orthogonal weights with gain sqrt(2) and zero
    biases (CleanRL's and SB3's initialization).

    Takes ``[..., *obs_shape]`` (uint8 scaled by 1/255 here; float images as they are) and
    returns ``[..., 512]`` features. Colour-last images and stacks of them are rearranged to
    channels first inside.

    Args:
        obs_shape: the unbatched observation shape, e.g. ``(4, 84, 84)``.
        device: where the parameters live.

    Example:
        >>> NatureCNN((4, 84, 84))(torch.zeros(8, 4, 84, 84, dtype=torch.uint8)).shape
        torch.Size([8, 512])
    """

    def __init__(self, obs_shape: Sequence[int], device: str | torch.device = "cpu") -> None:
        super().__init__()
        self.obs_shape = tuple(int(n) for n in obs_shape)
        (channels, height, width), self.channels_last = _channels_first(self.obs_shape)
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, channels, height, width)).shape[-1]
        self.linear = nn.Linear(flat, FEATURES)
        for layer in [*self.convs, self.linear]:
            if isinstance(layer, nn.Conv2d | nn.Linear) and layer.bias is not None:
                nn.init.orthogonal_(layer.weight, gain=2**0.5)
                nn.init.zeros_(layer.bias)
        self.to(device)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        lead = observation.shape[: observation.dim() - len(self.obs_shape)]
        x = observation.reshape(-1, *self.obs_shape)
        if self.channels_last:  # [N, (k,) H, W, C] -> [N, (k,) C, H, W]
            x = x.movedim(-1, -3)
        x = x.reshape(x.shape[0], -1, *x.shape[-2:])
        first = cast(nn.Conv2d, self.convs[0])
        if (
            x.device.type == "cpu"
            and torch.is_grad_enabled()
            and first.weight.requires_grad
            and not torch.is_autocast_enabled("cpu")
        ):
            x = torch.relu(space_to_depth_conv(first, x))
            features = torch.relu(self.linear(self.convs[2:](x)))
        else:
            features = torch.relu(self.linear(self.convs(scaled_pixels(x))))
        return features.reshape(*lead, FEATURES)


def scaled_pixels(x: torch.Tensor) -> torch.Tensor:
    """Float pixels: uint8 scaled by 1/255 (in place on the new float tensor: one 29 MB buffer
    instead of two for 256 frames, 3.4 -> 2.1 ms), float images as they are."""
    return x.float().div_(255.0) if x.dtype == torch.uint8 else x.float()


def space_to_depth_conv(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """``conv(scaled_pixels(x))`` for an unpadded convolution whose kernel is a multiple of its
    stride (the Nature CNN's 8x8/4), computed as a stride-1 convolution over ``stride x stride``
    pixel blocks moved into channels (input ``[N, C, H, W]`` -> ``[N, C*s*s, H/s, W/s]``, kernel
    ``[O, C, k, k]`` -> ``[O, C*s*s, k/s, k/s]``): the same sums in another order.

    Why: oneDNN's weight gradient of the 4-channel 8x8/4 convolution is slow on CPU. On this
    machine's AMD EPYC, 2 threads, batch 256 of 4x84x84 frames, forward + backward of the first
    layer took 70 ms direct and 26 ms in this form (+1 ms to move the uint8 blocks), at batch 32
    5.5 against 3.5 ms. Only float32 passes that train on CPU use it (CUDA is not measured):
    the no-grad forward is no faster at batch 8 or 1024, and under bf16 autocast this form is
    slower (12 against 30 ms at batch 256). Rows and columns past the last whole block are never
    reached by the strided kernel and are dropped. The whole Atari PPO workload: ``python
    scripts/bench_ablation.py --workload atari --threads 2 --variants xdrl s2d``.
    """
    s = conv.stride[0]
    out_c, in_c, kh, kw = conv.weight.shape
    if conv.stride != (s, s) or kh % s or kw % s or conv.padding != (0, 0) or conv.groups != 1:
        raise ValueError(f"space_to_depth_conv needs an unpadded kernel in whole strides: {conv}")
    n, c, h, w = x.shape
    x = x[..., : h // s * s, : w // s * s]
    blocks = x.reshape(n, c, h // s, s, w // s, s).permute(0, 1, 3, 5, 2, 4)
    blocks = scaled_pixels(blocks.reshape(n, c * s * s, h // s, w // s))
    weight = conv.weight.view(out_c, in_c, kh // s, s, kw // s, s).permute(0, 1, 3, 5, 2, 4)
    weight = weight.reshape(out_c, in_c * s * s, kh // s, kw // s)
    return nn.functional.conv2d(blocks, weight, conv.bias)


class Head(nn.Linear):
    """A linear output layer computed in float32 also under bf16 autocast (logits, values and
    Q-values feed softmaxes, PPO's probability ratios, GAE and TD targets): autocast is switched
    off for its matmul and the bf16 features are widened first. Casting a bf16 result to float32
    afterwards, as this layer first did, keeps bf16's 8-bit mantissa in every logit and value.

    Args:
        in_features, out_features: as ``nn.Linear``.
        gain: orthogonal gain of the weights (None: PyTorch's default initialization).
        device: where the parameters live.

    Example:
        >>> Head(512, 6, gain=0.01)(torch.zeros(2, 512)).dtype
        torch.float32
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        gain: float | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(in_features, out_features, device=device)
        if gain is not None:
            nn.init.orthogonal_(self.weight, gain=gain)
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return nn.functional.linear(x.float(), self.weight, self.bias)


def has_image_encoder(module: nn.Module) -> bool:
    """Whether ``module`` holds a :class:`NatureCNN`."""
    return any(isinstance(m, NatureCNN) for m in module.modules())
