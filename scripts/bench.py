"""Benchmark xdrl-train against Stable-Baselines3 on the same workloads, side by side.

SB3 runs in its own venv (``.bench-venv/``, created on first use with
``pip install -c constraints-cpu.txt stable-baselines3``; nothing is installed into the
project's venv) through ``scripts/bench_sb3.py``; xdrl runs as ``.venv/bin/xdrl-train``
subprocesses (``summary.json``, CSV ``timers/*``) and, for the hook-overhead and evaluation
modes, in this process. For every seed the two frameworks run one after the other, so machine
load hits both alike (the order rotates with the seed); the ratios are the figures to read.

Modes: ``atari`` (RL-Zoo's Atari PPO on Breakout: xdrl's ``atari_ppo`` at its default precision
(fp32) and at bf16 against SB3's ``CnnPolicy``, 2 threads each; installs ale-py and OpenCV into
.bench-venv),
``ppo-throughput`` (RL-Zoo's CartPole PPO workload: SB3, xdrl, the bare TorchRL tutorial
loop and the lean plain-PyTorch floor of ``scripts/bench_loops.py``), ``scale`` (the same PPO
at 8, 32 and 128 envs, 32 steps each, whole-batch steps: SB3, xdrl, the floor; ~5 min with one
seed), ``time-to-475`` (the whole ``xdrl-train experiment=cartpole_ppo`` command against SB3
from process start to its first eval >= 475), ``eval``, ``hook-overhead``, ``startup``, and the
off-policy workloads ``sac``, ``td3``, ``dqn`` (SB3 at its better thread count, xdrl at its
defaults; SAC and TD3 also against the lean plain-PyTorch floors of ``scripts/bench_loops.py``).

Usage:
    python scripts/bench.py --mode all --seeds 3      # ~30 min on 2 quiet cores
    python scripts/bench.py --mode ppo-throughput --quick
    python scripts/bench.py --mode sac,td3,dqn,ppo-throughput --seeds 3
Writes ``bench-results/bench.json`` and ``bench-results/bench.md``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_VENV = ROOT / ".bench-venv"
BENCH_PY = BENCH_VENV / "bin" / "python"
XDRL_TRAIN = ROOT / ".venv" / "bin" / "xdrl-train"
SB3_DRIVER = ROOT / "scripts" / "bench_sb3.py"
LOOPS_DRIVER = ROOT / "scripts" / "bench_loops.py"
MODES = [
    "ppo-throughput",
    "scale",
    "time-to-475",
    "eval",
    "hook-overhead",
    "sac",
    "td3",
    "dqn",
    "halfcheetah",
    "startup",
    "atari",
]
EVAL_KEY = "eval/deterministic/reward/episode_reward_mean"


# Environment set-up
# extras some modes need in .bench-venv: (modules to import, pip packages that provide them)
ATARI_EXTRA = ("ale_py, cv2", ["ale-py", "opencv-python-headless"])  # SB3's AtariWrapper: cv2
MUJOCO_EXTRA = ("mujoco, imageio, packaging", ["mujoco", "imageio", "packaging"])  # gymnasium's


def ensure_in_bench_venv(extra: tuple[str, list[str]]) -> None:
    """Install ``extra``'s packages into .bench-venv unless its modules already import."""
    modules, packages = extra
    if _run([str(BENCH_PY), "-c", f"import {modules}"]).returncode == 0:
        return
    constraints = str(ROOT / "constraints-cpu.txt")
    pip = [str(BENCH_PY), "-m", "pip", "install", "--quiet", "-c", constraints]
    subprocess.run([*pip, *packages], check=True)


def ensure_bench_venv() -> None:
    """Create .bench-venv with stable-baselines3 (CPU torch from constraints-cpu.txt)."""
    probe = [str(BENCH_PY), "-c", "import stable_baselines3"]
    if BENCH_PY.exists() and _run(probe).returncode == 0:
        return
    print("creating .bench-venv (stable-baselines3, CPU torch)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    subprocess.run(
        [
            str(BENCH_PY),
            "-m",
            "pip",
            "install",
            "--quiet",
            "-c",
            str(ROOT / "constraints-cpu.txt"),
            "stable-baselines3",
        ],
        check=True,
    )


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kwargs)


def _timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``cmd`` under /usr/bin/time; returns the process and its peak RSS in MB."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        wrapped = (
            ["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd] if shutil.which("time") else cmd
        )
        proc = _run(wrapped)
        text = Path(rss.name).read_text().strip().splitlines()
    peak = float(text[-1]) / 1024 if text and text[-1].isdigit() else float("nan")
    return proc, peak


