"""Recurrent (LSTM, GRU) actor and critic for PPO and A2C: ``algorithm.build.recurrent``.

Memory for partially observed tasks (a missing velocity, a flickering screen). Built from
TorchRL's pieces, as its ``recurrent_state_lifecycle`` page wires them: the cell is an
``LSTMModule`` / ``GRUModule`` between the observation encoder (the MLP, or the Nature CNN for
images) and the linear head; its hidden state lives in the env as ``TensorDictPrimer`` entries
(:func:`recurrent_primers`, added by ``build_trainer`` to the training and evaluation envs), so
TorchRL's ``Collector`` carries it from step to step and resets it where ``InitTracker``'s
``is_init`` marks an episode start (the cell also zeroes it there).

Training follows sb3-contrib's ``RecurrentPPO``: the state is stored at every step, minibatches
are whole env rows of the ``[envs, steps]`` batch (:class:`EnvRows`, never shuffled single
steps), and the loss runs the cell in recurrent mode (:class:`RecurrentLoss`), which cuts each
row at its episode starts and starts every piece from its stored state. A recurrent critic
runs during collection too (its state is stored the same way) and its values for GAE are
computed over whole rows in recurrent mode (:class:`RecurrentGAE`); TorchRL's vmapped GAE would
run the cell on single steps (pytorch/rl 2372, 2444).

Why TorchRL's ``Collector`` and ``ClipPPOLoss`` rather than xdrl's lean ones: the lean
collector and loss work on plain tensors of one step (``TensorSampler``); a cell needs the state
that the primer carries through the TensorDicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.envs import Compose, TensorDictPrimer
from torchrl.modules import (
    MLP,
    GRUModule,
    LSTMModule,
    ProbabilisticActor,
    TanhNormal,
    set_recurrent_mode,
)
from torchrl.modules.utils import get_primers_from_module
from torchrl.objectives.value import GAE

from xdrl.algorithms.common import is_discrete, observation_dim, orthogonal_init
from xdrl.algorithms.encoders import FEATURES, Head
from xdrl.config.types import RecurrentCell
from xdrl.lean.gae import advantages

Cell = RecurrentCell
RECURRENT_MODULES = (LSTMModule, GRUModule)


def _state_keys(prefix: str, cell: Cell) -> list[str]:
    """The hidden state entries of one cell (``<prefix>_h`` and, for an LSTM, ``<prefix>_c``)."""
    return [f"{prefix}_h", f"{prefix}_c"] if cell == "lstm" else [f"{prefix}_h"]


def recurrent_cell(cell: Cell, input_size: int, hidden: int, prefix: str, device: str):
    """TorchRL's ``LSTMModule`` / ``GRUModule`` reading ``<prefix>_embed`` and its state keys,
    writing ``<prefix>_features`` and the next state."""
    states = _state_keys(prefix, cell)
    cls = LSTMModule if cell == "lstm" else GRUModule
    return cls(
        input_size=input_size,
        hidden_size=hidden,
        in_keys=[f"{prefix}_embed", *states],
        out_keys=[f"{prefix}_features", *[("next", key) for key in states]],
        device=device,
    )


def _encoder(
    env, cells: Sequence[int], act: type[nn.Module], torso: nn.Module | None, prefix: str
) -> tuple[TensorDictModule, int]:
    """``observation -> <prefix>_embed``: the Nature CNN, an MLP with ``cells`` (activated), or
    the observation itself (no cells); returns the module and the embedding size."""
    if torso is not None:
        net: nn.Module = torso
        size = FEATURES
    elif cells:
        mlp = MLP(
            in_features=observation_dim(env),
            out_features=cells[-1],
            num_cells=list(cells[:-1]),
            activation_class=act,
            activate_last_layer=True,
        )
        net, size = orthogonal_init(mlp, 2**0.5), int(cells[-1])
    else:
        net, size = nn.Identity(), observation_dim(env)
    return TensorDictModule(net, in_keys=["observation"], out_keys=[f"{prefix}_embed"]), size


def _head(
    hidden: int,
    n_out: int,
    head_cells: Sequence[int],
    act: type[nn.Module],
    gain: float,
    device: str,
) -> nn.Module:
    """``features -> [MLP with head_cells, activated] -> linear output`` (orthogonal init, the
    output layer at ``gain``): the layers sb3-contrib's ``net_arch`` puts after its LSTM."""
    if not head_cells:
        return Head(hidden, n_out, gain=gain, device=device)
    mlp = MLP(
        in_features=hidden,
        out_features=head_cells[-1],
        num_cells=list(head_cells[:-1]),
        activation_class=act,
        activate_last_layer=True,
        device=device,
    )
    out = Head(int(head_cells[-1]), n_out, gain=gain, device=device)
    return nn.Sequential(orthogonal_init(mlp, 2**0.5), out)


