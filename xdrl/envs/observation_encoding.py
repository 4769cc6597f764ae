"""Observation encodings for small discrete state spaces (``env.observation_encoding``).

``one_hot`` turns a ``Discrete``, ``MultiDiscrete`` or bounded integer ``Box`` observation into
the one-hot vector of the joint state: one cell per combination of values (row-major, as
``numpy.ravel_multi_index``), so a linear layer on it is a table with one row per state. A
per-dimension encoding (SB3's ``MultiDiscrete`` one, gymnasium's ``flatten``) would make a
linear Q-function additive in the dimensions, which cannot represent e.g. deep-sea-treasure's
value of a (row, col) cell. A gymnasium ``ObservationWrapper``, torch-free: the vector and the
serial env paths both wrap each gymnasium env with it, so the collector and evaluation see a
plain float32 ``Box`` and nothing downstream changes.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium
import numpy as np

from xdrl.config.errors import ConfigError

ObservationEncoding = Literal["none", "one_hot"]
MAX_ONE_HOT_CELLS = 65_536  # a 64k-float observation is already 256 KiB per frame
KEY = "env.observation_encoding"


def integer_grid(space: gymnasium.Space) -> tuple[np.ndarray, np.ndarray]:
    """``(low, number of values)`` per dimension of a discrete or bounded integer space; a
    :class:`ConfigError` for any other space."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return np.array([int(space.start)]), np.array([int(space.n)])
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec, dtype=np.int64).reshape(-1)
        start = np.asarray(getattr(space, "start", np.zeros_like(nvec)), dtype=np.int64)
        return start.reshape(-1), nvec
    if (
        isinstance(space, gymnasium.spaces.Box)
        and np.issubdtype(space.dtype, np.integer)
        and space.is_bounded("both")
    ):
        low = np.asarray(space.low, dtype=np.int64).reshape(-1)
        high = np.asarray(space.high, dtype=np.int64).reshape(-1)
        return low, high - low + 1
    raise ConfigError(
        KEY,
        f"one_hot needs a Discrete, MultiDiscrete or bounded integer Box observation, got "
        f"{space}; set {KEY}=none",
    )


def one_hot_size(space: gymnasium.Space) -> int:
    """Cells of the joint one-hot vector of ``space`` (the product of its value counts); a
    :class:`ConfigError` above :data:`MAX_ONE_HOT_CELLS`."""
    _low, counts = integer_grid(space)
    log10 = float(np.log10(counts.astype(np.float64)).sum())
    if log10 > np.log10(MAX_ONE_HOT_CELLS) + 1e-9:
        cells = f"{int(np.prod(counts)):,}" if log10 < 15 else f"about 10^{int(log10)}"
        raise ConfigError(
            KEY,
            f"one_hot of {space} needs {cells} cells (the product of its "
            f"{len(counts)} dimensions' value counts), more than {MAX_ONE_HOT_CELLS:,}; "
            f"set {KEY}=none or pick a smaller state space",
        )
    return int(np.prod(counts))


class OneHotObservation(gymnasium.ObservationWrapper):
    """A discrete observation as the float32 one-hot vector of its joint state.

    Args:
        env: a gymnasium env with a ``Discrete``, ``MultiDiscrete`` or bounded integer ``Box``
            observation space of at most :data:`MAX_ONE_HOT_CELLS` joint values.

    Example:
        >>> env = OneHotObservation(gymnasium.make("FrozenLake-v1"))
        >>> env.observation_space.shape, int(env.reset(seed=0)[0].argmax())
        ((16,), 0)
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self._low, self._counts = integer_grid(env.observation_space)
        self._size = size = one_hot_size(env.observation_space)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (size,), dtype=np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        index = np.asarray(observation, dtype=np.int64).reshape(-1) - self._low
        cell = int(np.ravel_multi_index(tuple(index), tuple(self._counts)))
        out = np.zeros(self._size, dtype=np.float32)
        out[cell] = 1.0
        return out


def encode(env: gymnasium.Env, encoding: str) -> gymnasium.Env:
    """``env`` with ``encoding`` applied (``none``: unchanged)."""
    return OneHotObservation(env) if encoding == "one_hot" else env
