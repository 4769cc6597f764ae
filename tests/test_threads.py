"""num_threads: auto picks by network width and cores; ints pass through; bad values fail."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from xdrl.threads import hidden_sizes, resolve_num_threads


@pytest.mark.parametrize(
    ("widths", "cores", "expected"),
    [
        ([64, 64], 2, 1),  # small nets: per-op overhead dominates
        ([256, 256], 1, 1),  # one core
        ([256, 256], 2, 2),  # wide nets on 2 cores
        ([256, 256], 16, 2),  # capped at the largest count measured to help
        ([64, 256], 8, 2),  # the widest layer decides
        ([], 4, 1),  # no hidden layers known
    ],
)
def test_auto_follows_the_rule(widths: list[int], cores: int, expected: int) -> None:
    assert resolve_num_threads("auto", widths, cores) == expected


def test_an_integer_passes_through() -> None:
    assert resolve_num_threads(3, [256], cores=2) == 3


def test_hidden_sizes_reads_every_cells_key() -> None:
    build = OmegaConf.create({"actor_cells": [64, 64], "critic_cells": [256, 256], "gamma": 0.99})
    assert hidden_sizes(build) == [64, 64, 256, 256]
