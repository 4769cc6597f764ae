"""What each of xdrl's speed replacements gains, measured in one process, alternated.

Each variant builds the same run (``experiment=cartpole_ppo``, RL-Zoo's CartPole workload, 1
torch thread, no evaluation or checkpoints, CSV logging) with one of xdrl's replacements swapped
back for the TorchRL piece it replaces, then trains it; the variants run in turn, ``--reps``
times, so a machine's load affects them alike. Reported: median frames/s per variant and its
ratio to ``xdrl`` (everything on).

- ``collector``: TorchRL's ``Collector`` instead of ``xdrl.lean.collector.VectorCollector``;
- ``loss``: TorchRL's ``ClipPPOLoss`` instead of ``LeanClipPPOLoss``;
- ``trainer``: TorchRL's ``optim_steps`` (per-step loss averaging) instead of ``XdrlTrainer``'s
  (``ScheduledSaveTrainer``, what ``lean=false`` trains with);
- ``stepper``: TorchRL's gradient norm (per-parameter clipping, Python float) in the stepper;
- ``optimizer``: ``optimizer.step()`` and ``zero_grad()`` instead of ``FusedAdamStep`` (this one
  also in the off-policy workloads);
- ``torchrl``: the run's ``lean=false``: every piece above (and GAE and the minibatch buffer)
  is TorchRL's, as a user gets it; no patching.

``--workload sac|td3|dqn`` runs an off-policy workload instead (the SAC/TD3 ones
of ``benchmarks/modes/off_policy.py``: Pendulum, 1 env, UTD 1, batch 256, a quarter of the
frames random; DQN: ``experiment=cartpole_dqn``) with these variants:

- ``loss``: TorchRL's ``SACLoss``/``TD3Loss``/``DQNLoss`` instead of xdrl's lean subclasses;
- ``replay``: TorchRL's ``TensorDictReplayBuffer`` instead of ``LeanReplayBuffer``;
- ``target``: TorchRL's ``SoftUpdate``/``HardUpdate`` instead of the lean updaters;
- ``policy`` (DQN): TorchRL's ``TensorDictSequential(QValueActor, EGreedyModule)`` instead of
  ``EpsilonGreedyQPolicy`` and ``LeanEGreedyModule``;
- ``torchrl``: ``lean=false`` (all of the above, the collector, the optimizer step and, for
  DQN and TD3, the exploration policy).

``--workload atari`` runs ``experiment=atari_ppo`` on Breakout (``--threads 2`` for the bench's
setting) with these variants:

- ``gae``: TorchRL's ``GAE`` (critic on ``observation`` and ``("next", "observation")``) instead
  of ``OnePassGAE``;
- ``loss``: TorchRL's ``ClipPPOLoss`` (the shared torso runs once per head);
- ``s2d``: the first convolution of a training pass as ``nn.Conv2d`` computes it instead of
  ``space_to_depth_conv``;
- ``chunks``: ``OnePassGAE``'s critic over the whole batch in one pass instead of 256 rows at a
  time;
- ``gather``: TorchRL's ``TensorDictReplayBuffer`` draws the minibatches instead of
  ``LeanReplayBuffer``;
- ``torchrl``: ``lean=false`` (``gae``, ``loss`` and ``gather``, TorchRL's collector, trainer
  loop and optimizer step; ``s2d`` stays: it is the Nature CNN's own).

The per-piece variants patch one module path each while the run is built (a ``lean`` switch
per piece would be a config key per piece); ``torchrl`` is the run's own switch.

``--piece tanh_normal_actor|td3_actor|td3_loss`` times one lean piece against TorchRL's
original in this process instead (alternated rounds, median microseconds per call), the
figures in those modules' docstrings.

Usage: ``python scripts/bench_ablation.py --reps 3 --frames 10240`` prints a Markdown table;
``python scripts/bench_ablation.py --workload sac --reps 3 --frames 1024`` the SAC one;
``python scripts/bench_ablation.py --workload atari --threads 2 --reps 3 --frames 16384`` the
Atari one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from hydra import compose, initialize_config_module

VARIANTS = ["xdrl", "collector", "loss", "trainer", "stepper", "optimizer", "torchrl"]
OFF_POLICY_VARIANTS = ["xdrl", "loss", "replay", "target", "optimizer", "policy", "torchrl"]
ATARI_VARIANTS = ["xdrl", "gae", "loss", "s2d", "chunks", "gather", "torchrl"]
WORKLOADS = {
    "ppo": ["experiment=cartpole_ppo"],
    "sac": ["env=pendulum", "algorithm=sac"],
    "td3": [
        "env=pendulum",
        "algorithm=td3",
        "algorithm.build.actor_cells=[400,300]",
        "algorithm.build.critic_cells=[400,300]",
    ],
    "dqn": ["experiment=cartpole_dqn"],
    "atari": ["experiment=atari_ppo", "env.id=ALE/Breakout-v5"],
}


class TorchOptimizerStep:
    """``FusedAdamStep``'s interface on the optimizer's own ``step`` and ``zero_grad``."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer

    def __call__(self) -> None:
        self.optimizer.step()

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)


