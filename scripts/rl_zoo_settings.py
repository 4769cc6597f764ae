"""RL-Zoo's settings for the xdrl presets that reproduce its results, written once, in SB3's terms.

``scripts/bench_sb3.py --preset <name>`` builds SB3's model from these (its side of a
side-by-side run); ``tests/test_rl_zoo_presets.py`` checks that each xdrl preset
(``conf/experiment/<name>.yaml``) sets the same values under xdrl's keys, so the two sides cannot
drift apart. Plain data, no imports: both SB3's venv and xdrl's read it.

Each entry: the SB3 ``algo``, the gymnasium ``env_id`` both sides run (RL-Zoo ran ``-v3``
MuJoCo ids and ``LunarLander-v2``; gymnasium 1.4 has ``-v5`` and ``LunarLander-v3``),
``n_timesteps``, the SB3 constructor ``kwargs`` (RL-Zoo's ``hyperparams/<algo>.yml`` entry with
SB3's defaults written out, so every value the comparison rests on is visible) and, for TD3,
RL-Zoo's action noise (``noise_type``, ``noise_std``).
"""

from __future__ import annotations

from typing import Any

# SB3's SAC defaults, which RL-Zoo's MuJoCo SAC entries keep (they set only learning_starts).
_SAC_MUJOCO: dict[str, Any] = {
    "learning_rate": 3e-4,
    "buffer_size": 1_000_000,
    "learning_starts": 10_000,  # RL-Zoo
    "batch_size": 256,
    "tau": 0.005,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 1,
    "ent_coef": "auto",
    "target_update_interval": 1,
    "target_entropy": "auto",
    "policy_kwargs": {"net_arch": [256, 256]},
}

# RL-Zoo's MuJoCo TD3 entries (lr, batch, net_arch, noise, learning_starts) over SB3's defaults.
_TD3_MUJOCO: dict[str, Any] = {
    "learning_rate": 1e-3,  # RL-Zoo
    "buffer_size": 1_000_000,
    "learning_starts": 10_000,  # RL-Zoo
    "batch_size": 256,  # RL-Zoo
    "tau": 0.005,
    "gamma": 0.99,
    "train_freq": 1,  # RL-Zoo
    "gradient_steps": 1,  # RL-Zoo
    "policy_delay": 2,
    "target_policy_noise": 0.2,
    "target_noise_clip": 0.5,
    "policy_kwargs": {"net_arch": [400, 300]},  # RL-Zoo
}

SETTINGS: dict[str, dict[str, Any]] = {
    "halfcheetah_sac": {
        "algo": "sac",
        "env_id": "HalfCheetah-v5",
        "n_timesteps": 1_000_000,
        "kwargs": _SAC_MUJOCO,
    },
    "hopper_sac": {
        "algo": "sac",
        "env_id": "Hopper-v5",
        "n_timesteps": 1_000_000,
        "kwargs": _SAC_MUJOCO,
    },
    "walker2d_sac": {
        "algo": "sac",
        "env_id": "Walker2d-v5",
        "n_timesteps": 1_000_000,
        "kwargs": _SAC_MUJOCO,
    },
    "hopper_td3": {
        "algo": "td3",
        "env_id": "Hopper-v5",
        "n_timesteps": 1_000_000,
        "kwargs": _TD3_MUJOCO,
        "noise_type": "normal",
        "noise_std": 0.1,
    },
    "halfcheetah_td3": {
        "algo": "td3",
        "env_id": "HalfCheetah-v5",
        "n_timesteps": 1_000_000,
        "kwargs": _TD3_MUJOCO,
        "noise_type": "normal",
        "noise_std": 0.1,
    },
    "lunarlander_dqn": {
        "algo": "dqn",
        "env_id": "LunarLander-v3",
        "n_timesteps": 100_000,
        "kwargs": {
            "learning_rate": 6.3e-4,  # RL-Zoo
            "buffer_size": 50_000,  # RL-Zoo
            "learning_starts": 0,  # RL-Zoo
            "batch_size": 128,  # RL-Zoo
            "tau": 1.0,
            "gamma": 0.99,  # RL-Zoo
            "train_freq": 4,  # RL-Zoo
            "gradient_steps": -1,  # RL-Zoo: as many gradient steps as env steps collected
            "target_update_interval": 250,  # RL-Zoo
            "exploration_fraction": 0.12,  # RL-Zoo
            "exploration_initial_eps": 1.0,
            "exploration_final_eps": 0.1,  # RL-Zoo
            "max_grad_norm": 10.0,
            "policy_kwargs": {"net_arch": [256, 256]},  # RL-Zoo
        },
    },
}
