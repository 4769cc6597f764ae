"""The deterministic policy as one tensor-in, tensor-out ``nn.Module``: the observation gymnasium's
``env.step`` returns in, env action out, every stateless step between inside: the zeroed entries
of ``env.mask_observations`` (:class:`ObservationMask`), the one-hot
encoding of ``env.observation_encoding=one_hot`` (:class:`OneHot`), the dtype cast the run's env
applies (float32, except uint8 images, which the network scales itself), frozen normalization
statistics, the network, and the action mapping the TorchRL actor applies (argmax for discrete
actions, the tanh-normal's deterministic sample scaled to the action bounds for continuous ones).

Stateful preprocessing (Atari's noop starts, max-pooled frame skip and frame stack) keeps
history between steps and cannot live in a stateless graph: such a policy takes the
preprocessed observation (for Atari the ``[4, 84, 84]`` uint8 stack).

The TorchRL actor itself runs inside (a ``TensorDict`` built in ``forward`` under
``ExplorationType.DETERMINISTIC``): ``torch.export`` traces through it, so the exported graph is
the policy that was evaluated, not a re-implementation of it. The normalization statistics are
copied out of ``VecNormV2`` as constant buffers: computing them from its running sums in the graph
emits ``aten._foreach_mul``, which torch 2.13's ONNX exporter cannot translate (measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn


class OneHot(nn.Module):
    """Integer observations ``[batch, *shape]`` as the float32 one-hot vector of their joint
    state (torch's ``one_hot`` of cell ``ravel_multi_index(value - low, counts)``): the torch form
    of :class:`xdrl.envs.observation_encoding.OneHotObservation`, so the encoding exports with the
    policy. An observation outside the space raises in torch.

    Args:
        low: the lowest value of each of the ``k`` dimensions.
        counts: how many values each dimension takes.

    Example:
        >>> OneHot([0, 0], [12, 12])(torch.tensor([[1, 2]], dtype=torch.int32)).argmax(-1)
        tensor([14])
    """

    def __init__(self, low: Sequence[int] | np.ndarray, counts: Sequence[int] | np.ndarray) -> None:
        super().__init__()
        counts_np = np.asarray(counts, dtype=np.int64).reshape(-1)
        strides = np.cumprod(np.r_[1, counts_np[::-1][:-1]])[::-1].copy()  # row-major
        self.size = int(np.prod(counts_np))
        self.register_buffer("low", torch.as_tensor(np.asarray(low, dtype=np.int64).reshape(-1)))
        self.register_buffer("strides", torch.as_tensor(strides))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        values = observation.flatten(1).to(torch.int64)
        index = ((values - self.get_buffer("low")) * self.get_buffer("strides")).sum(-1)
        return nn.functional.one_hot(index, self.size).to(torch.float32)


class ObservationMask(nn.Module):
    """Observations ``[batch, size]`` with the entries ``indices`` set to zero: the torch form of
    :func:`xdrl.envs.masking.mask_observations`, so the mask a run trained under goes inside the
    loaded and exported policy (which then takes gymnasium's raw observation) instead of staying a
    wrapper the user has to rebuild. ``masked_fill``, not a product: a NaN or inf in a hidden
    entry gives 0, as the wrapper does.

    Args:
        indices: the observation entries zeroed (``env.mask_observations``).
        size: the number of observation entries.

    Example:
        >>> ObservationMask([1, 3], 4)(torch.ones(1, 4))
        tensor([[1., 0., 1., 0.]])
    """

    def __init__(self, indices: Sequence[int], size: int) -> None:
        super().__init__()
        self.indices = tuple(sorted({int(i) for i in indices}))
        drop = torch.zeros(int(size), dtype=torch.bool)
        drop[list(self.indices)] = True
        self.register_buffer("drop", drop)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return observation.masked_fill(self.get_buffer("drop"), 0)


class DeterministicPolicy(nn.Module):
    """``forward(observation) -> action`` of a TorchRL policy, the run's stateless observation
    transforms inside.

    Args:
        actor: the TorchRL evaluation policy (reads ``observation``, writes ``action``).
        loc: observation mean subtracted (None: no normalization).
        scale: observation scale divided by after ``loc``.
        one_hot: the run's one-hot encoding (None: observations are not encoded).
        mask: the run's observation mask (None: nothing masked), applied first.
        input_dtype: the dtype the actor was trained on (float32, or uint8 for images).

    Example:
        >>> module = DeterministicPolicy(loaded.module, loc, scale)
        >>> module(torch.zeros(8, 4)).shape
        torch.Size([8])
    """

    def __init__(
        self,
        actor: Any,
        loc: torch.Tensor | None = None,
        scale: torch.Tensor | None = None,
        *,
        one_hot: OneHot | None = None,
        mask: ObservationMask | None = None,
        input_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.actor = actor
        self.mask = mask
        self.one_hot = one_hot
        self.input_dtype = input_dtype
        self.normalized = loc is not None
        if loc is not None and scale is not None:
            self.register_buffer("loc", loc.detach().clone().to(torch.float32))
            self.register_buffer("scale", scale.detach().clone().to(torch.float32))

    def normalize(self, observation: torch.Tensor) -> torch.Tensor:
        """Observations as ``env.step`` returns them -> as the actor saw them in training."""
        if self.mask is not None:
            observation = self.mask(observation)
        if self.one_hot is not None:
            observation = self.one_hot(observation)
        observation = observation.to(self.input_dtype)
        if not self.normalized:
            return observation
        loc, scale = self.get_buffer("loc"), self.get_buffer("scale")
        return (observation - loc) / scale

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        data = TensorDict(
            {"observation": self.normalize(observation)}, batch_size=observation.shape[:1]
        )
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            return self.actor(data).get("action")


class StepCell(nn.Module):
    """One step of a TorchRL ``LSTMModule`` / ``GRUModule`` on the same keys, with the same
    weights: the incoming state zeroed where ``is_init`` is set, then the cell's ``nn.LSTM`` /
    ``nn.GRU`` on a one-step sequence.

    Why: ``LSTMModule.forward`` reshapes its TensorDict by ``numel``, which ``torch.export``
    specializes to the example's batch size (measured: "batch specialized to be a constant");
    this step keeps the batch dimension dynamic. :func:`~xdrl.policy.export.export_policy`
    checks the exported file against the original module on whole episodes.

    Args:
        cell: the ``LSTMModule`` or ``GRUModule`` replaced.

    Example:
        >>> step = StepCell(lstm_module)
        >>> step(td)["next", "actor_h"].shape
        torch.Size([8, 1, 64])
    """

    def __init__(self, cell: Any) -> None:
        super().__init__()
        self.in_keys = list(cell.in_keys)
        self.out_keys = list(cell.out_keys)
        self.rnn: nn.Module = cell.lstm if hasattr(cell, "lstm") else cell.gru

    def forward(self, tensordict: Any) -> Any:
        value = tensordict.get(self.in_keys[0])
        is_init = tensordict.get("is_init").reshape(-1, 1, 1)
        states = [  # [batch, layers, hidden] -> [layers, batch, hidden], zero at episode starts
            torch.where(is_init, 0.0, tensordict.get(key)).transpose(0, 1).contiguous()
            for key in self.in_keys[1:-1]
        ]
        hidden = tuple(states) if len(states) == 2 else states[0]
        out, new = self.rnn(value.unsqueeze(1), hidden)
        tensordict.set(self.out_keys[0], out.squeeze(1))
        for key, state in zip(self.out_keys[1:], new if len(states) == 2 else (new,), strict=True):
            tensordict.set(key, state.transpose(0, 1))
        return tensordict


def with_step_cells(actor: nn.Module) -> nn.Module:
    """A copy of ``actor`` whose ``LSTMModule`` / ``GRUModule`` are :class:`StepCell`."""
    import copy

    from xdrl.algorithms.recurrent import RECURRENT_MODULES

    out = copy.deepcopy(actor)
    for module in list(out.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, RECURRENT_MODULES):
                setattr(module, child_name, StepCell(child))
    return out


class RecurrentPolicy(nn.Module):
    """``forward(observation, is_init, *states) -> (action, *next_states)``: one step of a
    recurrent TorchRL policy (deterministic), the run's stateless observation transforms inside.
    The states are zeroed where ``is_init`` (``[batch]`` bool) is set, so an episode starts
    with ``is_init=True`` whatever state is passed; feed each step's next states to the next.

    Args:
        policy: the run's :class:`DeterministicPolicy` (its actor holds the cells).
        state_keys: the hidden state entries, in the order they are passed and returned.

    Example:
        >>> step = RecurrentPolicy(loaded.deterministic_module, ["actor_h", "actor_c"])
        >>> action, h, c = step(obs, torch.ones(1, dtype=torch.bool), h0, c0)
    """

    def __init__(self, policy: DeterministicPolicy, state_keys: Sequence[str]) -> None:
        super().__init__()
        self.policy = policy
        self.state_keys = list(state_keys)

    def forward(
        self, observation: torch.Tensor, is_init: torch.Tensor, *states: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        data = TensorDict(
            {
                "observation": self.policy.normalize(observation),
                "is_init": is_init.reshape(-1, 1),
                **dict(zip(self.state_keys, states, strict=True)),
            },
            batch_size=observation.shape[:1],
        )
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            out = self.policy.actor(data)
        return (out.get("action"), *(out.get(("next", key)) for key in self.state_keys))
