"""``hook-overhead``: the same in-process Trainer with and without xdrl's logging hooks,
alternated; the figure is the share of frames/s the hooks cost."""

from __future__ import annotations

import shutil
import tempfile
import time
from typing import Any

from benchmarks.modes.ppo_throughput import PRESET
from benchmarks.report import check, fmt, row
from benchmarks.runner import Options, Row, median


def _hookless(trainer: Any) -> None:
    """Drop every op registered by xdrl's logging hooks (trainer_hooks.logging)."""
    for name, value in vars(trainer).items():
        if name.endswith("_ops") and isinstance(value, list):
            value[:] = [op for op in value if not _is_logging_op(op)]


def _is_logging_op(op: Any) -> bool:
    fn = op[0] if isinstance(op, tuple) else op
    fn = getattr(fn, "__wrapped__", fn)  # the Trainer wraps every hook in a timer
    owner = getattr(fn, "__self__", fn)
    return type(owner).__module__.startswith("xdrl.trainer_hooks.logging")


def _train_fps(frames: int, rep: int, hooks: bool) -> float:
    """frames/s of one in-process PPO CartPole Trainer, as xdrl-train sets up its process."""
    import torch
    from hydra import compose, initialize_config_module
    from omegaconf import open_dict

    from xdrl.config.check import check_config
    from xdrl.run.process import setup_process
    from xdrl.training.build import build_trainer

    overrides = [*PRESET, f"total_frames={frames}", "eval=none", "checkpoint=none"]
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    run_dir = tempfile.mkdtemp(prefix="xdrl-hooks-")
    with open_dict(cfg):
        cfg.run_dir, cfg.exp_name = run_dir, "bench"
    spec = check_config(cfg)
    setup_process(spec.num_threads, spec.hidden_sizes)  # threads, pandas lookup: as xdrl-train
    run = build_trainer(spec)
    if not hooks:
        _hookless(run.trainer)
    torch.manual_seed(rep)
    start = time.perf_counter()
    run.trainer.train()
    fps = frames / (time.perf_counter() - start)
    run.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    return fps


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    frames = 5_120 if options.quick else 10_240
    fps: dict[str, list[float]] = {"with_hooks": [], "without_hooks": []}
    overheads = []
    for rep in range(max(3, len(seeds))):
        order = ["with_hooks", "without_hooks"]
        order = order if rep % 2 == 0 else order[::-1]
        pair = {v: _train_fps(frames, rep, hooks=v == "with_hooks") for v in order}
        for variant, value in pair.items():
            fps[variant].append(value)
        overheads.append(1 - pair["with_hooks"] / pair["without_hooks"])
        print(f"  hook-overhead rep {rep}: {pair}", flush=True)
    return {
        "frames": frames,
        "with_hooks_fps": median(fps["with_hooks"]),
        "without_hooks_fps": median(fps["without_hooks"]),
        "overhead": median(overheads),
        "overheads": overheads,
    }


def rows(h: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    target_text, met = check(targets, "overhead", h["overhead"])
    if target_text != "reference":  # the target is a share: shown in per cent
        op, limit = target_text.split()
        target_text = f"{op} {100 * float(limit):g}%"
    return [
        row(
            "logging hook set cost, share of frames/s",
            "-",
            f"{fmt(h['with_hooks_fps'], 0)} vs {fmt(h['without_hooks_fps'], 0)} fps",
            f"{100 * h['overhead']:.1f}%",
            (target_text, met),
        )
    ]
