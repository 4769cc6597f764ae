"""The presets that reproduce RL-Zoo results set RL-Zoo's values under xdrl's keys, and SB3's side
of a side-by-side run (``scripts/bench_sb3.py --preset``) trains and evaluates on the same env id
and time limit as xdrl, read from both sides' envs.

RL-Zoo's settings are written once, in SB3's terms, in ``scripts/rl_zoo_settings.py``; the
translation to xdrl's keys below is this test's own, one line per RL-Zoo key.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import gymnasium
import pytest
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tests.conftest import REPO, compose_config, load_script

SETTINGS: dict[str, dict[str, Any]] = load_script("rl_zoo_settings").SETTINGS
SB3_PYTHON = REPO / ".venv-sb3" / "bin" / "python"


def _utd(kwargs: dict[str, Any]) -> float:
    """Gradient steps per collected frame (one env): ``gradient_steps`` -1 is one per frame."""
    steps = kwargs["gradient_steps"]
    return 1.0 if steps == -1 else steps / kwargs["train_freq"]


def expected_xdrl(entry: dict[str, Any]) -> dict[str, Any]:
    """xdrl's key -> the value that means RL-Zoo's setting (``entry`` from ``SETTINGS``)."""
    kw = entry["kwargs"]
    utd = _utd(kw)
    out: dict[str, Any] = {
        "env.id": entry["env_id"],
        "env.num_envs": 1,
        "total_frames": entry["n_timesteps"],
        "algorithm.build.gamma": kw["gamma"],
        "algorithm.build.batch_size": kw["batch_size"],
        "algorithm.build.buffer_size": kw["buffer_size"],
        "algorithm.build.utd": utd,
        "algorithm.build.activation": "relu",  # SB3's default activation_fn
        "algorithm.optimizer.lr": kw["learning_rate"],
        "algorithm.lr_schedule": "constant",
    }
    if entry["algo"] in ("sac", "td3"):
        arch = kw["policy_kwargs"]["net_arch"]
        out |= {
            "algorithm.build.actor_cells": arch,
            "algorithm.build.critic_cells": arch,
            "algorithm.build.tau": kw["tau"],
            "algorithm.build.loss_function": "l2",  # SB3: MSE of each Q-network
            "algorithm.max_grad_norm": None,  # SB3's SAC and TD3 do not clip
        }
    if entry["algo"] == "sac":
        assert kw["target_update_interval"] == 1  # xdrl moves the targets every step
        assert kw["ent_coef"] == "auto"  # learned, from 1.0
        out |= {
            "algorithm.build.alpha_init": 1.0,
            "algorithm.build.fixed_alpha": False,
            "algorithm.build.target_entropy": kw["target_entropy"],
        }
    if entry["algo"] == "td3":
        assert entry["noise_type"] == "normal"  # xdrl's AdditiveGaussianModule
        out |= {
            "algorithm.build.exploration_noise": entry["noise_std"],
            "algorithm.build.policy_delay": kw["policy_delay"],
            "algorithm.build.policy_noise": kw["target_policy_noise"],
            "algorithm.build.noise_clip": kw["target_noise_clip"],
        }
    if entry["algo"] == "dqn":
        assert kw["tau"] == 1.0  # a hard copy
        out |= {
            "frames_per_batch": kw["train_freq"],  # one env: train every train_freq frames
            "algorithm.build.q_cells": kw["policy_kwargs"]["net_arch"],
            "algorithm.build.init_random_frames": kw["learning_starts"],
            "algorithm.build.eps_init": kw["exploration_initial_eps"],
            "algorithm.build.eps_end": kw["exploration_final_eps"],
            "algorithm.build.eps_annealing_frames": round(
                kw["exploration_fraction"] * entry["n_timesteps"]
            ),
            "algorithm.build.target_update": "hard",
            # SB3 copies every target_update_interval frames; xdrl every interval + 1 steps
            "algorithm.build.hard_update_interval": round(kw["target_update_interval"] * utd) - 1,
            "algorithm.build.double_dqn": False,
            "algorithm.build.loss_function": "smooth_l1",  # SB3's DQN: Huber loss
            "algorithm.max_grad_norm": kw["max_grad_norm"],
        }
    return out


def _preset(name: str, tmp_path: Path) -> DictConfig:
    return compose_config([f"experiment={name}"], tmp_path / "run")


def test_every_rl_zoo_entry_is_a_preset() -> None:
    presets = {p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml")}
    assert set(SETTINGS) <= presets
    issue_48 = {"hopper_sac", "walker2d_sac", "hopper_td3", "halfcheetah_td3", "lunarlander_dqn"}
    assert issue_48 <= set(SETTINGS)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_preset_sets_rl_zoos_values_under_xdrls_keys(name: str, tmp_path: Path) -> None:
    cfg = _preset(name, tmp_path)
    entry = SETTINGS[name]
    assert cfg.algorithm.build._target_ == f"xdrl.algorithms.{entry['algo']}.build"
    got = {key: OmegaConf.select(cfg, key) for key in expected_xdrl(entry)}
    got = {k: OmegaConf.to_object(v) if OmegaConf.is_config(v) else v for k, v in got.items()}
    assert got == expected_xdrl(entry)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_warm_up_is_rl_zoos_learning_starts_in_whole_batches(name: str, tmp_path: Path) -> None:
    """The first gradient step comes after the first whole batch at or past learning_starts."""
    cfg = _preset(name, tmp_path)
    starts = SETTINGS[name]["kwargs"]["learning_starts"]
    batch = cfg.frames_per_batch
    assert cfg.algorithm.build.init_random_frames == math.ceil(starts / batch) * batch


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_evaluation_is_ten_deterministic_whole_episodes(name: str, tmp_path: Path) -> None:
    cfg = _preset(name, tmp_path)
    limit = gymnasium.spec(SETTINGS[name]["env_id"]).max_episode_steps
    assert (cfg.eval.episodes, cfg.eval.deterministic) == (10, True)
    assert cfg.eval.max_steps >= limit  # no evaluation episode is cut short of the env's limit


def _simulator(env_id: str) -> str:
    """The module an env id needs (MuJoCo or Box2D)."""
    return "mujoco" if ".mujoco." in str(gymnasium.spec(env_id).entry_point) else "Box2D"


def time_limit(env: gymnasium.Env) -> int | None:
    """The step limit of the ``TimeLimit`` wrapper in ``env``'s chain (None: none)."""
    while not isinstance(env, gymnasium.wrappers.TimeLimit):
        if not isinstance(env, gymnasium.Wrapper):
            return None
        env = env.env
    return int(env._max_episode_steps)


