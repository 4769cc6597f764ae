"""``num_threads: auto``: pick torch's intra-op thread count from the network widths and cores.

Rule: 1 thread when the widest hidden layer is under 128 units or the machine has one core;
otherwise ``min(cores, 2)``. Small MLPs spend their time in per-op overhead that more threads
only add to; 256-wide layers on batches of 256 have enough work per matmul to split.

Measured on the 2-core machine (November 2026, quiet, A/B alternated):
- 256x256 SAC (Pendulum, SB3 defaults): SB3 and a plain PyTorch loop run 1.3x faster with 2
  threads than 1 (146-155 vs 196-198 frames/s); 1 thread wins when another process keeps the
  second core busy.
- 64x64 PPO (CartPole, RL-Zoo settings): 1 thread is fastest.
Only two cores were available to measure, so the cap at 2 is what was seen, not a bound proven
for larger machines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

WIDE = 128  # hidden width from which a second thread pays off (256 does, 64 does not)
MAX_AUTO_THREADS = 2  # the most threads `auto` picks: the largest count measured to help


def resolve_num_threads(value: int | str, hidden_sizes: Iterable[int], cores: int) -> int:
    """The intra-op thread count for a config value (a positive int or ``"auto"``).

    Example:
        >>> resolve_num_threads("auto", [256, 256], cores=2)
        2
    """
    if value == "auto":
        widest = max(hidden_sizes, default=0)
        if widest < WIDE or cores <= 1:
            return 1
        return min(cores, MAX_AUTO_THREADS)
    return int(value)  # a positive int (xdrl.config_check checked it)


def hidden_sizes(build_cfg) -> list[int]:
    """Every hidden layer size in an algorithm's build config (its ``*_cells`` keys)."""
    cells = [v for k, v in build_cfg.items() if str(k).endswith("_cells")]
    return [int(n) for layers in cells for n in layers]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