def recurrent_actor(
    env,
    cells: Sequence[int],
    act: type[nn.Module],
    device: str,
    *,
    cell: Cell,
    hidden: int,
    head_cells: Sequence[int] = (),
    torso: nn.Module | None = None,
) -> ProbabilisticActor:
    """``observation -> encoder -> cell -> [head_cells MLP] -> linear head``: a categorical
    policy for discrete actions, a tanh-normal one for continuous actions (TorchRL's
    ``ProbabilisticActor``)."""
    encoder, size = _encoder(env, cells, act, torso, "actor")
    spec = env.action_spec_unbatched
    discrete = is_discrete(env)
    n_out = int(spec.space.n) if discrete else 2 * int(spec.shape[-1])
    head = _head(hidden, n_out, head_cells, act, 0.01, device)
    out_keys = ["logits"] if discrete else ["loc", "scale"]
    if not discrete:
        head = nn.Sequential(head, NormalParamExtractor())
    module = TensorDictSequential(
        encoder,
        recurrent_cell(cell, size, hidden, "actor", device),
        TensorDictModule(head, in_keys=["actor_features"], out_keys=out_keys),
    ).to(device)
    if discrete:
        return ProbabilisticActor(
            module,
            in_keys=["logits"],
            spec=env.full_action_spec_unbatched,
            distribution_class=torch.distributions.Categorical,
            return_log_prob=True,
        )
    space = spec.space
    return ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        spec=env.full_action_spec_unbatched,
        distribution_class=TanhNormal,
        distribution_kwargs={"low": space.low.to(device), "high": space.high.to(device)},
        return_log_prob=True,
    )


def recurrent_critic(
    env,
    cells: Sequence[int],
    act: type[nn.Module],
    device: str,
    *,
    cell: Cell,
    hidden: int,
    head_cells: Sequence[int] = (),
    torso: nn.Module | None = None,
) -> TensorDictSequential:
    """``observation -> encoder -> cell -> [head_cells MLP] -> state_value``: a state-value
    critic with memory."""
    encoder, size = _encoder(env, cells, act, torso, "critic")
    head = _head(hidden, 1, head_cells, act, 1.0, device)
    return TensorDictSequential(
        encoder,
        recurrent_cell(cell, size, hidden, "critic", device),
        TensorDictModule(head, in_keys=["critic_features"], out_keys=["state_value"]),
    ).to(device)


def is_recurrent(module: Any) -> bool:
    """Whether ``module`` holds an ``LSTMModule`` or ``GRUModule``."""
    return isinstance(module, nn.Module) and any(
        isinstance(m, RECURRENT_MODULES) for m in module.modules()
    )


def recurrent_primers(module: Any) -> TensorDictPrimer | Compose | None:
    """The env transforms that hold ``module``'s hidden states (zeros at every reset), or None
    for a module without a cell (TorchRL's ``get_primers_from_module``)."""
    if not is_recurrent(module):
        return None
    return get_primers_from_module(module, warn=False)


def state_keys(module: nn.Module) -> list[str]:
    """The hidden state entries that ``module``'s cells read."""
    cells = [m for m in module.modules() if isinstance(m, RECURRENT_MODULES)]
    return [key for cell in cells for key in cell.in_keys[1:] if key != "is_init"]


def zero_at_starts(tensordict: TensorDictBase, keys: Sequence[str]) -> TensorDictBase:
    """A shallow copy of ``tensordict`` whose states ``keys`` are zero where ``is_init`` is set.

    Why: in recurrent mode TorchRL's cells start each episode from the state stored at its first
    step and zero nothing; the primer stores zeros there, and this makes a batch that holds
    anything else (a hand-built one, a stale state) train as the collection ran (the step mode
    zeroes the state at ``is_init``)."""
    out = tensordict.clone(False)
    is_init = out.get("is_init")
    for key in keys:
        if key in out.keys():
            state = out.get(key)
            start = is_init.reshape(*is_init.shape[:-1], *([1] * (state.ndim - is_init.ndim + 1)))
            out.set(key, state.masked_fill(start, 0.0))
    return out


class RecurrentLoss:
    """Mixin for a TorchRL loss whose networks hold a cell: ``forward`` runs in recurrent mode
    (``set_recurrent_mode(True)``), so each ``[envs, steps]`` minibatch is read as sequences,
    cut at ``is_init`` and started from the stored states (zero at ``is_init``:
    :func:`zero_at_starts`). Diagnostics that TorchRL reduces
    over the first batch dimension only (``ESS``, ``explained_variance``: one value per time
    step of a 2-D batch) are averaged to one number, which xdrl's loggers keep.

    Example:
        >>> class RecurrentClipPPOLoss(RecurrentLoss, ClipPPOLoss): ...
    """

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        keys = state_keys(self)  # type: ignore[arg-type]
        with set_recurrent_mode(True):
            out = super().forward(zero_at_starts(tensordict, keys))  # type: ignore[misc]
        for key, value in list(out.items()):
            if value.ndim:
                out.set(key, value.float().mean())
        return out


