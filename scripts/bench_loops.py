"""Reference PPO loops for ``scripts/bench.py``: the same CartPole workload as xdrl and SB3.

Two loops, each run in its own process by the benchmark and timed the same way (collection and
training, no evaluation):

- ``torchrl``: a bare TorchRL loop written the way TorchRL's PPO tutorial writes it (``SerialEnv``
  of ``GymEnv``, ``Collector``, ``GAE`` once per batch, replay-buffer minibatches,
  ``ClipPPOLoss``, ``Adam``), without a Trainer or any hooks.
- ``torch``: a hand-written PyTorch + gymnasium loop with no RL library at all; it is the floor
  any TorchRL-based launcher can approach on this machine, not a competitor.
- ``sac-torch``: the same floor for SAC on Pendulum-v1 (1 env, UTD 1, batch 256, 256x256 nets,
  ``--warmup`` random frames first), the workload of the benchmark's SAC mode.

Usage: ``python scripts/bench_loops.py torchrl --seed 0 --frames 10240`` prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

ENVS, STEPS, EPOCHS, GAMMA, LMBDA, LR, CLIP, MAX_GRAD = 8, 32, 20, 0.98, 0.8, 1e-3, 0.2, 0.5
BATCH = ENVS * STEPS


def _mlp(n_in: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_out)
    )


def torchrl_loop(seed: int, frames: int) -> float:
    """The TorchRL tutorial's PPO loop; returns frames/s."""
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
    from torchrl.envs import (
        Compose,
        GymEnv,
        InitTracker,
        RewardSum,
        SerialEnv,
        StepCounter,
        TransformedEnv,
    )
    from torchrl.modules import ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    torch.manual_seed(seed)
    env = TransformedEnv(
        SerialEnv(ENVS, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True)),
        Compose(StepCounter(), RewardSum(), InitTracker()),
    )
    env.set_seed(seed)
    actor = ProbabilisticActor(
        TensorDictModule(_mlp(4, 2), in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        distribution_class=torch.distributions.Categorical,
        spec=env.action_spec,
        return_log_prob=True,
    )
    critic = ValueOperator(_mlp(4, 1), in_keys=["observation"])
    loss = ClipPPOLoss(
        actor, critic, clip_epsilon=CLIP, entropy_bonus=False, critic_coeff=0.5,
        loss_critic_type="l2", normalize_advantage=True,
    )  # fmt: skip
    gae = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, average_gae=False)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(BATCH), sampler=SamplerWithoutReplacement(), batch_size=BATCH
    )
    optim = torch.optim.Adam(loss.parameters(), lr=LR, eps=1e-5)
    collector = Collector(env, actor, frames_per_batch=BATCH, total_frames=frames)
    start = time.perf_counter()
    for batch in collector:
        with torch.no_grad():
            gae(batch)
        buffer.extend(batch.reshape(-1))
        for _ in range(EPOCHS):
            sub = buffer.sample()
            out = loss(sub)
            total = out["loss_objective"] + out["loss_critic"]
            optim.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(loss.parameters(), MAX_GRAD)
            optim.step()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return frames / elapsed


