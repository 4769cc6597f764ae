"""SB3 side of the benchmark harness (benchmarks/); runs with .venv-sb3's python (make bench-venv).

Prints one JSON line: frames/s (evaluation excluded), time to the first deterministic eval mean
>= 475 (also as wall time from ``--launched-at``, the parent's clock at process start, imports
included), evaluation time, peak RSS. Workloads are RL-Zoo's: PPO CartPole-v1 (8 envs x 32 steps,
batch 256, 20 epochs, GAE 0.98/0.8, lr and clip linear from 1e-3 / 0.2), SAC and TD3 Pendulum-v1
(SB3's defaults, UTD 1), DQN CartPole-v1 (RL-Zoo's settings), PPO on Atari (``atari``:
RL-Zoo's ``atari`` hyperparameters; needs ale-py and OpenCV) and sb3-contrib's RecurrentPPO on
CartPole without velocity (``recurrent``: RL-Zoo's ``ppo_lstm`` CartPoleNoVel settings).

``sac``, ``td3`` and ``dqn`` with ``--preset <name>`` run RL-Zoo's settings for that xdrl preset
instead (``scripts/rl_zoo_settings.py``, which ``tests/test_rl_zoo_presets.py`` checks against
``conf/experiment/<name>.yaml``), e.g. ``td3 --preset hopper_td3 --frames 100000 --final-eval 10``
beside ``xdrl-train experiment=hopper_td3 total_frames=100000``; the JSON line then names the env
id and time limit the SB3 model trained and was evaluated on, read from its envs.
"""

from __future__ import annotations

import time

PROCESS_START = time.time()  # before the imports: time-to-475 counts them

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from rl_zoo_settings import SETTINGS  # noqa: E402  (scripts/, beside this file)
from stable_baselines3 import DQN, PPO, SAC, TD3  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.noise import NormalActionNoise  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

MODES = (
    "ppo-throughput",
    "time-to-475",
    "eval",
    "sac",
    "td3",
    "dqn",
    "atari",
    "atari-work",
    "recurrent",
)


def linear(start: float):
    return lambda progress: progress * start


class EvalTimer(BaseCallback):
    """Evaluate every ``interval`` frames (20 deterministic episodes); time it separately."""

    def __init__(self, eval_env, interval: int, episodes: int, threshold: float) -> None:
        super().__init__()
        self.eval_env, self.interval, self.episodes = eval_env, interval, episodes
        self.threshold = threshold
        self.eval_time = 0.0
        self.start = time.perf_counter()
        self.next_eval = interval
        self.hit: dict | None = None
        self.evals: list[dict] = []

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return True
        self.next_eval += self.interval
        t0 = time.perf_counter()
        mean, _std = evaluate_policy(
            self.model, self.eval_env, n_eval_episodes=self.episodes, deterministic=True
        )
        elapsed = time.perf_counter() - t0
        self.eval_time += elapsed
        train_time = time.perf_counter() - self.start - self.eval_time
        self.evals.append(
            {
                "frames": self.num_timesteps,
                "mean": float(mean),
                "train_time_s": train_time,
                "eval_time_s": elapsed,
            }
        )
        if mean >= self.threshold and self.hit is None:
            self.hit = {**self.evals[-1], "wall_time": time.time()}
            return False  # stop: the mark is reached
        return True


def ppo(seed: int, n_envs: int = 8) -> PPO:
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)
    return PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=32 * n_envs,  # whole-batch steps, 256 at RL-Zoo's 8 envs
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=seed,
        device="cpu",
        verbose=0,
    )


def _no_velocity(env: gym.Env) -> gym.Env:
    """CartPole with entries 1 and 3 (the velocities) zeroed, as xdrl's
    ``env.mask_observations=[1,3]`` (same observation size)."""

    def zero(obs: np.ndarray) -> np.ndarray:
        out = obs.copy()
        out[[1, 3]] = 0
        return out

    return gym.wrappers.TransformObservation(env, zero, env.observation_space)


