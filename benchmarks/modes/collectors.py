"""``collectors``: ``collector=single`` against ``collector=multiprocess`` with 2 and 4 workers.

Three workloads, each contender on the same command but for the collector:

- ``sleepy``: ``experiment=cartpole_ppo`` (8 envs x 32 steps, 20 full-batch epochs) on
  :mod:`xdrl.envs.testing`'s SleepyCartPole-v1, whose step waits 2 ms (a remote simulator's
  round trip): the workers' waits overlap, even on 2 cores. Beside plain workers=2 and 4:
  workers=4 whose 2 envs each step in 2 threads (``collector.env_threads=2``, ``w4t2``: every
  env's wait overlaps), and, for reference, ``collector=single`` with 8 env threads (``w1t8``).
- ``cartpole``: the same on plain CartPole-v1 (24,576 frames): a cheap env, where the in-process
  path wins.
- ``dqn``: ``experiment=cartpole_dqn`` (8 envs x 32 steps, 128 gradient steps per batch) on
  SleepyCartPole-v1: ``collector=single``, 2 synchronous workers and 2 asynchronous ones
  (``collector.sync=false``, ``a2``: the learner optimizes while the workers collect).
- ``ray`` (where Ray is installed): ``collector=ray collector.workers=2`` (``r2``: Ray actors on
  a local Ray the run starts) beside the others on the ``sleepy`` and ``cartpole`` workloads.
- ``atari``: ``experiment=atari_ppo`` on Breakout (8 emulators), 2 torch threads for the learner,
  against SB3's PPO with RL-Zoo's Atari settings (``SubprocVecEnv`` off: its one-process
  ``DummyVecEnv``, as in the ``atari`` mode); skipped without ale-py or SB3's venv.

Frames/s are training time only (``summary.json``), not the workers' start-up.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

from benchmarks import contenders as c
from benchmarks.modes import atari
from benchmarks.report import check, fmt, row
from benchmarks.runner import Options, Row, alternated, median

CARTPOLE = ["experiment=cartpole_ppo", "eval=none", "logging=none", "num_threads=1"]
SLEEPY = [*CARTPOLE, "env.id=xdrl.envs.testing:SleepyCartPole-v1"]
SLEEPY_COUNTS = ((1, 1), (2, 1), (4, 1), (4, 2), (1, 8))  # (workers, env threads)


def _collector(workers: int, threads: int = 1) -> list[str]:
    out = [] if workers == 1 else ["collector=multiprocess", f"collector.workers={workers}"]
    return out + ([f"collector.env_threads={threads}"] if threads > 1 else [])


def _name(workers: int, threads: int = 1) -> str:
    return f"w{workers}" + (f"t{threads}" if threads > 1 else "")


def _contenders(
    common: list[str], counts: tuple[int, ...] | tuple[tuple[int, int], ...], seed: int
) -> dict[str, Callable]:
    pairs = [n if isinstance(n, tuple) else (n, 1) for n in counts]
    return {
        _name(*p): (lambda p=p: c.xdrl([*common, *_collector(*p)], seed)["frames_per_second"])
        for p in pairs
    }


RAY_CONTENDER = ["collector=ray", "collector.workers=2"]


def _with_ray(runs: dict[str, Callable], common: list[str], seed: int) -> dict[str, Callable]:
    """``runs`` and, where Ray is installed, ``r2``: 2 Ray actors on the same command."""
    if importlib.util.find_spec("ray") is None:
        return runs
    return {**runs, "r2": lambda: c.xdrl([*common, *RAY_CONTENDER], seed)["frames_per_second"]}


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    # 8 or 96 batches of 256: a worker's first batch costs ~2 s more than the next ones (its
    # lazy start), which 24 batches did not amortize (measured: 1,086 vs 1,614 frames/s for
    # workers=4 env_threads=2 at 6,144 vs 24,576 frames, single 422 vs 431, load 4-6)
    frames = 2_048 if options.quick else 24_576
    sleepy_rows = []
    for seed in seeds:
        common = [*SLEEPY, f"total_frames={frames}"]
        runs = _with_ray(_contenders(common, SLEEPY_COUNTS, seed), common, seed)
        fps = alternated(runs, seed, options.reps)
        sleepy_rows.append({"seed": seed, **fps, "load_average": os.getloadavg()[0]})
        print(f"  collectors sleepy seed {seed}: {sleepy_rows[-1]}", flush=True)
    out: dict[str, Any] = {"sleepy_frames": frames, "sleepy_runs": sleepy_rows}
    for pair in SLEEPY_COUNTS:
        out[f"sleepy_{_name(*pair)}_fps"] = median(r[_name(*pair)] for r in sleepy_rows)
    for pair in SLEEPY_COUNTS[1:]:
        name = _name(*pair)
        out[f"sleepy_{name}_speedup"] = out[f"sleepy_{name}_fps"] / out["sleepy_w1_fps"]
    cartpole_frames = out["cartpole_frames"] = 8_192 if options.quick else 24_576
    cartpole = [*CARTPOLE, f"total_frames={cartpole_frames}"]  # the same work, minus the waits
    cartpole_rows = [
        alternated(_with_ray(_contenders(cartpole, (1, 2), s), cartpole, s), s, options.reps)
        for s in seeds
    ]
    out["cartpole_runs"] = cartpole_rows
    for n in (1, 2):
        out[f"cartpole_w{n}_fps"] = median(r[f"w{n}"] for r in cartpole_rows)
    out["cartpole_w2_speedup"] = out["cartpole_w2_fps"] / out["cartpole_w1_fps"]
    if "r2" in sleepy_rows[0]:
        for workload, rows_ in (("sleepy", sleepy_rows), ("cartpole", cartpole_rows)):
            out[f"{workload}_r2_fps"] = median(r["r2"] for r in rows_)
            out[f"{workload}_r2_speedup"] = out[f"{workload}_r2_fps"] / out[f"{workload}_w1_fps"]
    out.update(_dqn(options, seeds))
    if importlib.util.find_spec("ale_py") is not None and options.sb3_python.exists():
        out.update(_atari(options, seeds))
    return out


DQN = ["experiment=cartpole_dqn", "env.id=xdrl.envs.testing:SleepyCartPole-v1", "eval=none",
       "logging=none", "num_threads=1"]  # fmt: skip
DQN_CONTENDERS = {
    "w1": [],
    "w2": ["collector=multiprocess", "collector.workers=2"],
    "a2": ["collector=multiprocess", "collector.workers=2", "collector.sync=false"],
}


def _dqn(options: Options, seeds: list[int]) -> dict[str, Any]:
    """DQN on SleepyCartPole: in-process, 2 synchronous and 2 asynchronous workers."""
    frames = 4_096 if options.quick else 12_288  # 16 or 48 batches of 256
    common = [*DQN, f"total_frames={frames}"]
    rows = []
    for seed in seeds:
        runs = {
            name: (lambda extra=extra, s=seed: c.xdrl([*common, *extra], s)["frames_per_second"])
            for name, extra in DQN_CONTENDERS.items()
        }
        rows.append({"seed": seed, **alternated(runs, seed, options.reps),
                     "load_average": os.getloadavg()[0]})  # fmt: skip
        print(f"  collectors dqn seed {seed}: {rows[-1]}", flush=True)
    out: dict[str, Any] = {"dqn_frames": frames, "dqn_runs": rows}
    for name in DQN_CONTENDERS:
        out[f"dqn_{name}_fps"] = median(r[name] for r in rows)
    for name in ("w2", "a2"):
        out[f"dqn_{name}_speedup"] = out[f"dqn_{name}_fps"] / out["dqn_w1_fps"]
    return out


def _atari(options: Options, seeds: list[int]) -> dict[str, Any]:
    steps = 2_048 if options.quick else 8_192  # agent steps: 2 or 8 batches of 8 envs x 128
    common = ["experiment=atari_ppo", f"env.id={atari.ENV_ID}", f"total_frames={4 * steps}",
              "num_threads=2", "eval=none", "logging=none"]  # fmt: skip
    work = atari.checked_work(options)
    rows = []
    for seed in seeds:
        runs: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.sb3(
                options.sb3_python, "atari", s, "--frames", str(steps), "--threads", "2"
            )["frames_per_second"],
            **_contenders(common, (1, 2), seed),
        }
        fps = alternated(runs, seed, options.reps)
        rows.append({"seed": seed, **fps, "load_average": os.getloadavg()[0]})
        print(f"  collectors atari seed {seed}: {rows[-1]}", flush=True)
    out: dict[str, Any] = {"atari_agent_steps": steps, "atari_runs": rows, "atari_work": work}
    for name in ("sb3", "w1", "w2"):
        out[f"atari_{name}_fps"] = median(r[name] for r in rows)
    out["atari_best_ratio"] = max(out["atari_w1_fps"], out["atari_w2_fps"]) / out["atari_sb3_fps"]
    return out


def rows(a: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    out = [
        row(
            f"SleepyCartPole PPO (2 ms per step, 8 envs, {a['sleepy_frames']} frames) frames/s: "
            "collector=single, workers=2, workers=4",
            fmt(a["sleepy_w1_fps"], 0),
            f"{fmt(a['sleepy_w2_fps'], 0)}, {fmt(a['sleepy_w4_fps'], 0)}",
            f"{fmt(a['sleepy_w2_speedup'])}, {fmt(a['sleepy_w4_speedup'])}",
            ("reference", None),
        ),
        row(
            "the same, workers=4 with collector.env_threads=2 (every env's wait overlaps); "
            "collector=single with collector.env_threads=8",
            fmt(a["sleepy_w1_fps"], 0),
            f"{fmt(a['sleepy_w4t2_fps'], 0)}, {fmt(a['sleepy_w1t8_fps'], 0)}",
            f"{fmt(a['sleepy_w4t2_speedup'])}, {fmt(a['sleepy_w1t8_speedup'])}",
            check(targets, "sleepy_w4t2_speedup", a["sleepy_w4t2_speedup"]),
        ),
        row(
            f"CartPole PPO (the same, no waits, {a['cartpole_frames']} frames) frames/s: "
            "collector=single, workers=2",
            fmt(a["cartpole_w1_fps"], 0),
            fmt(a["cartpole_w2_fps"], 0),
            fmt(a["cartpole_w2_speedup"]),
            ("reference", None),
        ),
    ]
    if "sleepy_r2_fps" in a:
        out.append(
            row(
                "collector=ray collector.workers=2 (2 Ray actors, a local Ray): SleepyCartPole "
                "PPO, CartPole PPO frames/s (against collector=single; workers=2 above)",
                f"{fmt(a['sleepy_w1_fps'], 0)}, {fmt(a['cartpole_w1_fps'], 0)}",
                f"{fmt(a['sleepy_r2_fps'], 0)}, {fmt(a['cartpole_r2_fps'], 0)}",
                f"{fmt(a['sleepy_r2_speedup'])}, {fmt(a['cartpole_r2_speedup'])}",
                ("reference", None),
            )
        )
    if "dqn_w1_fps" in a:
        out.append(
            row(
                f"SleepyCartPole DQN (cartpole_dqn settings, {a['dqn_frames']} frames) frames/s: "
                "collector=single; workers=2, workers=2 with collector.sync=false",
                fmt(a["dqn_w1_fps"], 0),
                f"{fmt(a['dqn_w2_fps'], 0)}, {fmt(a['dqn_a2_fps'], 0)}",
                f"{fmt(a['dqn_w2_speedup'])}, {fmt(a['dqn_a2_speedup'])}",
                ("reference", None),
            )
        )
    if "atari_sb3_fps" in a:
        out.append(
            row(
                f"Atari PPO (Breakout, {a['atari_agent_steps']} agent steps) frames/s: SB3; "
                "xdrl single, workers=2",
                fmt(a["atari_sb3_fps"], 0),
                f"{fmt(a['atari_w1_fps'], 0)}, {fmt(a['atari_w2_fps'], 0)}",
                fmt(a["atari_best_ratio"]),
                check(targets, "atari_best_ratio", a["atari_best_ratio"]),
            )
        )
    return out