class EnvRows:
    """Minibatches of whole env rows of a ``[envs, steps]`` batch: an epoch is one pass over a
    random permutation of the rows, ``minibatch_size // steps`` rows at a time (the whole batch,
    unpermuted, when one minibatch holds every row). Sequences keep their order in time, so the
    cell sees each row from its stored start state.

    ``extend``/``sample`` keep the ``ReplayBufferTrainer`` hook signatures; the permutations are
    drawn from torch's global generator (saved with checkpoints).

    Args:
        rows_per_minibatch: env rows in each minibatch.

    Example:
        >>> rows = EnvRows(4)
        >>> rows.extend(batch)  # batch [8, 32]
        >>> rows.sample().batch_size
        torch.Size([4, 32])
    """

    def __init__(self, rows_per_minibatch: int) -> None:
        self.rows = rows_per_minibatch
        self._batch: TensorDictBase | None = None
        self._order: torch.Tensor | None = None
        self._next = 0

    def extend(self, batch: TensorDictBase) -> TensorDictBase:
        """Keep the batch (a ``batch_process`` or ``pre_epoch`` hook); returns it unchanged."""
        self._batch = batch
        self._next = 0
        return batch

    def sample(self, _batch: Any = None) -> TensorDictBase:
        """The next ``rows`` env rows (a ``process_optim_batch`` hook)."""
        batch = self._batch
        assert batch is not None, "EnvRows.sample before extend"
        envs = int(batch.batch_size[0])
        if batch.ndim < 2 or self.rows >= envs:  # one env (a 1-D batch) or every row
            return batch
        if self._next == 0 or self._order is None:
            self._order = torch.randperm(envs)
        rows = self._order[self._next : self._next + self.rows]
        self._next = (self._next + self.rows) % envs
        return batch[rows]


def env_rows(frames_per_batch: int, num_envs: int, minibatch_size: int) -> EnvRows:
    """:class:`EnvRows` for minibatches of ``minibatch_size`` frames: that many frames' worth of
    whole env rows (at least one). A training config is checked to be whole rows dividing the
    batch before anything runs (``xdrl.config.check``); a run rebuilt for evaluation with
    another number of envs gets the nearest count."""
    return EnvRows(max(1, round(minibatch_size * num_envs / frames_per_batch)))


class RecurrentGAE:
    """GAE with a recurrent critic: values of the ``[envs, steps]`` batch in one recurrent-mode
    pass over each row (cut at ``is_init``, started from the stored critic state), and the value
    of the next observation where a row's episode ends or the row ends computed one step on from
    the state the pass left there; elsewhere the next observation's value is the next step's.

    Why not TorchRL's ``GAE`` with the critic: it evaluates the critic on the batch and on the
    ``next`` entries under vmap or as two plain calls, and neither is a sequence with the right
    states for a cell (pytorch/rl 2372, 2444).

    Args:
        critic: a :func:`recurrent_critic`.
        gae: a TorchRL ``GAE`` without value network (it reads the values written here).

    Example:
        >>> hook = RecurrentGAE(critic, GAE(gamma=0.99, lmbda=0.95, value_network=None))
        >>> batch = hook(batch)  # state_value, ("next", "state_value"), advantage, value_target
    """

    def __init__(self, critic: TensorDictSequential, gae: GAE, value_key: str = "state_value"):
        self.critic = critic
        self.gae = gae
        self.value_key = value_key
        self.state_keys = state_keys(critic)

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        root = zero_at_starts(
            batch.select("observation", "is_init", *self.state_keys), self.state_keys
        )
        with torch.no_grad():
            with set_recurrent_mode(True):
                out = self.critic(root)
            value = out.get(self.value_key)
            fresh = batch.get(("next", "done")).squeeze(-1).clone()
            fresh[..., -1] = True
            step = out.get("next").select(*self.state_keys)[fresh]
            step.set("observation", batch.get(("next", "observation"))[fresh])
            step.set("is_init", torch.zeros(*step.batch_size, 1, dtype=torch.bool))
            next_value = torch.empty_like(value)
            next_value[..., :-1, :] = value[..., 1:, :]
            next_value[fresh] = self.critic(step).get(self.value_key)
        batch.set(self.value_key, value)
        batch.set(("next", self.value_key), next_value)
        return advantages(self.gae, batch)