def recurrent_ppo(seed: int):
    """RL-Zoo's ``ppo_lstm`` CartPoleNoVel: 8 envs x 32 steps, batch 256, 20 epochs, GAE
    0.98/0.8, lr and clip linear from 1e-3 / 0.2, VecNormalize, LSTM 64 in actor and critic,
    ``net_arch`` [64] each, ReLU, no orthogonal init."""
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    cartpole = make_vec_env("CartPole-v1", n_envs=8, seed=seed, wrapper_class=_no_velocity)
    env = VecNormalize(cartpole, gamma=0.98)  # RL-Zoo passes the algorithm's gamma
    return RecurrentPPO(
        "MlpLstmPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        policy_kwargs=dict(
            ortho_init=False,
            activation_fn=nn.ReLU,
            lstm_hidden_size=64,
            enable_critic_lstm=True,
            net_arch=dict(pi=[64], vf=[64]),
        ),
        seed=seed,
        device="cpu",
        verbose=0,
    )


def recurrent_final_eval(model, seed: int, episodes: int) -> tuple[float, float]:
    """Deterministic episodes of a trained :func:`recurrent_ppo` on a fresh env whose
    ``VecNormalize`` holds the training statistics, frozen (``evaluate_policy`` resets the LSTM
    state at each episode start)."""
    from stable_baselines3.common.vec_env import VecNormalize

    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed + 10_000, wrapper_class=_no_velocity)
    eval_env = VecNormalize(env, training=False, norm_reward=False)
    eval_env.obs_rms = model.get_env().obs_rms
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
    return float(mean), float(std)


def atari_env(seed: int, env_id: str, n_envs: int = 8):
    """RL-Zoo's Atari envs: ``make_atari_env`` (SB3's ``AtariWrapper``: 4 emulator frames per
    agent step, max-pooled) and a 4-frame stack. ``frameskip=1`` turns the ALE's own skip off:
    ``-v5`` ids skip 4 frames inside the emulator, and ``AtariWrapper`` would skip 4 of those
    steps again (16 frames per agent step, 4x xdrl's work); ``NoFrameskip-v4`` ids have it off
    already. Sticky actions keep the id's default (0.25 on ``-v5``), as xdrl's ``atari`` env."""
    import ale_py
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    env = make_atari_env(env_id, n_envs=n_envs, seed=seed, env_kwargs={"frameskip": 1})
    return VecFrameStack(env, n_stack=4)


def emulated_work(vec_env, agent_steps: int, seed: int = 0) -> dict:
    """Emulator frames per agent step and sticky-action probability, read from the games' own
    ALE (frame counters over ``agent_steps`` random steps of every game, resets included): the
    benchmark compares SB3 and xdrl only where both emulate the same frames."""
    ales = [game.unwrapped.ale for game in vec_env.unwrapped.envs]
    vec_env.action_space.seed(seed)
    vec_env.reset()
    before = sum(ale.getFrameNumber() for ale in ales)
    for _ in range(agent_steps):
        vec_env.step(np.array([vec_env.action_space.sample() for _ in ales]))
    frames = sum(ale.getFrameNumber() for ale in ales) - before
    return {
        "frames_per_agent_step": frames / (agent_steps * len(ales)),
        "repeat_action_probability": sorted(
            {ale.getFloat("repeat_action_probability") for ale in ales}
        ),
    }


def atari_ppo(seed: int, env_id: str) -> PPO:
    """RL-Zoo's ``atari`` PPO: :func:`atari_env`, 8 envs x 128 steps, 4 epochs of 256,
    lr 2.5e-4 and clip 0.1 linear, entropy 0.01, value 0.5 (CnnPolicy: Nature CNN)."""
    env = atari_env(seed, env_id)
    return PPO(
        "CnnPolicy",
        env,
        n_steps=128,
        n_epochs=4,
        batch_size=256,
        learning_rate=linear(2.5e-4),
        clip_range=linear(0.1),
        vf_coef=0.5,
        ent_coef=0.01,
        seed=seed,
        device="cpu",
        verbose=0,
    )


def sac(
    seed: int,
    n_envs: int,
    train_freq: int,
    gradient_steps: int,
    learning_starts: int,
    env_id: str = "Pendulum-v1",
) -> SAC:
    """SB3's SAC defaults (RL-Zoo's HalfCheetah settings are these with 10k learning starts)."""
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    return SAC(
        "MlpPolicy",
        env,
        learning_rate=3e-4,
        buffer_size=1_000_000,
        batch_size=256,
        learning_starts=learning_starts,
        train_freq=train_freq,
        gradient_steps=gradient_steps,
        policy_kwargs={"net_arch": [256, 256]},
        seed=seed,
        device="cpu",
        verbose=0,
    )