def xdrl_env_facts(cfg: DictConfig) -> dict[str, Any]:
    """The id and time limit of the gymnasium envs xdrl trains and evaluates on for ``cfg``,
    built as ``xdrl-train`` builds them (every sub-env of each must agree)."""
    factory = instantiate(cfg.env)
    train = factory(seed=0)
    evaluation = factory(num_envs=cfg.eval.episodes, seed=0, evaluation=True)
    facts = {}
    for role, env in (("train", train), ("eval", evaluation)):
        subs = env.base_env._envs  # VectorGymEnv: the gymnasium envs themselves
        seen = {(e.spec.id, time_limit(e)) for e in subs}
        assert len(seen) == 1, seen
        facts[role] = dict(zip(("env_id", "max_episode_steps"), seen.pop(), strict=True))
        env.close()
    return facts


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_xdrl_trains_and_evaluates_on_the_entrys_env_and_time_limit(
    name: str, tmp_path: Path
) -> None:
    env_id = SETTINGS[name]["env_id"]
    pytest.importorskip(_simulator(env_id))
    cfg = _preset(name, tmp_path)
    expected = {"env_id": env_id, "max_episode_steps": gymnasium.spec(env_id).max_episode_steps}
    assert xdrl_env_facts(cfg) == {"train": expected, "eval": expected}


@pytest.mark.skipif(not SB3_PYTHON.exists(), reason="no .venv-sb3 (make bench-venv)")
@pytest.mark.parametrize("name", ["hopper_sac", "hopper_td3"])
def test_sb3_side_runs_the_same_env_id_and_time_limit_as_xdrl(name: str, tmp_path: Path) -> None:
    """A few SB3 frames and one evaluation episode: the env facts its JSON line reads from the
    SB3 model's envs are xdrl's, read from xdrl's envs."""
    pytest.importorskip("mujoco")
    entry = SETTINGS[name]
    cmd = [str(SB3_PYTHON), str(REPO / "scripts" / "bench_sb3.py"), entry["algo"]]
    cmd += ["--preset", name, "--frames", "8", "--final-eval", "1", "--seed", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    facts = xdrl_env_facts(_preset(name, tmp_path))
    assert out["learning_starts"] == entry["kwargs"]["learning_starts"]
    assert {k: out[k] for k in ("env_id", "max_episode_steps")} == facts["train"]
    assert {"env_id": out["eval_env_id"], "max_episode_steps": out["eval_max_episode_steps"]} == (
        facts["eval"]
    )
