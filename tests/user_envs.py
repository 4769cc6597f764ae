"""A user's own gymnasium env, registered on import (as a third-party package registers its ids):
what ``env.id=tests.user_envs:Corridor-v0`` and ``env.import_modules=[tests.user_envs]`` name."""

from __future__ import annotations

import os

import gymnasium
import numpy as np

ENV_ID = "XdrlCorridor-v0"


class Corridor(gymnasium.Env):
    """Walk right along a corridor of ``length`` cells: reward 1 at the far end, -0.01 per step.

    Observation: the position as a fraction of the length (a flat Box); actions: 0 left, 1 right.
    """

    def __init__(self, length: int = 8) -> None:
        if length < 1:
            raise ValueError(f"length must be at least 1, got {length}")
        self.length = length
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.position = 0

    def _observation(self) -> np.ndarray:
        return np.array([self.position / self.length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position = 0
        return self._observation(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        done = self.position >= self.length
        return self._observation(), 1.0 if done else -0.01, done, False, {}


class DictCorridor(Corridor):
    """The same corridor observed as a Dict space (as MiniGrid's envs are): not a flat Box."""

    def __init__(self, length: int = 8) -> None:
        super().__init__(length)
        self.observation_space = gymnasium.spaces.Dict({"position": self.observation_space})

    def _observation(self) -> dict[str, np.ndarray]:  # type: ignore[override]
        return {"position": super()._observation()}


if ENV_ID not in gymnasium.envs.registry:
    gymnasium.register(ENV_ID, entry_point=Corridor, max_episode_steps=50)
    gymnasium.register("XdrlDictCorridor-v0", entry_point=DictCorridor, max_episode_steps=50)


class SignallingCorridor(Corridor):
    """A corridor too long to finish (evaluations run to ``eval.max_steps``) whose evaluation
    instances (or training ones, ``SIGNAL_FROM``) send ``SIGNAL["signum"]`` to this process at
    their ``SIGNAL["after"]``-th step, counted over all instances of that kind.

    An instance is an evaluation env when its first reset is seeded with 10,000 or more (xdrl
    seeds evaluation envs with ``seed + 10_000``). ``STEPS`` counts every step taken in this
    process (``"train"``, ``"eval"``) and ``STEPS_AT_SIGNAL`` those counts as the signal went.
    """

    def __init__(self, length: int = 100_000) -> None:
        super().__init__(length)
        self.evaluation: bool | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self.evaluation is None and seed is not None:
            self.evaluation = seed >= 10_000
        return super().reset(seed=seed, options=options)

    def step(self, action):
        kind = "eval" if self.evaluation else "train"
        STEPS[kind] += 1
        if SIGNAL["signum"] and kind == SIGNAL_FROM[0] and STEPS[kind] == SIGNAL["after"]:
            STEPS_AT_SIGNAL.update(STEPS)
            os.kill(os.getpid(), SIGNAL["signum"])
        return super().step(action)


SIGNAL: dict[str, int] = {"signum": 0, "after": 0}  # 0: no signal
SIGNAL_FROM = ["eval"]  # which instances send it: "eval" or "train"
STEPS: dict[str, int] = {"train": 0, "eval": 0}
STEPS_AT_SIGNAL: dict[str, int] = {}

if "XdrlSignallingCorridor-v0" not in gymnasium.envs.registry:
    gymnasium.register(
        "XdrlSignallingCorridor-v0", entry_point=SignallingCorridor, max_episode_steps=100_000
    )


class MatchTargets(gymnasium.Env):
    """Name a target per dimension: a ``MultiDiscrete(nvec)`` action, an observation holding the
    one-hot of each dimension's target (drawn afresh every step), reward ``1 / len(nvec)`` per
    dimension matched; ``horizon`` steps per episode. A random policy expects
    ``horizon * mean(1 / nvec)`` per episode (:func:`random_match_return`), a perfect one
    ``horizon``."""

    def __init__(self, nvec: tuple[int, ...] = (3, 4), horizon: int = 8) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        self.horizon = horizon
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (int(self.nvec.sum()),), np.float32)
        self.action_space = gymnasium.spaces.MultiDiscrete(self.nvec)
        self.targets = np.zeros(len(self.nvec), dtype=np.int64)
        self.steps = 0

    def _observation(self) -> np.ndarray:
        self.targets = self.np_random.integers(0, self.nvec)
        out = np.zeros(int(self.nvec.sum()), dtype=np.float32)
        out[np.concatenate([[0], np.cumsum(self.nvec)[:-1]]) + self.targets] = 1.0
        return out

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.steps = 0
        return self._observation(), {}

    def step(self, action):
        matched = float(np.mean(np.asarray(action).reshape(-1) == self.targets))
        self.steps += 1
        return self._observation(), matched, False, self.steps >= self.horizon, {}


def random_match_return(nvec: tuple[int, ...] = (3, 4), horizon: int = 8) -> float:
    """A uniformly random policy's expected episode return on :class:`MatchTargets`."""
    return horizon * float(np.mean([1.0 / n for n in nvec]))


class MatchBits(MatchTargets):
    """:class:`MatchTargets` with a ``MultiBinary(n)`` action: match ``n`` target bits."""

    def __init__(self, n: int = 3, horizon: int = 8) -> None:
        super().__init__((2,) * n, horizon)
        self.action_space = gymnasium.spaces.MultiBinary(n)


class UnboundedCorridor(Corridor):
    """The corridor with a continuous ``Box(-inf, inf)`` action (move right when positive)."""

    def __init__(self, length: int = 8) -> None:
        super().__init__(length)
        self.action_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def step(self, action):
        return super().step(1 if float(np.asarray(action).reshape(-1)[0]) > 0 else 0)


class OffsetCorridor(Corridor):
    """The corridor with ``Discrete(2, start=1)`` actions: 1 left, 2 right."""

    def __init__(self, length: int = 8) -> None:
        super().__init__(length)
        self.action_space = gymnasium.spaces.Discrete(2, start=1)

    def step(self, action):
        return super().step(int(action) - 1)


class FaultyCorridor(Corridor):
    """The corridor whose ``FAULT["step"]``-th step (counted per instance from its creation)
    returns NaN in ``FAULT["key"]`` (``observation`` or ``reward``), or raises ``RuntimeError``
    when ``FAULT["key"]`` is ``raise``. Set through ``env.make_kwargs`` (``fault``,
    ``fault_step``)."""

    def __init__(self, length: int = 8, fault: str = "observation", fault_step: int = 7) -> None:
        super().__init__(length)
        self.fault, self.fault_step = fault, fault_step
        self.count = 0

    def step(self, action):
        self.count += 1
        obs, reward, terminated, truncated, info = super().step(action)
        if self.count == self.fault_step:
            if self.fault == "raise":
                raise RuntimeError(f"simulator lost contact at step {self.count}")
            if self.fault == "observation":
                obs = np.full_like(obs, np.nan)
            elif self.fault == "reward":
                reward = float("inf")
        return obs, reward, terminated, truncated, info


class ClosingCorridor(Corridor):
    """The corridor that appends a line to the file ``closed_log`` when it is closed: a test
    counts the instances a run closed."""

    def __init__(self, length: int = 8, closed_log: str = "") -> None:
        super().__init__(length)
        self.closed_log = closed_log

    def close(self) -> None:
        if self.closed_log:
            with open(self.closed_log, "a") as log:
                log.write(f"{os.getpid()}\n")
        super().close()


for _name, _entry in {
    "XdrlMatchTargets-v0": MatchTargets,
    "XdrlMatchBits-v0": MatchBits,
    "XdrlUnboundedCorridor-v0": UnboundedCorridor,
    "XdrlOffsetCorridor-v0": OffsetCorridor,
    "XdrlFaultyCorridor-v0": FaultyCorridor,
    "XdrlClosingCorridor-v0": ClosingCorridor,
}.items():
    if _name not in gymnasium.envs.registry:
        gymnasium.register(_name, entry_point=_entry, max_episode_steps=50)
