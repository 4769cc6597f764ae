"""Envs for the stop tests (``tests/test_stop_lines.py``), registered on import: what
``env.id=tests.stop_envs:<EnvId>`` names."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import gymnasium

from tests.user_envs import Corridor


class WorkerResetFails(Corridor):
    """A corridor whose ``reset`` raises in a collector worker process (it resets fine in the
    run's own process, where xdrl checks the env): a worker failing before its first frame."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if multiprocessing.parent_process() is not None:
            raise RuntimeError("the simulator license server refused this worker")
        return super().reset(seed=seed, options=options)


class SlowClosingCorridor(Corridor):
    """A corridor whose ``close`` waits while the file ``hold`` exists (at most 120 s), after
    writing ``<hold>.closing``: a test sends its signal while the run closes its envs, after its
    checkpoint. Only the first instance to close waits (the others find ``<hold>.closing``)."""

    def __init__(self, length: int = 100_000, hold: str = "") -> None:
        super().__init__(length)
        self.hold = Path(hold) if hold else None

    def close(self) -> None:
        closing = self.hold.with_name(self.hold.name + ".closing") if self.hold else None
        if self.hold is not None and closing is not None and self.hold.exists():
            if not closing.exists():
                closing.touch()
                deadline = time.monotonic() + 120
                while self.hold.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
        super().close()


for name, entry in (("XdrlWorkerResetFails-v0", WorkerResetFails),
                    ("XdrlSlowClosingCorridor-v0", SlowClosingCorridor)):  # fmt: skip
    if name not in gymnasium.envs.registry:
        gymnasium.register(name, entry_point=entry, max_episode_steps=100_000)
