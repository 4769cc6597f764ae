"""Plain-tensor forwards of the networks inside TorchRL's off-policy losses (SAC, TD3).

Why: ``SACLoss``/``TD3Loss`` hold the twin Q-networks' parameters stacked (``[2, out, in]``
per weight) and evaluate them by swapping each slice into one module (``to_module``) and running
it through the TensorDict wrappers, once per network. On the SAC Pendulum workload (256x256
networks, batches of 256) the loss forward took ~60% of an optimizer step in cProfile, most of it
outside the matmuls. The stacked tensors already are an ensemble: one ``baddbmm`` per layer
evaluates both networks with the very parameters TorchRL optimizes, so gradients land where
``SACLoss`` puts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn

Activation = Callable[[torch.Tensor], torch.Tensor]
Layers = list[tuple[torch.Tensor, torch.Tensor | None]]

ACTIVATIONS: dict[type[nn.Module], Activation] = {
    nn.Tanh: torch.tanh,
    nn.ReLU: torch.relu,
    nn.ELU: F.elu,
}


def _identity(x: torch.Tensor) -> torch.Tensor:
    """The activation of a one-layer MLP: it has none (never applied)."""
    return x


def mlp_layout(mlp: nn.Module) -> tuple[list[str], Activation] | None:
    """Names of an MLP's ``Linear`` children and its one hidden activation, or None when the
    MLP is not a plain ``Linear``/activation stack with a flat output (then no lean path). A
    single ``Linear`` (a linear Q-table: ``q_cells: []``) has no activation."""
    if not isinstance(mlp, nn.Sequential) or not isinstance(getattr(mlp, "out_features", 1), int):
        return None
    names, acts = [], set()
    for name, layer in mlp.named_children():
        if isinstance(layer, nn.Linear):
            names.append(name)
        elif type(layer) in ACTIVATIONS:
            acts.add(type(layer))
        else:
            return None
    children = list(mlp.children())
    if len(children) == 1 and names:
        return names, _identity
    if len(acts) != 1 or not all(isinstance(children[i], nn.Linear) for i in (0, -1)):
        return None
    if any(isinstance(a, nn.Linear) == isinstance(b, nn.Linear) for a, b in pairwise(children)):
        return None  # layers and activations must alternate
    return names, ACTIVATIONS[acts.pop()]


def mlp_forward(layers: Layers, act: Activation, x: torch.Tensor) -> torch.Tensor:
    """One MLP: ``F.linear`` per layer, ``act`` between layers."""
    last = len(layers) - 1
    for i, (weight, bias) in enumerate(layers):
        x = F.linear(x, weight, bias)
        if i < last:
            x = act(x)
    return x


def ensemble_forward(layers: Layers, act: Activation, x: torch.Tensor) -> torch.Tensor:
    """K stacked MLPs (weights ``[K, out, in]``, biases ``[K, out]``) on one input ``[B, in]``
    (shared by all) or ``[K, B, in]``; returns ``[K, B, out]``.

    Example:
        >>> ensemble_forward([(torch.ones(2, 3, 4), torch.zeros(2, 3))], torch.relu,
        ...                  torch.ones(5, 4)).shape
        torch.Size([2, 5, 3])
    """
    last = len(layers) - 1
    for i, (weight, bias) in enumerate(layers):
        if x.dim() == 2:
            x = x.expand(weight.shape[0], *x.shape)
        x = (
            torch.bmm(x, weight.transpose(1, 2))
            if bias is None
            else torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
        )
        if i < last:
            x = act(x)
    return x


def stacked_layers(params, names: Sequence[str], prefix: tuple[str, ...] = ("module",)) -> Layers:
    """``(weight, bias)`` per named ``Linear`` from a loss's (stacked) parameter TensorDict."""
    return [(params.get((*prefix, n, "weight")), params.get((*prefix, n, "bias"))) for n in names]
