"""``eval``: SB3 trains PPO; both frameworks evaluate that same actor for 20 episodes (xdrl with
the evaluation hook xdrl-train uses, in this process)."""

from __future__ import annotations

import tempfile
import time
from typing import Any, Literal

from benchmarks import contenders as c
from benchmarks.report import check, fmt, row
from benchmarks.runner import Options, Row, median


def _xdrl_eval_time(
    weights: str, seed: int, batching: Literal["vector", "serial"], episodes: int
) -> dict[str, float]:
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
    return {"eval_time_s": elapsed, "mean": metrics[c.EVAL_KEY]}


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    frames = 10_240 if options.quick else 15_360
    rows = []
    for seed in seeds:
        with tempfile.NamedTemporaryFile(suffix=".pt") as weights:
            s = c.sb3(
                options.sb3_python,
                "eval",
                seed,
                "--frames",
                str(frames),
                "--weights-out",
                weights.name,
            )
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
        "sb3_s": median(min(r["sb3_1env_s"], r["sb3_20env_s"]) for r in rows),
        "xdrl_s": median(r["xdrl_vector_s"] for r in rows),
        "xdrl_serial_s": median(r["xdrl_serial_s"] for r in rows),
        "ratio": median(r["ratio"] for r in rows),
    }


def rows(e: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    one = median(r["sb3_1env_s"] for r in e["runs"])
    twenty = median(r["sb3_20env_s"] for r in e["runs"])
    return [
        row(
            "one evaluation, 20 episodes, s (same actor; SB3 `evaluate_policy` on a 1-env / "
            "20-env DummyVecEnv, ratio vs the faster)",
            f"{fmt(one, 3)} / {fmt(twenty, 3)}",
            f"{fmt(e['xdrl_s'], 3)} (serial: {fmt(e['xdrl_serial_s'], 3)})",
            fmt(e["ratio"]),
            check(targets, "ratio", e["ratio"]),
        )
    ]