def optimizer_patch() -> Any:
    return mock.patch("xdrl.algorithms.stepper.FusedAdamStep", TorchOptimizerStep)


@contextlib.contextmanager
def swapped_atari(variant: str) -> Iterator[None]:
    """Swap the Atari PPO pieces back for what they replaced while building the run."""
    from torchrl.data import TensorDictReplayBuffer
    from torchrl.objectives import ClipPPOLoss

    from xdrl.algorithms import encoders
    from xdrl.algorithms.on_policy import OnePassGAE

    def direct(conv: Any, x: Any) -> Any:
        return conv(encoders.scaled_pixels(x))

    patches = {
        "gae": [mock.patch("xdrl.algorithms.on_policy.has_image_encoder", lambda *a: False)],
        "loss": [mock.patch("xdrl.algorithms.ppo.LeanClipPPOLoss", ClipPPOLoss)],
        "s2d": [mock.patch.object(encoders, "space_to_depth_conv", direct)],
        "chunks": [mock.patch.object(OnePassGAE, "chunk", 1 << 30)],
        "gather": [
            mock.patch("xdrl.algorithms.on_policy.LeanReplayBuffer", TensorDictReplayBuffer)
        ],
    }
    with contextlib.ExitStack() as stack:
        for patch in patches.get(variant, []):
            stack.enter_context(patch)
        yield


@contextlib.contextmanager
def swapped_off_policy(variant: str) -> Iterator[None]:
    """Swap xdrl's lean off-policy pieces back for TorchRL's originals while building the run."""
    from tensordict.nn import TensorDictSequential
    from torchrl.data import TensorDictReplayBuffer
    from torchrl.modules import EGreedyModule
    from torchrl.objectives import DQNLoss, HardUpdate, SACLoss, SoftUpdate, TD3Loss

    patches = {
        "loss": [
            mock.patch("xdrl.algorithms.sac.LeanSACLoss", SACLoss),
            mock.patch("xdrl.algorithms.td3.LeanTD3Loss", TD3Loss),
            mock.patch("xdrl.algorithms.dqn.LeanDQNLoss", DQNLoss),
        ],
        "replay": [
            mock.patch("xdrl.algorithms.off_policy.LeanReplayBuffer", TensorDictReplayBuffer)
        ],
        "target": [
            mock.patch("xdrl.algorithms.off_policy.LeanSoftUpdate", SoftUpdate),
            mock.patch("xdrl.algorithms.off_policy.LeanHardUpdate", HardUpdate),
        ],
        "optimizer": [optimizer_patch()],
        "policy": [
            mock.patch("xdrl.algorithms.dqn.EpsilonGreedyQPolicy", TensorDictSequential),
            mock.patch("xdrl.algorithms.dqn.LeanEGreedyModule", EGreedyModule),
        ],
    }
    with contextlib.ExitStack() as stack:
        for patch in patches.get(variant, []):
            stack.enter_context(patch)
        yield


