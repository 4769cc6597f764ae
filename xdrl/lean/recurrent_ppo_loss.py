"""LeanRecurrentPPOLoss: TorchRL's ``ClipPPOLoss`` in recurrent mode, the cells run on padded
pieces without ``PackedSequence``.

Why it exists: on ``cartpole_novel_lstm`` (8 env rows of 32 steps, LSTM 64 in actor and critic,
about 10 episode starts inside the rows of a batch) one optimizer step took 13.7 ms, 77% of
the run's time. TorchRL's ``LSTMModule`` cuts each row at its episode starts and runs
``nn.LSTM`` on a ``PackedSequence`` of the pieces: on CPU, forward and backward of the two
packed LSTMs took 12.2 ms, against 4.2 ms for the same pieces zero-padded to one length and
1.8 ms for the 8 uncut rows (``scripts/recurrent_floor.py`` and the measurement in
``docs/benchmarks.md``; 1 thread, AMD EPYC). A cell is causal, so the padding after a piece's
last step changes nothing before it; the loss reads only the real steps, so padding gives the
same values and gradients as packing.

The forward here, for a categorical actor ``encoder -> LSTMModule | GRUModule -> head`` (the
layout :func:`xdrl.algorithms.recurrent.recurrent_actor` builds) and a recurrent critic of the
same layout or a feed-forward ``ValueOperator``:

1. cut the ``[rows, steps]`` minibatch's flattened steps into pieces at ``is_init`` and at every
   row's start; each piece starts from the state stored at its first step (zero where
   ``is_init`` is set: what the collection's cell saw);
2. run each cell once on the pieces padded to the longest one, keep the real steps (in the
   batch's flattened order: pieces are contiguous and in order);
3. the heads and :class:`~xdrl.lean.ppo_loss.LeanClipPPOLoss`'s arithmetic on the flat steps
   (diagnostics deferred per batch the same way).

Where the actor and the critic read one encoder (a shared Nature CNN) it runs once. Any other
set-up (a continuous actor, options the lean loss does not cover) runs the parent's forward:
TorchRL's ``ClipPPOLoss`` in recurrent mode when the subclass puts
:class:`xdrl.algorithms.recurrent.RecurrentLoss` before it. Tested against that path on real
and hand-built batches: same losses and gradients (1e-5). The diagnostics are over the whole
minibatch, as for a flat batch (TorchRL's ``ESS`` and ``explained_variance`` of a 2-D batch
are per time step).
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.modules import GRUModule, LSTMModule, ProbabilisticActor

from xdrl.lean.categorical_actor import CategoricalActor
from xdrl.lean.ppo_loss import LeanClipPPOLoss


class Pieces(NamedTuple):
    """The pieces of a ``[rows, steps]`` minibatch between episode and row starts, as indices
    into its flattened steps."""

    starts: torch.Tensor  # [pieces] the flat index of each piece's first step
    fresh: torch.Tensor  # [pieces] whether the piece starts an episode (its state is zeroed)
    gather: torch.Tensor  # [pieces, longest] flat index of each padded step (padding: the start)
    real: torch.Tensor  # [pieces, longest] which padded steps are real

    @classmethod
    def of(cls, is_init: torch.Tensor) -> Pieces:
        """The pieces of a batch whose ``is_init`` is ``[rows, steps, 1]`` (or ``[steps, 1]``)."""
        init = is_init.reshape(-1, is_init.shape[-2])
        cut = init.clone()
        cut[:, 0] = True
        flat_cut = cut.reshape(-1)
        starts = flat_cut.nonzero().squeeze(-1)
        ends = torch.cat([starts[1:], starts.new_tensor([flat_cut.numel()])])
        lengths = ends - starts
        offsets = torch.arange(int(lengths.max()))
        real = offsets < lengths.unsqueeze(-1)
        gather = torch.where(real, starts.unsqueeze(-1) + offsets, starts.unsqueeze(-1))
        return cls(starts, init.reshape(-1)[starts], gather, real)


class _CellNet(NamedTuple):
    """``encoder -> cell -> head`` of a recurrent actor or critic, as plain modules."""

    encoder: nn.Module
    cell: nn.LSTM | nn.GRU
    state_keys: list[str]  # the stored state entries (h, and c for an LSTM)
    head: nn.Module


def _cell_net(module: Any) -> _CellNet | None:
    """The parts of a ``TensorDictSequential(encoder, LSTMModule | GRUModule, head)`` reading
    ``observation``, or None for any other module."""
    if not isinstance(module, TensorDictSequential) or len(module.module) != 3:
        return None
    encoder, cell, head = module.module
    if not (
        isinstance(encoder, TensorDictModule)
        and isinstance(head, TensorDictModule)
        and isinstance(cell, LSTMModule | GRUModule)
        and list(encoder.in_keys) == ["observation"]
        and list(encoder.out_keys) == [cell.in_keys[0]]
        and list(head.in_keys) == [cell.out_keys[0]]
    ):
        return None
    net = cell.lstm if isinstance(cell, LSTMModule) else cell.gru
    if type(net) not in (nn.LSTM, nn.GRU) or not net.batch_first or net.proj_size:
        return None  # python-based cells, projections: TorchRL's path
    keys = [key for key in cell.in_keys[1:] if key != "is_init"]
    return _CellNet(encoder.module, net, keys, head.module)


def _categorical_actor_net(actor: Any) -> _CellNet | None:
    """The cell layout of a categorical ``ProbabilisticActor`` writing ``logits``."""
    if not isinstance(actor, ProbabilisticActor) or len(actor.module) != 2:
        return None
    if actor.module[1].distribution_class is not torch.distributions.Categorical:
        return None
    net = _cell_net(actor.module[0])
    head_out = actor.module[0].module[-1].out_keys if net is not None else None
    return net if head_out == ["logits"] else None


class LeanRecurrentPPOLoss(LeanClipPPOLoss):
    """``ClipPPOLoss`` for a recurrent categorical actor (and a recurrent or feed-forward critic)
    on padded pieces: same arguments, same outputs as
    :class:`~xdrl.lean.ppo_loss.LeanClipPPOLoss`.

    Example:
        >>> class Loss(LeanRecurrentPPOLoss, RecurrentLoss, ClipPPOLoss): ...
        >>> loss = Loss(actor, critic, clip_epsilon=0.2, functional=False)
    """

    def _recurrent_lean(self) -> bool:
        """Whether the padded-pieces forward applies (decided on the first call)."""
        if "_recurrent_ok" not in self.__dict__:
            actor = _categorical_actor_net(self.actor_network)
            critic_module = self.critic_network
            critic = _cell_net(critic_module)
            feed_forward = critic is None and list(critic_module.in_keys) == ["observation"]
            ok = actor is not None and (critic is not None or feed_forward)
            ok = ok and self._plain_options()
            self.__dict__.update(_recurrent_ok=ok, _actor_net=actor, _critic_net=critic)
        return self.__dict__["_recurrent_ok"]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The clipped PPO losses of ``[rows, steps]`` env rows holding advantages, value
        targets, ``is_init`` and the cells' stored states."""
        keys = self.tensor_keys
        if (
            tensordict.get(keys.advantage, None) is None
            or tensordict.ndim not in (1, 2)
            or not self._recurrent_lean()
        ):
            return super().forward(tensordict)
        pieces = cast(
            Pieces, self._once_per_tensor("_pieces_cache", tensordict.get("is_init"), Pieces.of)
        )
        observation = tensordict.get("observation")
        flat_observation = observation.reshape(-1, *observation.shape[tensordict.ndim :])
        actor: _CellNet = self.__dict__["_actor_net"]
        critic: _CellNet | None = self.__dict__["_critic_net"]
        actor_embed = actor.encoder(flat_observation)
        logits = actor.head(_run_cell(actor, actor_embed, tensordict, pieces))
        log_prob, entropy = CategoricalActor.log_prob_entropy_of_logits(
            logits, tensordict.get(keys.action).reshape(-1), entropy=self.entropy_bonus
        )
        if critic is not None:
            shared = critic.encoder is actor.encoder
            critic_embed = actor_embed if shared else critic.encoder(flat_observation)
            value = critic.head(_run_cell(critic, critic_embed, tensordict, pieces))
        else:
            value = self.critic_network.module(flat_observation)
        return self._clipped_outputs(tensordict, log_prob, entropy, value)


def _run_cell(
    net: _CellNet, embed: torch.Tensor, tensordict: TensorDictBase, pieces: Pieces
) -> torch.Tensor:
    """The cell's outputs at every real step ``[n, hidden]``, each piece run from its stored
    state (zero at an episode start) over its padded steps."""
    states = []
    for key in net.state_keys:
        stored = tensordict.get(key)  # [*batch, layers, hidden]
        start = stored.reshape(-1, *stored.shape[-2:])[pieces.starts]
        start = start.masked_fill(pieces.fresh.view(-1, 1, 1), 0.0)
        states.append(start.transpose(0, 1).contiguous())  # [layers, pieces, hidden]
    hidden = tuple(states) if isinstance(net.cell, nn.LSTM) else states[0]
    out, _ = net.cell(embed[pieces.gather], hidden)
    return out[pieces.real]
