"""``precision: auto | fp32 | bf16``: bfloat16 autocast for the networks where the hardware has
native bf16 arithmetic.

Why: one Nature-CNN Adam step on 256 stacked 84x84 frames took 98 ms in float32 and 56 ms under
``torch.autocast("cpu", torch.bfloat16)`` on this project's AMD EPYC (AVX-512 BF16, 2 threads,
same run: 1.74x), while a 256-wide MLP step gained ~8% (1.3 ms vs 1.2 ms). So ``auto`` picks
bf16 only for runs with an image encoder on a CPU with AVX-512 BF16 or AMX, or a CUDA GPU with
bf16 support; fp32 elsewhere. Parameters, optimizer state, losses and output heads stay float32
(:class:`~xdrl.algorithms.encoders.Head`); only the matrix products run in bf16.
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


def resolve_precision(setting: str, device: str, image_encoder: bool) -> Precision:
    """``fp32`` or ``bf16`` for the ``precision`` setting (module docstring for ``auto``)."""
    if setting == "auto":
        return "bf16" if image_encoder and device_has_bf16(device) else "fp32"
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
