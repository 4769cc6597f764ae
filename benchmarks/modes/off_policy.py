"""The off-policy modes ``sac``, ``td3``, ``dqn`` and ``halfcheetah``: SB3 at its better thread
count, xdrl-train at its defaults and, for SAC and TD3, the plain-PyTorch floor of
``scripts/bench_loops.py``, alternated per seed. One module, one workload table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import contenders as c
from benchmarks.report import baseline_rows, check, fmt, row
from benchmarks.runner import (
    Options,
    Row,
    add_baseline,
    alternated,
    baseline_columns,
    baseline_keys,
    medians,
)

WORKLOADS: dict[str, dict[str, Any]] = {
    "sac": {
        "frames": 1_536,
        "warmup": 512,
        "sb3_threads": (1, 2),
        "overrides": ["env=pendulum", "algorithm=sac"],
        "floor": "sac-torch",
        "title": "SAC Pendulum frames/s (UTD 1, batch 256, 256x256",
        "workload": "Pendulum-v1, 1 env, UTD 1, batch 256, 256x256 nets, 512 random warm-up "
        "frames of 1,536; SB3 at its better of 1 and 2 threads, xdrl at its defaults",
    },
    "td3": {
        "frames": 1_536,
        "warmup": 512,
        "sb3_threads": (1, 2),
        "overrides": [
            "env=pendulum",
            "algorithm=td3",
            "algorithm.build.actor_cells=[400,300]",
            "algorithm.build.critic_cells=[400,300]",
        ],
        "floor": "td3-torch",
        "title": "TD3 Pendulum frames/s (UTD 1, batch 256, [400, 300]",
        "workload": "Pendulum-v1, SB3's TD3 defaults (1 env, UTD 1, batch 256, [400, 300], "
        "policy delay 2, target noise 0.2 clipped at 0.5, exploration noise 0.1), 512 random "
        "warm-up frames of 1,536; SB3 at its better of 1 and 2 threads, xdrl at its defaults",
    },
    "halfcheetah": {
        "frames": 3_072,
        "warmup": 1_024,
        "sb3_threads": (1, 2),
        "sb3_mode": "sac",
        "sb3_args": ["--sac-env-id", "HalfCheetah-v5"],
        "sb3_modules": ("mujoco", "imageio"),
        "overrides": ["env=halfcheetah", "algorithm=sac"],
        "floor": None,
        "title": "SAC HalfCheetah-v5 frames/s (UTD 1, batch 256, 256x256",
        "workload": "HalfCheetah-v5, SAC with SB3's defaults (RL-Zoo's HalfCheetah settings: 1 "
        "env, UTD 1, batch 256, 256x256), 1,024 random warm-up frames of 3,072; SB3 at its "
        "better of 1 and 2 threads, xdrl at its defaults",
    },
    "dqn": {
        "frames": 10_240,
        "warmup": 1_024,
        "sb3_threads": (1,),
        # RL-Zoo's settings: the preset's Double DQN and lower learning rate (for its final
        # policy on every seed) put back, so both sides do the same arithmetic
        "overrides": [
            "experiment=cartpole_dqn",
            "algorithm.build.double_dqn=false",
            "algorithm.optimizer.lr=2.3e-3",
        ],
        "floor": None,
        "title": "DQN CartPole frames/s (RL-Zoo settings",
        "workload": "CartPole-v1, RL-Zoo's DQN settings (lr 2.3e-3, batch 64, 128 gradient "
        "steps per 256 frames, [256, 256]; SB3 1 env trains every 256 frames, 1 thread; xdrl "
        "`experiment=cartpole_dqn` with `algorithm.build.double_dqn=false`, 8 envs x 32 steps, "
        "its defaults), 10,240 frames",
    },
}


def _overrides(mode: str, frames: int, warmup: int) -> list[str]:
    overrides = [*WORKLOADS[mode]["overrides"], f"total_frames={frames}", "eval=none"]
    if mode != "dqn":
        overrides += [
            "env.num_envs=1",
            "frames_per_batch=64",
            f"algorithm.build.init_random_frames={warmup}",
            "algorithm.build.batch_size=256",
            "algorithm.build.utd=1.0",
        ]
    return overrides


def run(mode: str, options: Options, seeds: list[int]) -> dict[str, Any]:
    """One off-policy workload (``WORKLOADS[mode]``)."""
    spec = {**WORKLOADS[mode]}
    if options.sb3_threads and len(spec["sb3_threads"]) > 1:
        spec["sb3_threads"] = options.sb3_threads
    c.check_sb3_venv(options.sb3_python, *spec.get("sb3_modules", ()))
    frames = spec["frames"] * 2 // 3 if options.quick else spec["frames"]
    warmup = spec["warmup"]
    overrides = _overrides(mode, frames, warmup)
    sb3_args = [
        *spec.get("sb3_args", []),
        "--frames",
        str(frames),
        "--learning-starts",
        str(warmup),
    ]
    rows = []
    for seed in seeds:
        runs: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.best_sb3(
                options.sb3_python, spec.get("sb3_mode", mode), s, spec["sb3_threads"], *sb3_args
            ),
            "xdrl": lambda s=seed: c.xdrl(overrides, s),
        }
        add_baseline(runs, options, overrides, seed)
        if spec["floor"]:  # the floor, like SB3, at its better thread count
            runs["torch_loop"] = lambda s=seed: _floor(spec, s, frames, warmup)
        rows.append(_row(seed, alternated(runs, seed, options.reps)))
        print(f"  {mode} seed {seed}: {rows[-1]}", flush=True)
    return {
        "frames": frames,
        "warmup_frames": warmup,
        "runs": rows,
        **medians(rows, "xdrl_vs_torch_loop", *baseline_keys(rows)),
        "workload": spec["workload"],
        "sb3_threads": list(spec["sb3_threads"]),
    }


def _floor(spec: dict[str, Any], seed: int, frames: int, warmup: int) -> float:
    """The floor's frames/s at the best of SB3's thread counts."""
    args = ("--warmup", str(warmup), "--threads")
    return max(c.loop(spec["floor"], seed, frames, *args, str(n)) for n in spec["sb3_threads"])


def _row(seed: int, out: dict[str, Any]) -> dict[str, Any]:
    summary = out["xdrl"]
    fps = summary["frames_per_second"]
    sb = out["sb3"]["best"]
    floor = out.get("torch_loop")
    row_ = {
        "seed": seed,
        "sb3_fps": sb,
        **{f"sb3_fps_{k}": v for k, v in out["sb3"].items() if k != "best"},
        "xdrl_fps": fps,
        "xdrl_threads": summary["segments"][-1].get("torch_threads"),  # what auto picked
        "torch_loop_fps": floor,
        "ratio": fps / sb,
        "torch_loop_ratio": floor / sb if floor is not None else None,
        "xdrl_vs_torch_loop": fps / floor if floor is not None else None,
    }
    row_.update(baseline_columns(out, sb))
    return row_


def rows(mode: str, o: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    threads = "/".join(str(n) for n in o.get("sb3_threads", [1, 2]))
    title = f"{WORKLOADS[mode]['title']}; SB3 at its best of {threads} thread(s), xdrl at its "
    name = mode.upper()
    out = [
        row(
            title + "defaults)",
            fmt(o["sb3_fps"], 0),
            fmt(o["xdrl_fps"], 0),
            fmt(o["ratio"]),
            check(targets, "ratio", o["ratio"]),
        ),
        *baseline_rows(name, o),
    ]
    if o.get("torch_loop_fps") is None:
        return out
    return [
        *out,
        row(
            f"same {name} workload, lean plain-PyTorch + gymnasium loop (the floor) "
            "frames/s, ratio floor/SB3",
            fmt(o["sb3_fps"], 0),
            fmt(o["torch_loop_fps"], 0),
            fmt(o.get("torch_loop_ratio")),
            check(targets, "torch_loop_ratio", o.get("torch_loop_ratio")),
        ),
        row(
            f"xdrl vs the {name} floor (ratio xdrl/floor)",
            "-",
            f"{fmt(o['xdrl_fps'], 0)} vs {fmt(o['torch_loop_fps'], 0)}",
            fmt(o.get("xdrl_vs_torch_loop")),
            check(targets, "xdrl_vs_torch_loop", o.get("xdrl_vs_torch_loop")),
        ),
    ]