def td3(seed: int, learning_starts: int) -> TD3:
    """SB3's TD3 defaults on Pendulum ([400, 300], batch 256, UTD 1, policy delay 2, target
    noise 0.2 clipped at 0.5) with Gaussian exploration noise 0.1 of the action half-range, as
    xdrl (SB3 adds it to the action scaled to [-1, 1])."""
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    return TD3(
        "MlpPolicy",
        env,
        learning_starts=learning_starts,
        action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
        seed=seed,
        device="cpu",
        verbose=0,
    )


def rl_zoo(mode: str, preset: str, seed: int, learning_starts: int | None):
    """SB3's ``mode`` model with RL-Zoo's settings for the xdrl ``preset``
    (``rl_zoo_settings.SETTINGS``): one env of the preset's id, SB3's constructor arguments as
    written there, RL-Zoo's normal action noise for TD3 (its std in SB3's [-1, 1] action
    scale); ``learning_starts`` (not None) replaces RL-Zoo's."""
    entry = SETTINGS[preset]
    if entry["algo"] != mode:
        raise SystemExit(f"bench_sb3: --preset {preset} is {entry['algo']}, not {mode}")
    kwargs = dict(entry["kwargs"])
    if learning_starts is not None:
        kwargs["learning_starts"] = learning_starts
    env = make_vec_env(entry["env_id"], n_envs=1, seed=seed)
    if entry.get("noise_type") == "normal":
        n = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n), entry["noise_std"] * np.ones(n))
    algo = {"sac": SAC, "td3": TD3, "dqn": DQN}[mode]
    return algo("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)


def time_limit(env: gym.Env) -> int | None:
    """The step limit of the ``TimeLimit`` wrapper in ``env``'s chain (None: none)."""
    while True:
        if isinstance(env, gym.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        if not isinstance(env, gym.Wrapper):
            return None
        env = env.env


def env_facts(vec_env) -> dict:
    """The id and time limit of the first env of an SB3 ``DummyVecEnv``, read from the env."""
    env = vec_env.envs[0]
    return {"env_id": env.spec.id, "max_episode_steps": time_limit(env)}


def dqn(seed: int) -> DQN:
    """RL-Zoo's CartPole DQN settings."""
    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
    return DQN(
        "MlpPolicy",
        env,
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1_000,
        gamma=0.99,
        target_update_interval=10,
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        policy_kwargs={"net_arch": [256, 256]},
        seed=seed,
        device="cpu",
        verbose=0,
    )


def eval_time(seed: int, train_frames: int, episodes: int, weights_out: str | None) -> dict:
    """Train PPO briefly, then time evaluate_policy on 1-env and ``episodes``-env eval envs."""
    model = ppo(seed)
    model.learn(train_frames)
    out: dict = {}
    for n in (1, episodes):
        eval_env = DummyVecEnv([lambda: gym.make("CartPole-v1")] * n)
        eval_env.seed(seed + 10_000)
        evaluate_policy(model, eval_env, n_eval_episodes=2, deterministic=True)  # warm-up
        t0 = time.perf_counter()
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
        out[f"eval_time_s_{n}env"] = time.perf_counter() - t0
        out[f"eval_mean_{n}env"] = float(mean)
    if weights_out:
        policy = model.policy
        layers = [m for m in policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
        layers.append(policy.action_net)
        torch.save(
            [(m.weight.detach().clone(), m.bias.detach().clone()) for m in layers], weights_out
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--env-id", default="ALE/Breakout-v5", help="atari: the game")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=50_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-interval", type=int, default=5_000)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--weights-out", default=None)
    parser.add_argument("--envs", type=int, default=8, help="PPO envs (x 32 frames per batch)")
    parser.add_argument(
        "--launched-at", type=float, default=None, help="time-to-475: parent's time.time()"
    )
    parser.add_argument("--sac-envs", type=int, default=1)
    parser.add_argument("--sac-env-id", default="Pendulum-v1", help="sac: the env")
    parser.add_argument(
        "--final-eval",
        type=int,
        default=0,
        help="sac, td3, dqn, recurrent: final deterministic episodes",
    )
    parser.add_argument(
        "--learning-starts", type=int, default=None, help="default: 1,000 (--preset: RL-Zoo's)"
    )
    parser.add_argument(
        "--preset",
        choices=sorted(SETTINGS),
        default=None,
        help="sac, td3, dqn: RL-Zoo's settings for this xdrl preset (scripts/rl_zoo_settings.py)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    np.random.seed(args.seed)
    result: dict = {"framework": "sb3", "mode": args.mode, "seed": args.seed}
    if args.mode in ("ppo-throughput", "recurrent"):
        model = recurrent_ppo(args.seed) if args.mode == "recurrent" else ppo(args.seed, args.envs)
        t0 = time.perf_counter()
        model.learn(args.frames)
        elapsed = time.perf_counter() - t0
        result.update(
            frames=model.num_timesteps,
            train_time_s=elapsed,
            frames_per_second=model.num_timesteps / elapsed,
        )
        if args.final_eval and args.mode == "recurrent":
            mean, std = recurrent_final_eval(model, args.seed, args.final_eval)
            result.update(final_eval_mean=mean, final_eval_std=std)
    elif args.mode == "time-to-475":
        model = ppo(args.seed)
        eval_env = DummyVecEnv([lambda: gym.make("CartPole-v1")])
        eval_env.seed(args.seed + 10_000)
        timer = EvalTimer(eval_env, args.eval_interval, args.episodes, 475.0)
        timer.start = time.perf_counter()
        model.learn(args.frames, callback=timer)
        launched = args.launched_at if args.launched_at is not None else PROCESS_START
        result.update(
            time_to_475_wall_s=timer.hit["wall_time"] - launched if timer.hit else None,
            hit=timer.hit,
            evals=timer.evals,
            time_to_475_s=timer.hit["train_time_s"] if timer.hit else None,
            frames_to_475=timer.hit["frames"] if timer.hit else None,
        )
    elif args.mode == "atari-work":  # what one agent step emulates, before any timing
        result.update(emulated_work(atari_env(args.seed, args.env_id), args.frames, args.seed))
    elif args.mode == "atari":  # agent steps; frames = 4 x agent steps (AtariWrapper's skip)
        model = atari_ppo(args.seed, args.env_id)
        t0 = time.perf_counter()
        model.learn(args.frames)
        elapsed = time.perf_counter() - t0
        result.update(
            agent_steps=model.num_timesteps,
            train_time_s=elapsed,
            agent_steps_per_second=model.num_timesteps / elapsed,
            frames_per_second=4 * model.num_timesteps / elapsed,
        )
    elif args.mode == "eval":
        result.update(eval_time(args.seed, args.frames, args.episodes, args.weights_out))
    else:  # off-policy: throughput, or a preset's RL-Zoo settings
        starts = args.learning_starts if args.learning_starts is not None else 1_000
        env_id = args.sac_env_id if args.mode == "sac" else None
        if args.preset is not None:
            model = rl_zoo(args.mode, args.preset, args.seed, args.learning_starts)
            env_id = SETTINGS[args.preset]["env_id"]
            result["preset"] = args.preset
        elif args.mode == "td3":
            model = td3(args.seed, starts)
        elif args.mode == "dqn":
            model = dqn(args.seed)
        else:  # sac: UTD 1, one gradient step per env step
            model = sac(
                args.seed,
                args.sac_envs,
                train_freq=1,
                gradient_steps=args.sac_envs,
                learning_starts=starts,
                env_id=args.sac_env_id,
            )
        result.update(learning_starts=model.learning_starts, **env_facts(model.get_env()))
        t0 = time.perf_counter()
        model.learn(args.frames)
        elapsed = time.perf_counter() - t0
        result.update(
            frames=model.num_timesteps,
            train_time_s=elapsed,
            frames_per_second=model.num_timesteps / elapsed,
        )
        if args.final_eval and env_id is not None:
            eval_env = make_vec_env(env_id, n_envs=1, seed=args.seed + 10_000)
            returns, lengths = evaluate_policy(
                model, eval_env, args.final_eval, deterministic=True, return_episode_rewards=True
            )
            eval_facts = env_facts(eval_env)
            result.update(
                final_eval_mean=float(np.mean(returns)),
                final_eval_std=float(np.std(returns)),
                final_eval_returns=[float(r) for r in returns],
                final_eval_lengths=[int(n) for n in lengths],
                eval_env_id=eval_facts["env_id"],
                eval_max_episode_steps=eval_facts["max_episode_steps"],
            )
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main()