def torch_loop(seed: int, frames: int) -> float:
    """Plain PyTorch PPO on a gymnasium SyncVectorEnv (same workload); returns frames/s."""
    import gymnasium as gym

    torch.manual_seed(seed)
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(ENVS)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    actor, critic = _mlp(4, 2), _mlp(4, 1)
    params = [*actor.parameters(), *critic.parameters()]
    optim = torch.optim.Adam(params, lr=LR, eps=1e-5)
    obs_np, _ = envs.reset(seed=seed)
    obs = torch.as_tensor(obs_np)
    start = time.perf_counter()
    for _ in range(frames // BATCH):
        obs_buf, act_buf, logp_buf = [], [], []
        rew_buf, term_buf, done_buf, next_buf = [], [], [], []
        with torch.no_grad():
            for _ in range(STEPS):
                dist = torch.distributions.Categorical(logits=actor(obs))
                action = dist.sample()
                obs_buf.append(obs)
                act_buf.append(action)
                logp_buf.append(dist.log_prob(action))
                next_np, rew, term, trunc, info = envs.step(action.numpy())
                done = term | trunc
                final = next_np.copy()
                if done.any():
                    final[done] = info["final_obs"][done].tolist()
                next_buf.append(torch.as_tensor(final))
                rew_buf.append(torch.as_tensor(rew, dtype=torch.float32))
                term_buf.append(torch.as_tensor(term))
                done_buf.append(torch.as_tensor(done))
                obs = torch.as_tensor(next_np)
            o, nxt = torch.stack(obs_buf), torch.stack(next_buf)
            values, next_values = critic(o).squeeze(-1), critic(nxt).squeeze(-1)
            rewards, terms = torch.stack(rew_buf), torch.stack(term_buf).float()
            dones = torch.stack(done_buf).float()
            delta = rewards + GAMMA * next_values * (1 - terms) - values
            adv = torch.zeros_like(delta)
            last = torch.zeros(ENVS)
            for t in reversed(range(STEPS)):
                last = delta[t] + GAMMA * LMBDA * (1 - dones[t]) * last
                adv[t] = last
            returns = (adv + values).reshape(-1)
        o, acts = o.reshape(-1, 4), torch.stack(act_buf).reshape(-1)
        old_logp, adv = torch.stack(logp_buf).reshape(-1), adv.reshape(-1)
        for _ in range(EPOCHS):
            logp = torch.log_softmax(actor(o), -1).gather(-1, acts[:, None]).squeeze(-1)
            ratio = (logp - old_logp).exp()
            norm_adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            policy_loss = -torch.min(ratio * norm_adv, ratio.clamp(1 - CLIP, 1 + CLIP) * norm_adv)
            value_loss = 0.5 * (critic(o).squeeze(-1) - returns).pow(2)
            total = policy_loss.mean() + value_loss.mean()
            optim.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(params, MAX_GRAD)
            optim.step()
    elapsed = time.perf_counter() - start
    envs.close()
    return frames / elapsed


def sac_torch_loop(seed: int, frames: int, warmup: int) -> float:
    """Plain PyTorch SAC (twin Q, learned temperature, Polyak targets); returns frames/s."""
    import copy

    import gymnasium as gym

    torch.manual_seed(seed)
    env = gym.make("Pendulum-v1")
    obs_dim, act_dim, batch = 3, 1, 256

    def mlp(n_in: int, n_out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(n_in, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, n_out)
        )

    actor, q1, q2 = mlp(obs_dim, 2 * act_dim), mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    targets = copy.deepcopy(nn.ModuleList([q1, q2]))
    log_alpha = torch.zeros(1, requires_grad=True)
    opt_actor = torch.optim.Adam(actor.parameters(), lr=3e-4)
    opt_q = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-4)
    opt_alpha = torch.optim.Adam([log_alpha], lr=3e-4)
    storage = {
        "obs": torch.zeros(frames, obs_dim),
        "act": torch.zeros(frames, act_dim),
        "rew": torch.zeros(frames, 1),
        "next": torch.zeros(frames, obs_dim),
        "term": torch.zeros(frames, 1),
    }

    def sample(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = actor(obs).chunk(2, -1)
        dist = torch.distributions.Normal(mean, log_std.clamp(-20, 2).exp())
        u = dist.rsample()
        action = torch.tanh(u)
        log_prob = dist.log_prob(u) - torch.log(1 - action.pow(2) + 1e-6)
        return action * 2.0, log_prob.sum(-1, keepdim=True)

    obs_np, _ = env.reset(seed=seed)
    start = time.perf_counter()
    for step in range(frames):
        obs = torch.as_tensor(obs_np, dtype=torch.float32)
        if step < warmup:
            action = torch.as_tensor(env.action_space.sample())
        else:
            with torch.no_grad():
                action = sample(obs[None])[0][0]
        next_np, rew, term, trunc, _ = env.step(action.numpy())
        for key, value in zip(storage, (obs, action, rew, next_np, term), strict=True):
            storage[key][step] = torch.as_tensor(value, dtype=torch.float32)
        obs_np = env.reset()[0] if term or trunc else next_np
        if step < warmup:
            continue
        idx = torch.randint(0, step + 1, (batch,))
        o, a, r, n, d = (storage[key][idx] for key in storage)
        alpha = log_alpha.exp()
        with torch.no_grad():
            next_action, next_log_prob = sample(n)
            x = torch.cat([n, next_action], -1)
            target_q = torch.min(targets[0](x), targets[1](x)) - alpha * next_log_prob
            y = r + 0.99 * (1 - d) * target_q
        x = torch.cat([o, a], -1)
        q_loss = 0.5 * ((q1(x) - y).pow(2).mean() + (q2(x) - y).pow(2).mean())
        opt_q.zero_grad()
        q_loss.backward()
        opt_q.step()
        new_action, log_prob = sample(o)
        x = torch.cat([o, new_action], -1)
        actor_loss = (alpha.detach() * log_prob - torch.min(q1(x), q2(x))).mean()
        opt_actor.zero_grad()
        actor_loss.backward()
        opt_actor.step()
        alpha_loss = -(log_alpha * (log_prob.detach() - act_dim)).mean()
        opt_alpha.zero_grad()
        alpha_loss.backward()
        opt_alpha.step()
        with torch.no_grad():
            for param, target in zip(
                [*q1.parameters(), *q2.parameters()], targets.parameters(), strict=True
            ):
                target.lerp_(param, 0.005)
    elapsed = time.perf_counter() - start
    env.close()
    return frames / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loop", choices=["torchrl", "torch", "sac-torch"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=10_240)
    parser.add_argument("--warmup", type=int, default=512, help="sac-torch: random frames first")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.loop == "sac-torch":
        fps = sac_torch_loop(args.seed, args.frames, args.warmup)
    else:
        fps = (torchrl_loop if args.loop == "torchrl" else torch_loop)(args.seed, args.frames)
    print(json.dumps({"loop": args.loop, "frames_per_second": fps}))


if __name__ == "__main__":
    main()