@contextlib.contextmanager
def swapped(variant: str) -> Iterator[None]:
    """Swap the named replacement(s) back for TorchRL's originals while building the run."""
    from torchrl.objectives import ClipPPOLoss
    from torchrl.trainers import DefaultOptimizationStepper

    from xdrl.algorithms.stepper import DetachedOptimizationStepper
    from xdrl.lean.trainer import ScheduledSaveTrainer

    class TorchRLNorm(DetachedOptimizationStepper):
        _compute_and_clip_grad_norm = staticmethod(
            DefaultOptimizationStepper._compute_and_clip_grad_norm
        )

        def step(self, trainer, sub_batch):  # type: ignore[no-untyped-def]
            return DefaultOptimizationStepper.step(self, trainer, sub_batch).detach()

    patches = {
        "collector": [mock.patch("xdrl.training.build.fits", lambda *a, **k: False)],
        "loss": [mock.patch("xdrl.algorithms.ppo.LeanClipPPOLoss", ClipPPOLoss)],
        "trainer": [mock.patch("xdrl.training.build.XdrlTrainer", ScheduledSaveTrainer)],
        "stepper": [mock.patch("xdrl.training.build.DetachedOptimizationStepper", TorchRLNorm)],
        "optimizer": [optimizer_patch()],
    }
    with contextlib.ExitStack() as stack:
        for patch in patches.get(variant, []):
            stack.enter_context(patch)
        yield


def run_once(
    variant: str, seed: int, frames: int, workload: str = "ppo", threads: int = 1
) -> float:
    """Train one variant in process; its frames/s from summary.json."""
    from xdrl.config.check import check_config
    from xdrl.run.lifecycle import run
    from xdrl.run.process import setup_process

    run_dir = Path(tempfile.mkdtemp(prefix=f"xdrl-ablation-{variant}-"))
    extra = []
    if workload in ("sac", "td3"):
        extra = [
            "env.num_envs=1",
            "frames_per_batch=64",
            f"algorithm.build.init_random_frames={frames // 4 // 64 * 64}",
            "algorithm.build.batch_size=256",
            "algorithm.build.utd=1.0",
        ]
    overrides = [
        *WORKLOADS[workload],
        *extra,
        f"total_frames={frames}",
        f"seed={seed}",
        "eval=none",
        "checkpoint=none",
        f"num_threads={threads}",
        f"run_dir={run_dir}",
        "exp_name=ablation",
        *(["lean=false"] if variant == "torchrl" else []),
    ]
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    spec = check_config(cfg)
    setup_process(spec.num_threads, spec.hidden_sizes)  # threads, pandas lookup: as xdrl-train
    swap = {"ppo": swapped, "atari": swapped_atari}.get(workload, swapped_off_policy)
    with swap(variant):
        run(cfg)
    return float(json.loads((run_dir / "summary.json").read_text())["frames_per_second"])


PIECES = ("tanh_normal_actor", "td3_actor", "td3_loss")


