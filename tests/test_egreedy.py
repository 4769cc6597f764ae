"""LeanEGreedyModule's scalar epsilon schedule against TorchRL's EGreedyModule, bit for bit."""

from __future__ import annotations

import pytest
import torch
from torchrl.data import Categorical
from torchrl.modules import EGreedyModule

from xdrl.lean.egreedy import LeanEGreedyModule


@pytest.mark.parametrize(
    ("eps_init", "eps_end", "steps", "chunks"),
    [
        (1.0, 0.04, 8_000, [256]),  # cartpole_dqn
        (1.0, 0.05, 10_000, [1, 7, 1000, 256, 3]),
        (0.7, 0.013, 12_345, [500, 1]),
        (1.0, 0.1, 7, [3, 2, 1, 5]),
        (0.3, 0.3, 100, [10]),  # nothing to anneal
    ],
)
def test_same_epsilon_as_torchrl_after_every_step(eps_init, eps_end, steps, chunks) -> None:
    spec = Categorical(2)
    kwargs = {"eps_init": eps_init, "eps_end": eps_end, "annealing_num_steps": steps}
    ref, lean = EGreedyModule(spec, **kwargs), LeanEGreedyModule(spec, **kwargs)
    done, i = 0, 0
    while done < steps + 300:
        frames = chunks[i % len(chunks)]
        ref.step(frames)
        lean.step(frames)
        assert lean.eps.dtype == ref.eps.dtype == torch.float32
        assert torch.equal(lean.eps, ref.eps), (done, frames)
        done, i = done + frames, i + 1
    assert float(lean.eps) == pytest.approx(eps_end)
