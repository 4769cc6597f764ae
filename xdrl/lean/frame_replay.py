"""FrameReplayBuffer: DQN's replay buffer for stacked frames, each frame stored once.

Why: a TorchRL ``LazyTensorStorage`` of Atari transitions keeps ``observation`` and
``("next", "observation")``, two ``[4, 84, 84]`` uint8 stacks: 56 KB per transition, 5.6 GB for
RL-Zoo's 100,000, where each frame appears eight times. This buffer stores per transition the
newest frame of its observation and of its next observation (14 KB, 1.4 GB for 100,000) and
rebuilds both stacks when sampling from the frames of the same env's earlier steps, using the
step count within the episode: before an episode's first step the stack repeats its first frame,
as gymnasium's ``FrameStackObservation`` pads (``padding_type="reset"``). The rebuilt stacks are
byte-identical to the stored ones (tested against TorchRL's buffer on the same batches).

Layout: ``rows x num_envs``, one row per collected time step of every env, written in a ring.
A transition whose history was overwritten (the oldest rows once the ring is full) is never
sampled. Sampling is uniform over the valid transitions, with replacement, like TorchRL's
``RandomSampler``. ``extend``/``sample``/``state_dict`` keep ``ReplayBufferTrainer``'s roles.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase


def stacked_frames(env: Any) -> int | None:
    """The stack size when ``env`` (a :func:`xdrl.envs.factory.make_env`-style env over
    :class:`~xdrl.envs.vector_env.VectorGymEnv`) observes gymnasium ``FrameStackObservation``
    stacks of 2-D frames (Atari's grayscale stacks), else None."""
    from gymnasium.wrappers import FrameStackObservation

    base = getattr(env, "base_env", env)
    gym_env = getattr(base, "_env", None)
    if not isinstance(gym_env, FrameStackObservation):
        return None
    if len(gym_env.env.observation_space.shape or ()) != 2:
        return None
    return int(gym_env.stack_size)


class FrameReplayBuffer:
    """Uniform replay of ``capacity`` transitions whose observations are frame stacks.

    Args:
        capacity: transitions kept (rounded down to whole rows of ``num_envs``).
        batch_size: transitions per :meth:`sample`.
        stack: frames per observation (``[stack, H, W]``).

    Example:
        >>> buffer = FrameReplayBuffer(100_000, 32, stack=4)
        >>> buffer.extend(batch)          # a collector batch [num_envs, steps]
        >>> buffer.sample()["observation"].shape
        torch.Size([32, 4, 84, 84])
    """

    def __init__(self, capacity: int, batch_size: int, stack: int) -> None:
        self.capacity = int(capacity)
        self.batch_size = int(batch_size)
        self.stack = int(stack)
        self.rows = 0
        self.cursor = 0  # next row to write
        self.filled = 0  # rows written, up to self.rows
        self.data: dict[str, torch.Tensor] = {}

    def __len__(self) -> int:
        return self.filled * (self.data["action"].shape[1] if self.data else 0)

    def nbytes(self) -> int:
        """Bytes held by the storage."""
        return sum(t.numel() * t.element_size() for t in self.data.values())

    def _allocate(self, batch: TensorDictBase) -> None:
        num_envs = batch.batch_size[0]
        self.rows = max(self.stack + 1, self.capacity // num_envs)
        frame = batch.get("observation").shape[-2:]

        def empty(*shape: int, dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros(self.rows, num_envs, *shape, dtype=dtype)

        obs_dtype = batch.get("observation").dtype
        action = batch.get("action")
        self.data = {
            "frame": empty(*frame, dtype=obs_dtype),
            "next_frame": empty(*frame, dtype=obs_dtype),
            "step_count": empty(dtype=torch.int64),
            "action": empty(*action.shape[2:], dtype=action.dtype),
            "reward": empty(1, dtype=torch.float32),
            "terminated": empty(1, dtype=torch.bool),
            "truncated": empty(1, dtype=torch.bool),
        }

    def extend(self, batch: TensorDictBase) -> TensorDictBase:
        """Write a collector batch ``[num_envs, steps]``; returns it (a ``batch_process`` hook)."""
        if not self.data:
            self._allocate(batch)
        steps = batch.batch_size[1]
        values = {
            "frame": batch.get("observation")[..., -1, :, :],
            "next_frame": batch.get(("next", "observation"))[..., -1, :, :],
            "step_count": batch.get("step_count").reshape(batch.batch_size),
            "action": batch.get("action"),
            "reward": batch.get(("next", "reward")),
            "terminated": batch.get(("next", "terminated")),
            "truncated": batch.get(("next", "truncated")),
        }
        rows = (self.cursor + torch.arange(steps)) % self.rows
        for key, value in values.items():
            self.data[key][rows] = value.transpose(0, 1).to(self.data[key].dtype)
        self.cursor = int((self.cursor + steps) % self.rows)
        self.filled = min(self.rows, self.filled + steps)
        return batch

    def _valid(self, rows: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        """Whether the frames a transition's stack needs are still stored: its earlier rows
        (up to ``stack - 1``, fewer near an episode start) are not older than the oldest row."""
        oldest = self.cursor if self.filled == self.rows else 0
        return steps.clamp(max=self.stack - 1) <= (rows - oldest) % self.rows

    def sample(self, _batch: Any = None) -> TensorDictBase:
        """``batch_size`` transitions drawn uniformly with their stacks rebuilt (a
        ``process_optim_batch`` hook)."""
        num_envs = self.data["action"].shape[1]
        chosen: list[torch.Tensor] = []
        count = 0
        while count < self.batch_size:
            flat = torch.randint(self.filled * num_envs, (2 * self.batch_size,))
            rows = (self.cursor - self.filled + flat // num_envs) % self.rows
            envs = flat % num_envs
            ok = self._valid(rows, self.data["step_count"][rows, envs])
            pick = torch.stack([rows[ok], envs[ok]], -1)
            chosen.append(pick)
            count += len(pick)
        picked = torch.cat(chosen)[: self.batch_size]
        return self._gather(picked[:, 0], picked[:, 1])

    def _gather(self, rows: torch.Tensor, envs: torch.Tensor) -> TensorDictBase:
        """The transitions at ``(rows, envs)`` with both stacks rebuilt."""
        data = self.data
        steps = data["step_count"][rows, envs]
        offsets = torch.arange(self.stack - 1, -1, -1)  # oldest frame first
        back = torch.minimum(offsets.unsqueeze(0), steps.unsqueeze(1))  # repeat the first frame
        frames = data["frame"][(rows.unsqueeze(1) - back) % self.rows, envs.unsqueeze(1)]
        next_obs = torch.cat([frames[:, 1:], data["next_frame"][rows, envs].unsqueeze(1)], 1)
        terminated = data["terminated"][rows, envs]
        truncated = data["truncated"][rows, envs]
        return TensorDict(
            {
                "observation": frames,
                "action": data["action"][rows, envs],
                "next": {
                    "observation": next_obs,
                    "reward": data["reward"][rows, envs],
                    "done": terminated | truncated,
                    "terminated": terminated,
                    "truncated": truncated,
                },
            },
            batch_size=[len(rows)],
        )

    def state_dict(self) -> dict[str, Any]:
        """The ring's position and its written rows only (``filled`` of ``rows``: until the ring
        wraps, rows ``[0, filled)``), copied: a checkpoint grows with what was collected, not
        with the capacity (a 100,000-transition buffer is ~1.4 GB full)."""
        data = self.data
        if self.filled < self.rows:
            data = {key: value[: self.filled].clone() for key, value in data.items()}
        return {
            "cursor": self.cursor,
            "filled": self.filled,
            "rows": self.rows,
            "data": dict(data),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s rows into a ring of ``rows`` rows (a state saved whole,
        as before, loads as it is)."""
        self.cursor = int(state_dict["cursor"])
        self.filled = int(state_dict["filled"])
        self.rows = int(state_dict["rows"])
        self.data = {}
        for key, value in state_dict["data"].items():
            saved = torch.as_tensor(value)
            if saved.shape[0] < self.rows:
                ring = torch.zeros(self.rows, *saved.shape[1:], dtype=saved.dtype)
                ring[: saved.shape[0]] = saved
                saved = ring
            self.data[key] = saved
