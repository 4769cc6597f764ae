"""``atari``: xdrl's ``atari_ppo`` (its default precision, fp32, and bf16) against SB3's PPO with
RL-Zoo's Atari settings on Breakout, 2 torch threads each, the same number of agent steps;
frames/s count emulator frames (4 per agent step), training time only. Before any timing, both
sides' games are stepped and their ALE frame counters and sticky-action probability read: the
mode refuses to compare sides that emulate different work (SB3 on a ``-v5`` id with the ALE's own
frame skip left on emulated 16 frames per agent step against xdrl's 4)."""

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
    baseline_keys,
    medians,
    sb3_xdrl_row,
)

ENV_ID = "ALE/Breakout-v5"
PROBE_STEPS = 64  # random agent steps of each game when the work per step is measured
SAME_WORK = 0.25  # relative difference of frames per agent step allowed (reset no-ops differ)


def xdrl_work(
    overrides: list[str], agent_steps: int = PROBE_STEPS, seed: int = 0
) -> dict[str, Any]:
    """Emulator frames per agent step and sticky-action probability of the env xdrl-train builds
    for ``overrides``, read from its games' ALE over ``agent_steps`` random steps (resets
    included), as ``scripts/bench_sb3.py atari-work`` reads SB3's."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    from xdrl.cli import CONFIG_PACKAGE
    from xdrl.training.env_state import gym_envs

    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    env = instantiate(cfg.env)(seed=seed)
    try:
        ales = [game.unwrapped.ale for game in gym_envs(env) or []]
        env.reset()
        before = sum(ale.getFrameNumber() for ale in ales)
        env.rollout(agent_steps, break_when_any_done=False)
        frames = sum(ale.getFrameNumber() for ale in ales) - before
    finally:
        env.close()
    return {
        "frames_per_agent_step": frames / (agent_steps * len(ales)),
        "repeat_action_probability": sorted(
            {ale.getFloat("repeat_action_probability") for ale in ales}
        ),
    }


def same_work(sb3: dict[str, Any], xdrl: dict[str, Any]) -> None:
    """Raise unless both sides emulate the same frames per agent step (within
    :data:`SAME_WORK`: reset no-ops are random) with the same sticky actions."""
    a, b = sb3["frames_per_agent_step"], xdrl["frames_per_agent_step"]
    if abs(a - b) > SAME_WORK * min(a, b) or (
        sb3["repeat_action_probability"] != xdrl["repeat_action_probability"]
    ):
        raise RuntimeError(
            f"SB3 and xdrl do different work per agent step: SB3 {a:.2f} frames, sticky actions "
            f"{sb3['repeat_action_probability']}; xdrl {b:.2f} frames, sticky actions "
            f"{xdrl['repeat_action_probability']}"
        )


def checked_work(options: Options) -> dict[str, Any]:
    """Both sides' measured work per agent step on :data:`ENV_ID` (SB3's through its driver's
    ``atari-work``), after :func:`same_work` accepted it."""
    sb3 = c.sb3(
        options.sb3_python, "atari-work", 0, "--env-id", ENV_ID, "--frames", str(PROBE_STEPS)
    )
    work = {"sb3": sb3, "xdrl": xdrl_work(["experiment=atari_ppo", f"env.id={ENV_ID}"])}
    same_work(work["sb3"], work["xdrl"])
    return work


def run(options: Options, seeds: list[int]) -> dict[str, Any]:
    c.check_sb3_venv(options.sb3_python, "ale_py", "cv2")  # SB3's AtariWrapper needs OpenCV
    steps = 2_048 if options.quick else 8_192  # agent steps: 2 or 8 batches of 8 envs x 128
    common = [
        "experiment=atari_ppo",
        f"env.id={ENV_ID}",
        f"total_frames={4 * steps}",
        "num_threads=2",
        "eval=none",
        "logging=none",
    ]
    sb3_args = ["--frames", str(steps), "--threads", "2"]
    work = checked_work(options)
    rows = []
    for seed in seeds:
        contenders: dict[str, Callable[..., Any]] = {
            "sb3": lambda s=seed: c.sb3(options.sb3_python, "atari", s, *sb3_args)[
                "frames_per_second"
            ],
            "xdrl": lambda s=seed: c.xdrl(common, s)["frames_per_second"],
            "xdrl_bf16": lambda s=seed: c.xdrl([*common, "precision=bf16"], s)["frames_per_second"],
        }
        add_baseline(contenders, options, common, seed)
        rows.append(_row(seed, alternated(contenders, seed, options.reps)))
        print(f"  atari seed {seed}: {rows[-1]}", flush=True)
    return {
        "agent_steps": steps,
        "emulated_work": work,
        "runs": rows,
        **medians(rows, "xdrl_bf16_fps", "bf16_ratio", *baseline_keys(rows)),
        "workload": "Breakout, RL-Zoo atari PPO: 8 envs x 128 steps, 4 epochs x 4 minibatches, "
        f"Nature CNN, {steps} agent steps ({4 * steps} frames)",
    }


def _row(seed: int, fps: dict[str, float]) -> dict[str, Any]:
    return {
        **sb3_xdrl_row(seed, fps),
        "xdrl_bf16_fps": fps["xdrl_bf16"],
        "bf16_ratio": fps["xdrl_bf16"] / fps["sb3"],
    }


def rows(a: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
    return [
        row(
            f"Atari PPO frames/s (Breakout, RL-Zoo atari settings, {a['agent_steps']} agent "
            f"steps, {_work(a)}, 2 threads each; xdrl at its default fp32, precision=bf16 in "
            "brackets)",
            fmt(a["sb3_fps"], 0),
            f"{fmt(a['xdrl_fps'], 0)} ({fmt(a.get('xdrl_bf16_fps'), 0)})",
            f"{fmt(a['ratio'])} ({fmt(a.get('bf16_ratio'))})",
            check(targets, "ratio", a["ratio"]),
        ),
        *baseline_rows("Atari", a),
    ]


def _work(a: dict[str, Any]) -> str:
    """What each side emulated per agent step, as measured before the timing."""
    work = a.get("emulated_work")
    if not work:
        return "work per agent step not measured"
    return (
        f"emulator frames per agent step measured: SB3 {work['sb3']['frames_per_agent_step']:.2f}, "
        f"xdrl {work['xdrl']['frames_per_agent_step']:.2f}, sticky actions "
        f"{work['xdrl']['repeat_action_probability'][0]}"
    )
