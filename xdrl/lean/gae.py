"""TorchRL's GAE recursion over precomputed values, in NumPy.

Why: with the values already in the batch (``GAE(value_network=None)``, as
:class:`~xdrl.algorithms.on_policy.StackedValueGAE` and ``OnePassGAE`` use it), TorchRL's
``GAE.forward`` still costs ~0.33 ms per CartPole PPO batch (8 envs x 32 steps), nearly all of it
``generalized_advantage_estimate``'s Python loop of three tensor ops per time step. The same
float32 operations on NumPy arrays (time-major, one row of envs per step) take a fraction of
that. Each operation is IEEE float32 arithmetic in TorchRL's order (``gamma * not_terminated``,
``reward + that * next_value - value``, ``lmbda * gamma * not_done``, then ``advantage[t] =
delta[t] + advantage[t + 1] * discount[t]``), so advantages and targets are bit for bit
TorchRL's (tested); any set-up this does not cover runs ``GAE.forward`` itself.
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.objectives.value import GAE


def _time_is_last(gae: GAE, batch: TensorDictBase) -> bool:
    """Whether ``gae`` would unroll time along the batch's last dimension (its default)."""
    if gae.time_dim is not None:
        return gae.time_dim % batch.ndim == batch.ndim - 1
    names = batch.names
    return "time" not in names or names.index("time") == batch.ndim - 1


def _applies(gae: GAE, batch: TensorDictBase, tensors: list[torch.Tensor]) -> bool:
    """Whether ``GAE.forward`` would run the plain recursion on these float32 CPU tensors."""
    keys = gae.tensor_keys
    return (
        type(gae) is GAE
        and gae.value_network is None
        and not gae.average_gae
        and not gae.vectorized
        and not gae.auto_reset_env
        and batch.ndim >= 1
        and _time_is_last(gae, batch)
        and keys.steps_to_next_obs not in batch.keys()
        and "shifted_valid" not in batch.keys()
        and all(t is not None and t.device.type == "cpu" for t in tensors)
        and all(t.shape == (*batch.batch_size, 1) for t in tensors)
        and all(t.dtype == torch.float32 for t in tensors[:3])
        and gae.gamma.numel() == 1
        and gae.lmbda.numel() == 1
    )


def _time_major(tensor: torch.Tensor) -> np.ndarray:
    """``[*B, T, 1]`` as a contiguous ``[T, prod(B)]`` array."""
    array = tensor.detach().numpy().reshape(-1, tensor.shape[-2])
    return np.ascontiguousarray(array.T)


def advantages(gae: GAE, batch: TensorDictBase) -> TensorDictBase:
    """``gae(batch)`` for a value-free ``GAE``: writes the advantage and the value target.

    Example:
        >>> gae = GAE(gamma=0.98, lmbda=0.8, value_network=None)
        >>> batch = advantages(gae, batch)  # batch holds state_value and ("next", "state_value")
    """
    keys = gae.tensor_keys
    done = batch.get(("next", keys.done), None)
    tensors = [
        batch.get(keys.value, None),
        batch.get(("next", keys.value), None),
        batch.get(("next", keys.reward), None),
        done,
        batch.get(("next", keys.terminated), done),
    ]
    if not _applies(gae, batch, tensors):
        return gae(batch)
    value, next_value, reward, done, terminated = (_time_major(t) for t in tensors)
    gamma = np.float32(gae.gamma.item())
    lmbda = np.float32(gae.lmbda.item())
    not_terminated = (~terminated.astype(bool)).astype(np.float32)
    not_done = (~done.astype(bool)).astype(np.float32)
    delta = reward + (gamma * not_terminated) * next_value - value
    discount = (lmbda * gamma) * not_done
    advantage = np.empty_like(delta)
    previous = np.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):
        previous = advantage[t] = delta[t] + previous * discount[t]
    target = advantage + value
    shape = tensors[0].shape
    batch.set(keys.advantage, torch.from_numpy(np.ascontiguousarray(advantage.T)).view(shape))
    batch.set(keys.value_target, torch.from_numpy(np.ascontiguousarray(target.T)).view(shape))
    return batch
