"""What each of xdrl's speed replacements gains, measured in one process, alternated.

Each variant builds the same run (``experiment=cartpole_ppo``, RL-Zoo's CartPole workload, 1
torch thread, no evaluation or checkpoints, CSV logging) with one of xdrl's replacements swapped
back for the TorchRL piece it replaces, then trains it; the variants run in turn, ``--reps``
times, so a machine's load affects them alike. Reported: median frames/s per variant and its
ratio to ``xdrl`` (everything on).

- ``collector``: TorchRL's ``Collector`` instead of ``xdrl.collector.VectorCollector``;
- ``loss``: TorchRL's ``ClipPPOLoss`` instead of ``LeanClipPPOLoss``;
- ``trainer``: TorchRL's ``Trainer`` instead of ``XdrlTrainer`` (per-step loss averaging);
- ``stepper``: TorchRL's gradient norm (per-parameter clipping, Python float) in the stepper;
- ``torchrl``: all four swapped back at once.

Usage: ``python scripts/bench_ablation.py --reps 3 --frames 10240`` prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from hydra import compose, initialize_config_module

VARIANTS = ["xdrl", "collector", "loss", "trainer", "stepper", "torchrl"]


@contextlib.contextmanager
def swapped(variant: str) -> Iterator[None]:
    """Swap the named replacement(s) back for TorchRL's originals while building the run."""
    from torchrl.objectives import ClipPPOLoss
    from torchrl.trainers import DefaultOptimizationStepper, Trainer

    from xdrl.algorithms.stepper import DetachedOptimizationStepper

    class TorchRLNorm(DetachedOptimizationStepper):
        _compute_and_clip_grad_norm = staticmethod(
            DefaultOptimizationStepper._compute_and_clip_grad_norm
        )

        def step(self, trainer, sub_batch):  # type: ignore[no-untyped-def]
            return DefaultOptimizationStepper.step(self, trainer, sub_batch).detach()

    patches = {
        "collector": [mock.patch("xdrl.build.fits", lambda *a, **k: False)],
        "loss": [mock.patch("xdrl.algorithms.ppo.LeanClipPPOLoss", ClipPPOLoss)],
        "trainer": [mock.patch("xdrl.build.XdrlTrainer", Trainer)],
        "stepper": [mock.patch("xdrl.build.DetachedOptimizationStepper", TorchRLNorm)],
    }
    patches["torchrl"] = [
        p for name in ("collector", "loss", "trainer", "stepper") for p in patches[name]
    ]
    with contextlib.ExitStack() as stack:
        for patch in patches.get(variant, []):
            stack.enter_context(patch)
        yield


def run_once(variant: str, seed: int, frames: int) -> float:
    """Train one variant in process; its frames/s from summary.json."""
    from xdrl.process import setup_process
    from xdrl.run import run

    run_dir = Path(tempfile.mkdtemp(prefix=f"xdrl-ablation-{variant}-"))
    overrides = [
        "experiment=cartpole_ppo",
        f"total_frames={frames}",
        f"seed={seed}",
        "eval=none",
        "checkpoint=none",
        "num_threads=1",
        f"run_dir={run_dir}",
        "exp_name=ablation",
    ]
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    setup_process(cfg)  # threads and tensordict's pandas lookup, as xdrl-train sets them
    with swapped(variant):
        run(cfg)
    return float(json.loads((run_dir / "summary.json").read_text())["frames_per_second"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--frames", type=int, default=10_240)
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    args = parser.parse_args()
    fps: dict[str, list[float]] = {v: [] for v in args.variants}
    for rep in range(args.reps):
        order = (
            args.variants[rep % len(args.variants) :] + args.variants[: rep % len(args.variants)]
        )
        for variant in order:
            fps[variant].append(run_once(variant, rep, args.frames))
            print(f"rep {rep} {variant}: {fps[variant][-1]:,.0f} frames/s", file=sys.stderr)
    base = statistics.median(fps["xdrl"]) if "xdrl" in fps else None
    print(f"`python scripts/bench_ablation.py --reps {args.reps} --frames {args.frames}`\n")
    print("| variant | frames/s (median) | vs xdrl |\n| --- | --- | --- |")
    for variant, values in fps.items():
        median = statistics.median(values)
        ratio = f"{median / base:.2f}" if base else "-"
        print(f"| {variant} | {median:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