def sb3(mode: str, seed: int, *args: str) -> dict[str, Any]:
    proc = _run([str(BENCH_PY), str(SB3_DRIVER), mode, "--seed", str(seed), *args])
    if proc.returncode:
        raise RuntimeError(f"SB3 {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loop(name: str, seed: int, frames: int, *args: str) -> float:
    """frames/s of a reference loop (``scripts/bench_loops.py``) in the project's venv."""
    python = str(XDRL_TRAIN.with_name("python"))
    cmd = [python, str(LOOPS_DRIVER), name, "--seed", str(seed), "--frames", str(frames), *args]
    proc = _run(cmd)
    if proc.returncode:
        raise RuntimeError(f"{name} loop failed:\n{proc.stderr[-3000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["frames_per_second"])


BASELINE: dict[str, Path] = {}  # --baseline: another checkout's xdrl-train, run alongside
BASELINE_OVERRIDES: list[str] = []  # --baseline-overrides: extra overrides for the baseline
THREADS: dict[str, tuple[int, ...]] = {}  # --threads: overrides the thread counts SB3 tries
REPS: list[int] = [1]  # --reps: rounds of every contender per seed (medians)


def xdrl(
    overrides: list[str], seed: int, checkpoint: bool = False, executable: Path = XDRL_TRAIN
) -> dict[str, Any]:
    """One xdrl-train run; summary.json plus the CSV scalars and the peak RSS.

    ``checkpoint=False`` adds ``checkpoint=none``; True keeps the preset's own checkpointing.
    """
    run_dir = Path(tempfile.mkdtemp(prefix="xdrl-bench-"))
    cmd = [
        str(executable),
        f"seed={seed}",
        *([] if checkpoint else ["checkpoint=none"]),
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    proc, peak = _timed(cmd)
    summary_path = run_dir / "summary.json"
    if proc.returncode or not summary_path.exists():
        raise RuntimeError(f"xdrl-train {' '.join(overrides)} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads(summary_path.read_text())
    summary["scalars"] = _scalars(run_dir)
    summary["peak_rss_mb"] = peak
    shutil.rmtree(run_dir, ignore_errors=True)
    return summary


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for path in run_dir.glob("logs/*/scalars/**/*.csv"):
        name = str(path.relative_to(next(run_dir.glob("logs/*/scalars")))).removesuffix(".csv")
        with path.open() as f:
            out[name] = [(int(float(r[0])), float(r[1])) for r in csv.reader(f) if r]
    return out


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _medians(rows: list[dict[str, Any]], *extra: str) -> dict[str, float | None]:
    """Per-seed medians of the fps and ratio columns every throughput mode reports."""
    keys = ("sb3_fps", "xdrl_fps", "torch_loop_fps", "ratio", "torch_loop_ratio", *extra)
    return {key: _median([r[key] for r in rows]) for key in keys}


# Modes
PPO_PRESET = ["experiment=cartpole_ppo"]


def ppo_throughput(seeds: list[int], quick: bool) -> dict[str, Any]:
    frames = 5_120 if quick else 10_240
    rows = []
    for seed in seeds:
        fps = _alternated(
            {
                "sb3": lambda s=seed: sb3("ppo-throughput", s, "--frames", str(frames))[
                    "frames_per_second"
                ],
                "xdrl": lambda s=seed: xdrl(
                    [*PPO_PRESET, f"total_frames={frames}", "eval=none"], s
                )["frames_per_second"],
                "xdrl_serial": lambda s=seed: xdrl(
                    [*PPO_PRESET, f"total_frames={frames}", "eval=none", "env.batching=serial"], s
                )["frames_per_second"],
                "torchrl_loop": lambda s=seed: loop("torchrl", s, frames),
                "torch_loop": lambda s=seed: loop("torch", s, frames),
                **(
                    {
                        "baseline": lambda s=seed: xdrl(
                            [
                                *PPO_PRESET,
                                f"total_frames={frames}",
                                "eval=none",
                                *BASELINE_OVERRIDES,
                            ],
                            s,
                            executable=BASELINE["xdrl"],
                        )["frames_per_second"]
                    }
                    if "xdrl" in BASELINE
                    else {}
                ),
            },
            seed,
        )
        rows.append(
            {
                "seed": seed,
                **{f"{name}_fps": value for name, value in fps.items()},
                "torchrl_loop_ratio": fps["torchrl_loop"] / fps["sb3"],
                "torch_loop_ratio": fps["torch_loop"] / fps["sb3"],
                "ratio": fps["xdrl"] / fps["sb3"],
                "xdrl_vs_torch_loop": fps["xdrl"] / fps["torch_loop"],
            }
        )
        if "baseline" in fps:
            rows[-1]["baseline_ratio"] = fps["baseline"] / fps["sb3"]
        print(f"  ppo-throughput seed {seed}: {rows[-1]}", flush=True)
    return {
        "frames": frames,
        "runs": rows,
        **_medians(
            rows,
            "xdrl_serial_fps",
            "torchrl_loop_fps",
            "torchrl_loop_ratio",
            "xdrl_vs_torch_loop",
            *_baseline_keys(rows),
        ),
        "target": ">= 1.75",
        "targets": PPO_TARGETS,
    }


PPO_TARGETS = {"ratio": 1.75, "xdrl_vs_torch_loop": 0.9, "torch_loop_ratio": 1.9}


def _alternated(runs: dict[str, Any], seed: int, reps: int | None = None) -> dict[str, Any]:
    """Run each callable ``reps`` times (``--reps``), round by round, the order rotated by seed
    and round so no framework always goes first; each result is its median over the rounds
    (:func:`_median_result`)."""
    names = list(runs)
    results: dict[str, list[Any]] = {name: [] for name in names}
    for round_ in range(REPS[0] if reps is None else reps):
        shift = (seed + round_) % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(runs[name]())
    return {name: _median_result(results[name]) for name in names}


def _median_result(values: list[Any]) -> Any:
    """The median of one contender's repeated results: of the numbers; of SB3's frames/s per
    thread count, then the best of those medians (:func:`_best_sb3`); of a run summary's
    ``frames_per_second`` (the rest of the summary from the run nearest below that median)."""
    if len(values) == 1:
        return values[0]
    first = values[0]
    if isinstance(first, int | float):
        return statistics.median(values)
    if "best" in first:
        per_thread = {k: statistics.median(v[k] for v in values) for k in first if k != "best"}
        return {"best": max(per_thread.values()), **per_thread}
    fps = statistics.median(v["frames_per_second"] for v in values)
    below = [v for v in values if v["frames_per_second"] <= fps]
    return {**max(below, key=lambda v: v["frames_per_second"]), "frames_per_second": fps}


SCALE_ENVS = {8: 10_240, 32: 32_768, 128: 65_536}  # envs -> frame budget (40, 32, 16 batches)


def scale(seeds: list[int], quick: bool) -> dict[str, Any]:
    """PPO CartPole frames/s at 8, 32 and 128 envs: 32 steps per env, whole-batch steps."""
    rows = []
    for seed in seeds:
        for envs, budget in SCALE_ENVS.items():
            frames = budget // 2 if quick else budget
            batch = 32 * envs
            overrides = [
                *PPO_PRESET,
                "eval=none",
                f"env.num_envs={envs}",
                f"frames_per_batch={batch}",
                f"algorithm.build.minibatch_size={batch}",
                f"total_frames={frames}",
            ]
            args = ("--frames", str(frames), "--envs", str(envs))
            fps = _alternated(
                {
                    "sb3": lambda s=seed, a=args: sb3("ppo-throughput", s, *a)["frames_per_second"],
                    "xdrl": lambda s=seed, o=overrides: xdrl(o, s)["frames_per_second"],
                    "torch_loop": lambda s=seed, e=envs, f=frames: loop(
                        "torch", s, f, "--envs", str(e)
                    ),
                },
                seed + envs,
            )
            rows.append({"seed": seed, "envs": envs, "frames": frames, **fps})
            print(f"  scale seed {seed}: {rows[-1]}", flush=True)
    table = []
    for envs in SCALE_ENVS:
        mine = [r for r in rows if r["envs"] == envs]
        med = {k: _median([r[k] for r in mine]) for k in ("sb3", "xdrl", "torch_loop")}
        sb, xd, fl = med["sb3"], med["xdrl"], med["torch_loop"]
        table.append(
            {
                "envs": envs,
                "frames_per_batch": 32 * envs,
                "frames": mine[0]["frames"],
                "sb3_fps": sb,
                "xdrl_fps": xd,
                "torch_loop_fps": fl,
                "ratio": xd / sb if xd and sb else None,
                "xdrl_vs_torch_loop": xd / fl if xd and fl else None,
                "torch_loop_ratio": fl / sb if fl and sb else None,
            }
        )
    return {
        "runs": rows,
        "table": table,
        "workload": "CartPole-v1, N envs x 32 steps, 20 epochs of one whole-batch (32 N) step, "
        "eval off, 1 thread",
    }


def time_to_475(seeds: list[int], quick: bool) -> dict[str, Any]:
    """Target 4, as a user feels it: the whole ``xdrl-train experiment=cartpole_ppo`` command
    (start-up, evaluations, its whole budget; final deterministic eval mean >= 475) against SB3
    with RL-Zoo's settings from process start (imports included) to its first 20-episode
    deterministic eval >= 475, evaluating every 10k frames."""
    sb3_budget = 50_000 if quick else 100_000
    rows = []
    for seed in seeds:
        out = _alternated(
            {
                "sb3": lambda s=seed: sb3(
                    "time-to-475",
                    s,
                    "--frames",
                    str(sb3_budget),
                    "--eval-interval",
                    "10000",
                    "--episodes",
                    "20",
                    "--launched-at",
                    repr(time.time()),
                ),
                "xdrl": lambda s=seed: _xdrl_whole_command(s),
            },
            seed,
            reps=1,  # whole commands with their evaluation timelines: one each
        )
        s, x = out["sb3"], out["xdrl"]
        rows.append(
            {
                "seed": seed,
                "sb3_time_s": s["time_to_475_wall_s"],
                "sb3_frames": s["frames_to_475"],
                "xdrl_time_s": x["wall_s"],
                "xdrl_frames": x["frames"],
                "xdrl_final_eval_mean": x["final_eval_mean"],
            }
        )
        print(f"  time-to-475 seed {seed}: {rows[-1]}", flush=True)
    return {"sb3_budget_frames": sb3_budget, "runs": rows, **_time_to_summary(rows)}


def _xdrl_whole_command(seed: int) -> dict[str, Any]:
    """Wall time of ``xdrl-train experiment=cartpole_ppo seed=N`` and its final eval mean."""
    start = time.perf_counter()
    summary = xdrl(PPO_PRESET, seed, checkpoint=True)
    return {
        "wall_s": time.perf_counter() - start,
        "frames": summary["total_frames"],
        "final_eval_mean": (summary.get("eval") or {}).get(EVAL_KEY),
    }


def _time_to_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds; an SB3 seed that never reached 475 counts as infinite time, an xdrl
    seed whose final eval mean is below 475 makes the target unmet."""
    sb3_t = statistics.median(
        [r["sb3_time_s"] if r["sb3_time_s"] is not None else float("inf") for r in rows]
    )
    sb3_t = None if sb3_t == float("inf") else sb3_t
    x_t = _median([r["xdrl_time_s"] for r in rows])
    solved = [(r.get("xdrl_final_eval_mean") or 0.0) >= 475 for r in rows]
    return {
        "sb3_time_s": sb3_t,
        "xdrl_time_s": x_t,
        "ratio": x_t / sb3_t if sb3_t and x_t else None,
        "xdrl_all_solved": all(solved),
        "target": "<= 0.5",
        "unreached": {
            "sb3": sum(r["sb3_time_s"] is None for r in rows),
            "xdrl": solved.count(False),
        },
        "note": "xdrl: the whole command (start-up, evals, every frame of the preset's budget) "
        "and its final deterministic eval mean; SB3: process start to its first 20-episode "
        "eval >= 475 (eval every 10k frames), a seed that never reached it counts as infinite",
    }


def _time_to_met(summary: dict[str, Any]) -> bool | None:
    """Target 4: every xdrl seed solved and its median time at most half of SB3's."""
    sb3_t, x_t = summary["sb3_time_s"], summary["xdrl_time_s"]
    if not summary.get("xdrl_all_solved", False) or x_t is None:
        return False
    return sb3_t is None or x_t <= 0.5 * sb3_t


def _xdrl_eval_time(weights: str, seed: int, batching: str, episodes: int) -> dict[str, float]:
    """Time one evaluation (the hook xdrl-train uses) of SB3's trained actor weights."""
    import torch

    from xdrl.algorithms.ppo import build
    from xdrl.envs.factory import make_env
    from xdrl.trainer_hooks.logging import LoggingEvaluationMetricsHook

    torch.set_num_threads(1)
    env = make_env("CartPole-v1", num_envs=episodes, seed=seed + 10_000, batching=batching)
    actor = build(env, frames_per_batch=256).eval_policy
    layers = [m for m in actor.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for layer, (weight, bias) in zip(layers, torch.load(weights), strict=True):
            layer.weight.copy_(weight)
            layer.bias.copy_(bias)
    hook = LoggingEvaluationMetricsHook(
        policy=actor,
        environment=env,
        group="agents",
        metric_subgroup="deterministic",
        interval_frames=5_000,
        max_steps=500,
        deterministic=True,
        render=False,
        video_fps=30,
    )
    hook.run(step=0)  # warm-up
    start = time.perf_counter()
    metrics = hook.run(step=1)
    elapsed = time.perf_counter() - start
    env.close()
    return {"eval_time_s": elapsed, "mean": metrics[EVAL_KEY]}


def eval_speed(seeds: list[int], quick: bool) -> dict[str, Any]:
    """SB3 trains PPO; both frameworks evaluate that same actor for 20 episodes."""
    frames = 10_240 if quick else 15_360
    rows = []
    for seed in seeds:
        with tempfile.NamedTemporaryFile(suffix=".pt") as weights:
            s = sb3("eval", seed, "--frames", str(frames), "--weights-out", weights.name)
            vector = _xdrl_eval_time(weights.name, seed, "vector", 20)
            serial = _xdrl_eval_time(weights.name, seed, "serial", 20)
        best_sb3 = min(s["eval_time_s_1env"], s["eval_time_s_20env"])
        rows.append(
            {
                "seed": seed,
                "sb3_1env_s": s["eval_time_s_1env"],
                "sb3_20env_s": s["eval_time_s_20env"],
                "sb3_mean": s["eval_mean_1env"],
                "xdrl_vector_s": vector["eval_time_s"],
                "xdrl_serial_s": serial["eval_time_s"],
                "xdrl_mean": vector["mean"],
                "ratio": vector["eval_time_s"] / best_sb3,
            }
        )
        print(f"  eval seed {seed}: {rows[-1]}", flush=True)
    return {
        "train_frames": frames,
        "runs": rows,
        "sb3_s": _median([min(r["sb3_1env_s"], r["sb3_20env_s"]) for r in rows]),
        "xdrl_s": _median([r["xdrl_vector_s"] for r in rows]),
        "xdrl_serial_s": _median([r["xdrl_serial_s"] for r in rows]),
        "ratio": _median([r["ratio"] for r in rows]),
        "target": "<= 1.0",
    }


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


def hook_overhead(seeds: list[int], quick: bool) -> dict[str, Any]:
    """The same in-process Trainer with and without xdrl's logging hooks, alternated."""
    import torch
    from hydra import compose, initialize_config_module
    from omegaconf import open_dict

    from xdrl.run.process import setup_process
    from xdrl.training.build import build_trainer

    frames = 5_120 if quick else 10_240
    reps = max(3, len(seeds))
    fps: dict[str, list[float]] = {"with_hooks": [], "without_hooks": []}
    ratios = []
    for rep in range(reps):
        pair = {}
        order = ["with_hooks", "without_hooks"] if rep % 2 == 0 else ["without_hooks", "with_hooks"]
        for variant in order:
            with initialize_config_module("xdrl.conf", version_base="1.3"):
                cfg = compose(
                    "config",
                    overrides=[
                        *PPO_PRESET,
                        f"total_frames={frames}",
                        "eval=none",
                        "checkpoint=none",
                    ],
                )
            run_dir = tempfile.mkdtemp(prefix="xdrl-hooks-")
            with open_dict(cfg):
                cfg.run_dir, cfg.exp_name = run_dir, "bench"
            setup_process(cfg)  # threads and tensordict's pandas lookup, as xdrl-train sets them
            run = build_trainer(cfg)
            if variant == "without_hooks":
                _hookless(run.trainer)
            torch.manual_seed(rep)
            start = time.perf_counter()
            run.trainer.train()
            pair[variant] = frames / (time.perf_counter() - start)
            fps[variant].append(pair[variant])
            run.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        ratios.append(1 - pair["with_hooks"] / pair["without_hooks"])
        print(f"  hook-overhead rep {rep}: {pair}", flush=True)
    return {
        "frames": frames,
        "with_hooks_fps": _median(fps["with_hooks"]),
        "without_hooks_fps": _median(fps["without_hooks"]),
        "overhead": _median(ratios),
        "overheads": ratios,
        "target": "<= 0.03",
    }


def _best_sb3(mode: str, seed: int, threads: tuple[int, ...], *args: str) -> dict[str, float]:
    """SB3's frames/s at each thread count and the best of them."""
    fps = {n: sb3(mode, seed, *args, "--threads", str(n))["frames_per_second"] for n in threads}
    return {"best": max(fps.values()), **{f"threads_{n}": v for n, v in fps.items()}}


OFF_POLICY = {
    "sac": {
        "frames": 1_536,
        "warmup": 512,
        "sb3_threads": (1, 2),
        "overrides": ["env=pendulum", "algorithm=sac"],
        "floor": "sac-torch",
        "targets": {"ratio": 1.2, "xdrl_vs_torch_loop": 0.9},
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
        "targets": {"ratio": 1.2},
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
        "bench_venv_extra": MUJOCO_EXTRA,
        "overrides": ["env=halfcheetah", "algorithm=sac"],
        "floor": None,
        "targets": {},
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
        "targets": {"ratio": 1.5},
        "workload": "CartPole-v1, RL-Zoo's DQN settings (lr 2.3e-3, batch 64, 128 gradient "
        "steps per 256 frames, [256, 256]; SB3 1 env trains every 256 frames, 1 thread; xdrl "
        "`experiment=cartpole_dqn` with `algorithm.build.double_dqn=false`, 8 envs x 32 steps, "
        "its defaults), 10,240 frames",
    },
}


def _baseline_keys(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    return ("baseline_fps", "baseline_ratio") if "baseline_fps" in rows[0] else ()


def off_policy_throughput(mode: str, seeds: list[int], quick: bool) -> dict[str, Any]:
    """One off-policy workload (``OFF_POLICY[mode]``): SB3, xdrl-train at its defaults and, for
    SAC and TD3, the plain-PyTorch floor, alternated per seed."""
    spec = {**OFF_POLICY[mode]}
    if "sb3" in THREADS and len(spec["sb3_threads"]) > 1:
        spec["sb3_threads"] = THREADS["sb3"]
    if "bench_venv_extra" in spec:
        ensure_in_bench_venv(spec["bench_venv_extra"])
    frames = spec["frames"] * 2 // 3 if quick else spec["frames"]
    warmup = spec["warmup"]
    overrides = [*spec["overrides"], f"total_frames={frames}", "eval=none"]
    if mode != "dqn":
        overrides += [
            "env.num_envs=1",
            "frames_per_batch=64",
            f"algorithm.build.init_random_frames={warmup}",
            "algorithm.build.batch_size=256",
            "algorithm.build.utd=1.0",
        ]
    rows = []
    for seed in seeds:
        runs = {
            "sb3": lambda s=seed: _best_sb3(
                spec.get("sb3_mode", mode),
                s,
                spec["sb3_threads"],
                *spec.get("sb3_args", []),
                "--frames",
                str(frames),
                "--learning-starts",
                str(warmup),
            ),  # fmt: skip
            "xdrl": lambda s=seed: xdrl(overrides, s),
        }
        if "xdrl" in BASELINE:
            runs["baseline"] = lambda s=seed: xdrl(
                [*overrides, *BASELINE_OVERRIDES], s, executable=BASELINE["xdrl"]
            )["frames_per_second"]
        if spec["floor"]:  # the floor, like SB3, at its better thread count
            runs["torch_loop"] = lambda s=seed: max(
                loop(spec["floor"], s, frames, "--warmup", str(warmup), "--threads", str(n))
                for n in spec["sb3_threads"]
            )
        out = _alternated(runs, seed)
        summary = out["xdrl"]
        fps = summary["frames_per_second"]
        sb = out["sb3"]["best"]
        row = {
            "seed": seed,
            "sb3_fps": sb,
            **{f"sb3_fps_{k}": v for k, v in out["sb3"].items() if k != "best"},
            "xdrl_fps": fps,
            "xdrl_threads": summary["segments"][-1].get("torch_threads"),  # what auto picked
            "torch_loop_fps": out.get("torch_loop"),
            "ratio": fps / sb,
            "torch_loop_ratio": out["torch_loop"] / sb if "torch_loop" in out else None,
            "xdrl_vs_torch_loop": fps / out["torch_loop"] if "torch_loop" in out else None,
        }
        if "baseline" in out:
            row.update(baseline_fps=out["baseline"], baseline_ratio=out["baseline"] / sb)
        rows.append(row)
        print(f"  {mode} seed {seed}: {row}", flush=True)
    return {
        "frames": frames,
        "warmup_frames": warmup,
        "runs": rows,
        **_medians(rows, "xdrl_vs_torch_loop", *_baseline_keys(rows)),
        "targets": spec["targets"],
        "workload": spec["workload"],
        "sb3_threads": list(spec["sb3_threads"]),
    }


def sac_throughput(seeds: list[int], quick: bool) -> dict[str, Any]:
    return off_policy_throughput("sac", seeds, quick)


def td3_throughput(seeds: list[int], quick: bool) -> dict[str, Any]:
    return off_policy_throughput("td3", seeds, quick)


def dqn_throughput(seeds: list[int], quick: bool) -> dict[str, Any]:
    return off_policy_throughput("dqn", seeds, quick)


def halfcheetah_throughput(seeds: list[int], quick: bool) -> dict[str, Any]:
    return off_policy_throughput("halfcheetah", seeds, quick)


def atari_throughput(seeds: list[int], quick: bool) -> dict[str, Any]:
    """xdrl's ``atari_ppo`` (its default precision, fp32, and bf16) against SB3's PPO with
    RL-Zoo's Atari settings on Breakout, 2 torch threads each, the same number of agent steps;
    frames/s count emulator frames (4 per agent step), training time only."""
    ensure_in_bench_venv(ATARI_EXTRA)
    steps = 2_048 if quick else 8_192  # agent steps: 2 or 8 batches of 8 envs x 128
    common = [
        "experiment=atari_ppo",
        "env.id=ALE/Breakout-v5",
        f"total_frames={4 * steps}",
        "num_threads=2",
        "eval=none",
        "logging=none",
    ]
    sb3_args = ["--frames", str(steps), "--threads", "2"]
    rows = []
    for seed in seeds:
        contenders = {
            "sb3": lambda s=seed: sb3("atari", s, *sb3_args),
            "xdrl": lambda s=seed: xdrl(common, s),
            "xdrl_bf16": lambda s=seed: xdrl([*common, "precision=bf16"], s),
        }
        if "xdrl" in BASELINE:
            contenders["baseline"] = lambda s=seed: xdrl(
                [*common, *BASELINE_OVERRIDES], s, executable=BASELINE["xdrl"]
            )
        runs = {k: v["frames_per_second"] for k, v in _alternated(contenders, seed).items()}
        row = {
            "seed": seed,
            "sb3_fps": runs["sb3"],
            "xdrl_fps": runs["xdrl"],
            "xdrl_bf16_fps": runs["xdrl_bf16"],
            "ratio": runs["xdrl"] / runs["sb3"],
            "bf16_ratio": runs["xdrl_bf16"] / runs["sb3"],
            "torch_loop_fps": None,
            "torch_loop_ratio": None,
            "load_average": os.getloadavg()[0],
        }
        if "baseline" in runs:
            row.update(baseline_fps=runs["baseline"], baseline_ratio=runs["baseline"] / runs["sb3"])
        rows.append(row)
        print(f"  atari seed {seed}: {row}", flush=True)
    return {
        "agent_steps": steps,
        "runs": rows,
        **_medians(rows, "xdrl_bf16_fps", "bf16_ratio", *_baseline_keys(rows)),
        "target": ">= 1.5 (frames/s, 2 threads each)",
        "workload": "Breakout, RL-Zoo atari PPO: 8 envs x 128 steps, 4 epochs x 4 minibatches, "
        f"Nature CNN, {steps} agent steps ({4 * steps} frames)",
    }


def startup(seeds: list[int], quick: bool) -> dict[str, Any]:
    reps = 3 if quick else 5
    out: dict[str, Any] = {}
    for name, args in {"help": ["--help"], "cfg_job": ["--cfg", "job"]}.items():
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            _run([str(XDRL_TRAIN), *args])
            times.append(time.perf_counter() - start)
        out[f"{name}_median_s"] = statistics.median(times)
    frames = 4_096 if quick else 8_192
    x = xdrl([f"total_frames={frames}"], seeds[0])
    out.update(
        default_run_frames=frames,
        default_run_peak_rss_mb=x["peak_rss_mb"],
        target="< 1 s each; peak memory < 1.5 GB",
    )
    return out


RUNNERS = {
    "ppo-throughput": ppo_throughput,
    "scale": scale,
    "time-to-475": time_to_475,
    "eval": eval_speed,
    "hook-overhead": hook_overhead,
    "sac": sac_throughput,
    "td3": td3_throughput,
    "dqn": dqn_throughput,
    "halfcheetah": halfcheetah_throughput,
    "startup": startup,
    "atari": atari_throughput,
}


# Report
def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    versions = {}
    for py, pkgs in {
        sys.executable: ["torch", "torchrl", "tensordict", "gymnasium"],
        str(BENCH_PY): ["stable_baselines3"],
    }.items():
        code = "import importlib;" + ";".join(
            f"print('{p}', importlib.import_module('{p}').__version__)" for p in pkgs
        )
        for line in _run([py, "-c", code]).stdout.splitlines():
            name, version = line.split()
            versions[name] = version
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "versions": versions,
    }


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _at_least(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target


def _scale_table(s: dict[str, Any]) -> list[str]:
    """The scale mode's own table: one row per env count."""
    lines = [
        "",
        f"PPO CartPole frames/s by number of envs ({s['workload']}; medians over seeds):",
        "",
        "| envs | frames/batch | frames | SB3 | xdrl | floor | xdrl/SB3 | xdrl/floor | floor/SB3 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in s["table"]:
        lines.append(
            f"| {t['envs']} | {t['frames_per_batch']:,} | {t['frames']:,} | "
            f"{_fmt(t['sb3_fps'], 0)} | {_fmt(t['xdrl_fps'], 0)} | {_fmt(t['torch_loop_fps'], 0)} "
            f"| {_fmt(t['ratio'])} | {_fmt(t['xdrl_vs_torch_loop'])} | "
            f"{_fmt(t['torch_loop_ratio'])} |"
        )
    return lines


def _baseline_row(row: Any, workload: str, o: dict[str, Any]) -> None:
    """The ``--baseline`` (before) row of one mode's results, where the baseline ran."""
    if o.get("baseline_fps") is not None:
        row(
            f"same {workload} workload, `--baseline` xdrl-train (before) frames/s",
            _fmt(o["sb3_fps"], 0),
            _fmt(o["baseline_fps"], 0),
            _fmt(o["baseline_ratio"]),
            "reference",
            None,
        )


def _off_policy_rows(r: dict[str, Any], row: Any) -> None:
    """The SAC, TD3 and DQN rows of the summary table (through ``markdown``'s ``row``)."""
    for mode, title in (
        ("sac", "SAC Pendulum frames/s (UTD 1, batch 256, 256x256"),
        ("td3", "TD3 Pendulum frames/s (UTD 1, batch 256, [400, 300]"),
        ("dqn", "DQN CartPole frames/s (RL-Zoo settings"),
        ("halfcheetah", "SAC HalfCheetah-v5 frames/s (UTD 1, batch 256, 256x256"),
    ):
        if mode not in r or "ratio" not in r[mode]:
            continue
        o = r[mode]
        threads = "/".join(str(n) for n in o.get("sb3_threads", [1, 2]))
        title = f"{title}; SB3 at its best of {threads} thread(s), xdrl at its defaults)"
        goal = o.get("targets", {"ratio": 1.0})
        ratio_goal = goal.get("ratio")
        row(
            title,
            _fmt(o["sb3_fps"], 0),
            _fmt(o["xdrl_fps"], 0),
            _fmt(o["ratio"]),
            f">= {ratio_goal}" if ratio_goal else "reference",
            _at_least(o["ratio"], ratio_goal) if ratio_goal else None,
        )
        _baseline_row(row, mode.upper(), o)
        if o.get("torch_loop_fps") is not None:
            row(
                f"same {mode.upper()} workload, lean plain-PyTorch + gymnasium loop (the floor) "
                "frames/s, ratio floor/SB3",
                _fmt(o["sb3_fps"], 0),
                _fmt(o["torch_loop_fps"], 0),
                _fmt(o.get("torch_loop_ratio")),
                "reference",
                None,
            )
            target = goal.get("xdrl_vs_torch_loop")
            row(
                f"xdrl vs the {mode.upper()} floor (ratio xdrl/floor)",
                "-",
                f"{_fmt(o['xdrl_fps'], 0)} vs {_fmt(o['torch_loop_fps'], 0)}",
                _fmt(o.get("xdrl_vs_torch_loop")),
                f">= {target}" if target else "reference",
                _at_least(o.get("xdrl_vs_torch_loop"), target) if target else None,
            )


def markdown(results: dict[str, Any], command: str) -> str:
    m = results["machine"]
    lines = [
        "# xdrl vs SB3 benchmark",
        "",
        f"`{command}` on {m['date']}: {m['nproc']} x {m['cpu']}, Python {m['python']}, "
        f"load average at start {tuple(round(x, 1) for x in m['load_average'])}, "
        f"end {tuple(round(x, 1) for x in results['load_average_end'])}.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".",
        "",
        "| measure | SB3 | xdrl | ratio (xdrl/SB3) | target | met |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    r = results["modes"]

    def row(name: str, sb: Any, xd: Any, ratio: Any, target: str, ok: bool | None) -> None:
        met = "n/a" if ok is None else ("yes" if ok else "no")
        lines.append(f"| {name} | {sb} | {xd} | {ratio} | {target} | {met} |")

    if "ppo-throughput" in r:
        p = r["ppo-throughput"]
        goal = {**PPO_TARGETS, **p.get("targets", {})}
        row(
            "PPO CartPole frames/s (8 envs x 32 steps, 20 epochs of 256; no eval, logging on)",
            _fmt(p["sb3_fps"], 0),
            f"{_fmt(p['xdrl_fps'], 0)} (batching=serial: {_fmt(p['xdrl_serial_fps'], 0)})",
            _fmt(p["ratio"]),
            f">= {goal['ratio']}",
            _at_least(p["ratio"], goal["ratio"]),
        )
        _baseline_row(row, "PPO", p)
        row(
            "same workload, bare TorchRL loop (tutorial style, no Trainer) frames/s",
            _fmt(p["sb3_fps"], 0),
            _fmt(p.get("torchrl_loop_fps"), 0),
            _fmt(p.get("torchrl_loop_ratio")),
            "reference",
            None,
        )
        row(
            "same workload, lean hand-written PyTorch + gymnasium loop (the floor) frames/s, "
            "ratio floor/SB3",
            _fmt(p["sb3_fps"], 0),
            _fmt(p.get("torch_loop_fps"), 0),
            _fmt(p.get("torch_loop_ratio")),
            f">= {goal['torch_loop_ratio']}",
            _at_least(p.get("torch_loop_ratio"), goal["torch_loop_ratio"]),
        )
        row(
            "xdrl vs the floor, same workload (ratio xdrl/floor)",
            "-",
            f"{_fmt(p['xdrl_fps'], 0)} vs {_fmt(p.get('torch_loop_fps'), 0)}",
            _fmt(p.get("xdrl_vs_torch_loop")),
            f">= {goal['xdrl_vs_torch_loop']}",
            _at_least(p.get("xdrl_vs_torch_loop"), goal["xdrl_vs_torch_loop"]),
        )
    if "atari" in r:
        a = r["atari"]
        row(
            f"Atari PPO frames/s (Breakout, RL-Zoo atari settings, {a['agent_steps']} agent "
            "steps, 2 threads each; xdrl at its default fp32, precision=bf16 in brackets)",
            _fmt(a["sb3_fps"], 0),
            f"{_fmt(a['xdrl_fps'], 0)} ({_fmt(a.get('xdrl_bf16_fps'), 0)})",
            f"{_fmt(a['ratio'])} ({_fmt(a.get('bf16_ratio'))})",
            ">= 1.5",
            _at_least(a["ratio"], 1.5),
        )
        _baseline_row(row, "Atari", a)
    if "time-to-475" in r:
        t = r["time-to-475"]
        unreached = t.get("unreached", {})
        row(
            "time to 475, s: the whole `xdrl-train experiment=cartpole_ppo` (final eval mean "
            f"< 475 on {unreached.get('xdrl', '?')} seeds) vs SB3 from process start to its "
            f"first 20-episode eval >= 475, eval every 10k (never on {unreached.get('sb3', '?')}); "
            "medians",
            _fmt(t["sb3_time_s"]) if t["sb3_time_s"] is not None else "not reached",
            _fmt(t["xdrl_time_s"]),
            _fmt(t["ratio"]),
            "<= 0.5",
            _time_to_met(t),
        )
    if "eval" in r:
        e = r["eval"]
        one = _median([r["sb3_1env_s"] for r in e["runs"]])
        twenty = _median([r["sb3_20env_s"] for r in e["runs"]])
        row(
            "one evaluation, 20 episodes, s (same actor; SB3 `evaluate_policy` on a 1-env / "
            "20-env DummyVecEnv, ratio vs the faster)",
            f"{_fmt(one, 3)} / {_fmt(twenty, 3)}",
            f"{_fmt(e['xdrl_s'], 3)} (serial: {_fmt(e['xdrl_serial_s'], 3)})",
            _fmt(e["ratio"]),
            "<= 1",
            e["ratio"] <= 1,
        )
    if "hook-overhead" in r:
        h = r["hook-overhead"]
        row(
            "logging hook set cost, share of frames/s",
            "-",
            f"{_fmt(h['with_hooks_fps'], 0)} vs {_fmt(h['without_hooks_fps'], 0)} fps",
            f"{100 * h['overhead']:.1f}%",
            "<= 3%",
            h["overhead"] <= 0.03,
        )
    _off_policy_rows(r, row)
    if "startup" in r:
        s = r["startup"]
        row(
            "`xdrl-train --help`, s (median)",
            "-",
            _fmt(s["help_median_s"]),
            "-",
            "< 1",
            s["help_median_s"] < 1,
        )
        row(
            "`xdrl-train --cfg job`, s (median)",
            "-",
            _fmt(s["cfg_job_median_s"]),
            "-",
            "< 1",
            s["cfg_job_median_s"] < 1,
        )
        row(
            f"peak RSS of the default run ({s['default_run_frames']:,} frames), MB",
            "-",
            _fmt(s["default_run_peak_rss_mb"], 0),
            "-",
            "< 1,536",
            s["default_run_peak_rss_mb"] < 1536,
        )
    if lines[-1].startswith("| --- |"):  # no row: the table would be empty
        del lines[-3:]
    if "scale" in r:
        lines += _scale_table(r["scale"])
    lines += [
        "",
        "Per-seed figures are in bench.json. Timings are wall-clock on a shared machine; "
        "each seed runs the frameworks back to back in an order rotated by seed; read the ratios.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode",
        default="all",
        help=f"'all' or a comma-separated list of: {', '.join(MODES)}",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds per mode (0, 1, ...)")
    parser.add_argument("--quick", action="store_true", help="smaller workloads (smoke test)")
    parser.add_argument(
        "--reps",
        type=int,
        default=1,
        help="rounds of every contender per seed, alternated; each figure is the median of its "
        "rounds (a busy or noisy machine: 3)",
    )
    parser.add_argument(
        "--threads",
        default=None,
        help="thread counts SB3 (and the SAC floor) try where the mode takes their best, e.g. "
        "'1' on a machine whose other work makes 2 threads crawl (default: 1,2)",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="another checkout's xdrl-train (e.g. main's .venv/bin/xdrl-train), run alongside "
        "in the throughput modes: before/after figures from one run",
    )
    parser.add_argument(
        "--baseline-overrides",
        default="",
        help="space-separated overrides added to the baseline's runs (e.g. 'num_threads=1')",
    )
    parser.add_argument("--out", default=str(ROOT / "bench-results"), help="output folder")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite bench.md from an existing bench.json (no runs)",
    )
    args = parser.parse_args()
    out = Path(args.out)
    if args.report_only:
        results = json.loads((out / "bench.json").read_text())
        if "time-to-475" in results["modes"]:
            t = results["modes"]["time-to-475"]
            t.update(_time_to_summary(t["runs"]))
        (out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
        (out / "bench.md").write_text(markdown(results, results.get("command", "")))
        print((out / "bench.md").read_text())
        return
    modes = MODES if args.mode == "all" else [m.strip() for m in args.mode.split(",")]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; choose from {MODES} or 'all'")
    ensure_bench_venv()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    REPS[0] = args.reps
    if args.threads:
        THREADS["sb3"] = tuple(int(n) for n in args.threads.split(","))
    if args.baseline:
        BASELINE["xdrl"] = Path(args.baseline)
        BASELINE_OVERRIDES.extend(args.baseline_overrides.split())
    seeds = list(range(args.seeds))
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": args.quick,
        "reps": args.reps,
        "modes": {},
    }
    started = time.perf_counter()
    for mode in modes:
        print(f"[{mode}]", flush=True)
        t0 = time.perf_counter()
        results["modes"][mode] = RUNNERS[mode](seeds, args.quick)
        results["modes"][mode]["bench_seconds"] = round(time.perf_counter() - t0, 1)
    results["bench_seconds"] = round(time.perf_counter() - started, 1)
    results["load_average_end"] = os.getloadavg()
    out.mkdir(parents=True, exist_ok=True)
    command = "python scripts/bench.py " + " ".join(sys.argv[1:])
    results["command"] = command
    (out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "bench.md").write_text(markdown(results, command))
    print((out / "bench.md").read_text())


if __name__ == "__main__":
    main()
