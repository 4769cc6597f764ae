"""``precision: auto | fp32 | bf16``: float32, or bfloat16 autocast for the networks.

Why bf16 is only opt-in: one Nature-CNN Adam step on 256 stacked 84x84 frames took 98 ms in
float32 and 56 ms under ``torch.autocast("cpu", torch.bfloat16)`` on this project's AMD EPYC
(AVX-512 BF16, 2 threads, same run: 1.74x), and the whole ``atari_ppo`` loop ran 1.52x faster
(``scripts/bench.py --mode atari``). But in a same-seed comparison on Breakout (``atari_ppo``,
seed 0, 1 thread each, side by side) fp32's training return per life rose from 0.38 to 1.41 in
250k agent steps while bf16's stayed at 0.25-0.38, with bf16 output heads and with float32 ones
(:class:`~xdrl.algorithms.encoders.Head`); Pong under bf16 had not won a point by 1M agent
steps. So ``auto`` is fp32 everywhere until a bf16 run is shown to learn as well; ``bf16`` runs
the matrix products in bf16 (slow where the hardware has no native bf16 arithmetic: the run
logs a warning), with parameters, optimizer state, losses and output heads in float32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Literal

Precision = Literal["fp32", "bf16"]
CPUINFO = Path("/proc/cpuinfo")


@cache
def cpu_has_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU flags include native bf16 arithmetic (``avx512_bf16`` or ``amx_bf16``)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def device_has_bf16(device: str) -> bool:
    """Native bf16 on ``device`` (a CUDA GPU that supports it, or the CPU's flags)."""
    import torch

    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return device == "cpu" and cpu_has_bf16()


def resolve_precision(setting: str) -> Precision:
    """``fp32`` or ``bf16`` for the ``precision`` setting: ``auto`` is fp32 (module
    docstring)."""
    return "bf16" if setting == "bf16" else "fp32"


@contextlib.contextmanager
def autocast(precision: Precision, device: str) -> Iterator[None]:
    """bf16 autocast on ``device``'s type for ``precision == "bf16"``, else nothing."""
    if precision != "bf16":
        yield
        return
    import torch

    with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
        yield
