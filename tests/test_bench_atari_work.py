"""The Atari benchmark compares like with like: SB3's envs (scripts/bench_sb3.py) and xdrl's emulate
the same frames per agent step with the same sticky actions, read from the games' own ALE."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benchmarks.modes import atari

pytest.importorskip("ale_py")
REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "scripts" / "bench_sb3.py"


def _sb3_driver(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    pytest.importorskip("stable_baselines3")
    monkeypatch.syspath_prepend(str(DRIVER.parent))  # its sibling rl_zoo_settings.py
    spec = importlib.util.spec_from_file_location("bench_sb3", DRIVER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_xdrl_atari_ppo_emulates_four_frames_per_agent_step_with_sticky_actions() -> None:
    work = atari.xdrl_work(["experiment=atari_ppo", "env.id=ALE/Breakout-v5"])
    # 4 frames per step, plus the reset no-ops (at most 30 frames per reset)
    assert 4.0 <= work["frames_per_agent_step"] < 5.0
    assert work["repeat_action_probability"] == [0.25]


def test_sb3_side_emulates_what_xdrl_does_and_the_old_construction_did_four_times_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``atari_env`` turns the ALE's own skip off; ``make_atari_env`` on the ``-v5`` id as the
    harness called it before skipped 4 x 4 frames per agent step."""
    driver = _sb3_driver(monkeypatch)
    from stable_baselines3.common.env_util import make_atari_env

    ours = driver.emulated_work(driver.atari_env(0, "ALE/Breakout-v5"), atari.PROBE_STEPS)
    xdrl = atari.xdrl_work(["experiment=atari_ppo", "env.id=ALE/Breakout-v5"])
    atari.same_work(ours, xdrl)
    assert 4.0 <= ours["frames_per_agent_step"] < 5.0
    assert ours["repeat_action_probability"] == [0.25]

    old = driver.emulated_work(make_atari_env("ALE/Breakout-v5", n_envs=8, seed=0), 64)
    assert old["frames_per_agent_step"] >= 16.0
    with pytest.raises(RuntimeError, match=r"different work per agent step: SB3 (1[6-9]|2[0-9])\."):
        atari.same_work(old, xdrl)


def test_the_driver_reports_the_work_as_one_json_line() -> None:
    """The harness reads ``bench_sb3.py atari-work``'s last stdout line."""
    pytest.importorskip("stable_baselines3")
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "atari-work", "--frames", "16", "--env-id", "ALE/Pong-v5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    work = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 4.0 <= work["frames_per_agent_step"] < 6.0
    assert work["repeat_action_probability"] == [0.25]


def test_different_sticky_actions_are_different_work() -> None:
    same = {"frames_per_agent_step": 4.2, "repeat_action_probability": [0.25]}
    atari.same_work(same, {**same, "frames_per_agent_step": 4.5})
    with pytest.raises(RuntimeError, match="sticky actions \\[0.0\\]"):
        atari.same_work(same, {**same, "repeat_action_probability": [0.0]})