def piece_calls(piece: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``(xdrl's call, TorchRL's original call)`` of one lean piece on the ``sac``/``td3``
    workloads' inputs: one Pendulum observation for the actors (what the collector passes per
    frame with one env), a batch of 256 transitions for the TD3 loss (a critic and an actor loss,
    forward and backward, as ``DelayedActorStepper`` takes them on an actor step)."""
    import torch
    from tensordict import TensorDict
    from tensordict.nn import TensorDictSequential
    from torchrl.objectives import TD3Loss

    from xdrl.algorithms import sac, td3
    from xdrl.envs.factory import make_env

    torch.manual_seed(0)
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    observation = torch.randn(1, 3)
    if piece == "tanh_normal_actor":
        actor = sac.build(env, frames_per_batch=64).policy
        return (
            lambda: actor.act(observation, True),
            lambda: actor(TensorDict(observation=observation, batch_size=[1])),
        )
    parts = td3.build(env, frames_per_batch=64, actor_cells=(400, 300), critic_cells=(400, 300))
    if piece == "td3_actor":
        policy = parts.policy
        original = TensorDictSequential(*policy.module)
        return (
            lambda: policy.act(observation, True),
            lambda: original(TensorDict(observation=observation, batch_size=[1])),
        )
    lean = parts.loss_module
    reference = TD3Loss(
        lean.actor_network,
        lean.qvalue_network,
        action_spec=env.full_action_spec_unbatched["action"],
        num_qvalue_nets=2,
        policy_noise=lean.policy_noise,
        noise_clip=lean.noise_clip,
        delay_actor=True,
        delay_qvalue=True,
        deactivate_vmap=True,
    )
    reference.make_value_estimator(gamma=0.99)
    reference.load_state_dict(lean.state_dict())
    n = 256
    batch = TensorDict(
        observation=torch.randn(n, 3),
        action=4 * torch.rand(n, 1) - 2,
        next=TensorDict(
            observation=torch.randn(n, 3),
            reward=torch.randn(n, 1),
            done=torch.zeros(n, 1, dtype=torch.bool),
            terminated=torch.zeros(n, 1, dtype=torch.bool),
            truncated=torch.zeros(n, 1, dtype=torch.bool),
            batch_size=[n],
        ),
        batch_size=[n],
    )

    def lean_step() -> None:
        (lean.value_loss(batch)[0] + lean.actor_only_loss(batch)).backward()
        lean.zero_grad(set_to_none=True)

    def torchrl_step() -> None:
        (reference.value_loss(batch)[0] + reference.actor_loss(batch)[0]).backward()
        reference.zero_grad(set_to_none=True)

    return lean_step, torchrl_step


def time_piece(piece: str, reps: int, calls: int) -> tuple[list[float], list[float]]:
    """Microseconds per call of xdrl's piece and TorchRL's original, ``reps`` rounds of
    ``calls`` calls each, the two alternated (who goes first swaps every round)."""
    import time

    import torch
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    calls_of = piece_calls(piece)
    times: tuple[list[float], list[float]] = ([], [])
    with set_exploration_type(ExplorationType.RANDOM), torch.inference_mode(piece != "td3_loss"):
        for call in calls_of:  # warm-up
            for _ in range(10):
                call()
        for rep in range(reps):
            for which in (0, 1) if rep % 2 == 0 else (1, 0):
                start = time.perf_counter()
                for _ in range(calls):
                    calls_of[which]()
                times[which].append((time.perf_counter() - start) / calls * 1e6)
    return times


def report_piece(piece: str, reps: int, calls: int, threads: int) -> None:
    """Print the medians of :func:`time_piece` and their ratio."""
    import torch

    torch.set_num_threads(threads)
    lean, original = time_piece(piece, reps, calls)
    a, b = statistics.median(lean), statistics.median(original)
    print(
        f"`python scripts/bench_ablation.py --piece {piece} --reps {reps} --calls {calls} "
        f"--threads {threads}`: xdrl {a:,.0f} us, TorchRL {b:,.0f} us per call "
        f"(medians of {reps}; {b / a:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--frames", type=int, default=10_240)
    parser.add_argument("--workload", choices=list(WORKLOADS), default="ppo")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every run")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        choices=sorted({*VARIANTS, *OFF_POLICY_VARIANTS, *ATARI_VARIANTS}),
    )
    parser.add_argument("--piece", choices=PIECES, help="time one lean piece against TorchRL's")
    parser.add_argument("--calls", type=int, default=2_000, help="calls per round (--piece)")
    args = parser.parse_args()
    if args.piece is not None:
        report_piece(args.piece, args.reps, args.calls, args.threads)
        return
    known = {"ppo": VARIANTS, "atari": ATARI_VARIANTS}.get(args.workload, OFF_POLICY_VARIANTS)
    if args.variants is None:
        args.variants = known
    elif unknown := [v for v in args.variants if v not in known]:
        parser.error(f"--workload {args.workload} has no variant(s) {unknown}; choose from {known}")
    fps: dict[str, list[float]] = {v: [] for v in args.variants}
    for rep in range(args.reps):
        order = (
            args.variants[rep % len(args.variants) :] + args.variants[: rep % len(args.variants)]
        )
        for variant in order:
            fps[variant].append(run_once(variant, rep, args.frames, args.workload, args.threads))
            print(f"rep {rep} {variant}: {fps[variant][-1]:,.0f} frames/s", file=sys.stderr)
    base = statistics.median(fps["xdrl"]) if "xdrl" in fps else None
    print(
        f"`python scripts/bench_ablation.py --workload {args.workload} --reps {args.reps} "
        f"--frames {args.frames} --threads {args.threads}`\n"
    )
    print("| variant | frames/s (median) | vs xdrl |\n| --- | --- | --- |")
    for variant, values in fps.items():
        median = statistics.median(values)
        ratio = f"{median / base:.2f}" if base else "-"
        print(f"| {variant} | {median:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
