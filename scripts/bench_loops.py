"""Reference PPO loops for ``benchmarks/``: the same CartPole workload as xdrl and SB3.

Two loops, each run in its own process by the benchmark and timed the same way (collection and
training, no evaluation):

- ``torchrl``: a bare TorchRL loop written the way TorchRL's PPO tutorial writes it (``SerialEnv``
  of ``GymEnv``, ``Collector``, ``GAE`` once per batch, replay-buffer minibatches,
  ``ClipPPOLoss``, ``Adam``), without a Trainer or any hooks.
- ``torch``: a lean hand-written PyTorch + gymnasium loop with no RL library at all and the
  maths of xdrl's ``cartpole_ppo`` preset; it is the floor any TorchRL-based launcher can
  approach on this machine, not a competitor. ``--envs N`` scales it (N x 32 frames per batch,
  whole-batch steps); ``--eval`` adds a 20-episode deterministic evaluation after training.
- ``sac-torch``: the same kind of floor for SAC on Pendulum-v1 (1 env, UTD 1, batch 256, 256x256
  nets, ``--warmup`` random frames first) with xdrl's SAC maths, the workload of the
  benchmark's SAC mode.
- ``td3-torch``: the floor for TD3 on Pendulum-v1 with SB3's TD3 defaults ([400, 300] nets,
  policy delay 2) and xdrl's TD3 maths, the workload of the benchmark's TD3 mode.

Usage: ``python scripts/bench_loops.py torchrl --seed 0 --frames 10240`` prints one JSON line;
``python scripts/bench_loops.py torch --frames 40960 --eval`` checks that the floor learns.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Iterator

import numpy as np
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


def _orthogonal(net: nn.Sequential, last_gain: float) -> nn.Sequential:
    """xdrl's PPO init: orthogonal weights (sqrt 2 hidden, ``last_gain`` output), zero biases."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, gain=last_gain if i == len(linears) - 1 else 2**0.5)
        nn.init.zeros_(layer.bias)
    return net


def _vector_cartpole(n: int, same_step: bool = True):
    import gymnasium as gym

    mode = gym.vector.AutoresetMode.SAME_STEP if same_step else gym.vector.AutoresetMode.NEXT_STEP
    return gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(n)], autoreset_mode=mode
    )


def _gae(rew, term, done, values, next_values):
    """GAE (gamma 0.98, lambda 0.8) over [steps, envs] NumPy arrays, once per batch.

    A truncated step bootstraps from the critic's value of its final observation; only a
    terminated one drops the bootstrap, and every episode end cuts the trace (TorchRL's GAE).
    """
    delta = rew + GAMMA * next_values * (1.0 - term) - values
    carry = (GAMMA * LMBDA) * (1.0 - done)
    adv = np.empty_like(delta)
    last = np.zeros(delta.shape[1], dtype=delta.dtype)
    for t in range(delta.shape[0] - 1, -1, -1):
        last = delta[t] + carry[t] * last
        adv[t] = last
    return adv


class _ActorCritic(nn.Module):
    """xdrl's two tanh 64x64 MLPs (actor: 2 logits, critic: 1 value) evaluated together.

    Same networks, same maths, fewer kernels: both first layers are one ``[4, 128]`` matmul,
    the second and third layers one batched matmul each (``[2, 64, 64]``, ``[2, 64, 2]``). The
    critic's output layer is padded to 2 columns; the pad never reaches a loss, so its gradient
    and Adam update stay exactly zero and the global gradient norm is unchanged.
    """

    def __init__(self) -> None:
        super().__init__()
        actor, critic = _orthogonal(_mlp(4, 2), 0.01), _orthogonal(_mlp(4, 1), 1.0)
        (a1, a2, a3), (c1, c2, c3) = (
            [m for m in net if isinstance(m, nn.Linear)] for net in (actor, critic)
        )
        with torch.no_grad():
            self.w1 = nn.Parameter(torch.cat([a1.weight.T, c1.weight.T], 1))
            self.b1 = nn.Parameter(torch.cat([a1.bias, c1.bias]))
            self.w2 = nn.Parameter(torch.stack([a2.weight.T, c2.weight.T]))
            self.b2 = nn.Parameter(torch.stack([a2.bias, c2.bias])[:, None])
            pad = torch.zeros(64, 1)
            self.w3 = nn.Parameter(torch.stack([a3.weight.T, torch.cat([c3.weight.T, pad], 1)]))
            self.b3 = nn.Parameter(torch.stack([a3.bias, torch.cat([c3.bias, pad[0]])])[:, None])

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[N, 2]`` and values ``[N]`` of observations ``[N, 4]``."""
        h = torch.tanh(torch.addmm(self.b1, obs, self.w1))
        h = torch.tanh(torch.baddbmm(self.b2, h.view(-1, 2, 64).transpose(0, 1), self.w2))
        out = torch.baddbmm(self.b3, h, self.w3)
        return out[0], out[1, :, 0]


def torch_loop(
    seed: int, frames: int, envs: int = ENVS, evaluate: bool = False
) -> dict[str, float]:
    """Lean plain PyTorch PPO, xdrl's ``cartpole_ppo`` maths; returns frames/s (+ eval mean).

    Nothing framework-like on the hot path: a gymnasium ``SyncVectorEnv`` (same-step
    autoreset), preallocated NumPy buffers with one ``torch.from_numpy`` per batch, acting under
    ``inference_mode`` with log-softmax + Gumbel-max sampling (no ``torch.distributions``), the
    critic run once per batch, actor and critic evaluated together (``_ActorCritic``), and
    fused Adam. Per batch of ``envs x 32`` frames: GAE once,
    advantages normalized over the batch (= the minibatch), 20 whole-batch steps.
    """
    torch.manual_seed(seed)
    env = _vector_cartpole(envs)
    net = _ActorCritic()
    params = list(net.parameters())
    optim = torch.optim.Adam(params, lr=LR, eps=1e-5, fused=True)
    n = envs * STEPS
    batches = frames // n
    obs_buf = np.empty((STEPS, envs, 4), np.float32)
    next_buf = np.empty((STEPS, envs, 4), np.float32)
    act_buf = np.empty((STEPS, envs), np.int64)
    logp_buf = np.empty((STEPS, envs), np.float32)
    rew_buf = np.empty((STEPS, envs), np.float32)
    term_buf = np.empty((STEPS, envs), np.float32)
    done_buf = np.empty((STEPS, envs), np.float32)
    rows = np.arange(envs)
    obs, _ = env.reset(seed=seed)
    start = time.perf_counter()
    for batch in range(batches):
        # Collection
        with torch.inference_mode():
            for t in range(STEPS):
                obs_buf[t] = obs
                logp = torch.log_softmax(net(torch.from_numpy(obs_buf[t]))[0], -1)
                noise = torch.empty_like(logp).exponential_().log_()
                action = (logp - noise).argmax(-1).numpy()
                act_buf[t] = action
                logp_buf[t] = logp.numpy()[rows, action]
                obs, rew, term, trunc, info = env.step(action)
                done = term | trunc
                next_buf[t] = obs
                if done.any():
                    next_buf[t, done] = info["final_obs"][done].tolist()
                rew_buf[t], term_buf[t], done_buf[t] = rew, term, done
            both = net(torch.from_numpy(np.stack([obs_buf, next_buf]).reshape(-1, 4)))[1]
            both = both.numpy().reshape(2, STEPS, envs)
        adv = _gae(rew_buf, term_buf, done_buf, both[0], both[1])
        ret = torch.from_numpy((adv + both[0]).reshape(-1))
        adv = torch.from_numpy(adv.reshape(-1))
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # the minibatch is the whole batch
        o = torch.from_numpy(obs_buf.reshape(-1, 4))
        acts = torch.from_numpy(act_buf.reshape(-1, 1))
        old_logp = torch.from_numpy(logp_buf.reshape(-1))
        # Optimization
        for group in optim.param_groups:
            group["lr"] = LR * (1 - batch / batches)  # xdrl: LinearLR to 0, stepped per batch
        for _ in range(EPOCHS):
            logits, value = net(o)
            logp = torch.log_softmax(logits, -1).gather(-1, acts).squeeze(-1)
            ratio = (logp - old_logp).exp()
            surrogate = torch.min(ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv)
            value_loss = (value - ret).pow(2).mean()
            total = 0.5 * value_loss - surrogate.mean()
            optim.zero_grad(set_to_none=False)
            total.backward()
            nn.utils.clip_grad_norm_(params, MAX_GRAD, foreach=True)
            optim.step()
    elapsed = time.perf_counter() - start
    env.close()
    out = {"frames_per_second": batches * n / elapsed}
    if evaluate:
        out["eval_mean"] = _evaluate(lambda x: net(x)[0], seed + 10_000, episodes=20)
    return out


def _evaluate(actor: Callable[[torch.Tensor], torch.Tensor], seed: int, episodes: int) -> float:
    """Mean return of one deterministic (argmax) episode on each of ``episodes`` envs."""
    env = _vector_cartpole(episodes, same_step=False)
    obs, _ = env.reset(seed=seed)
    returns = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    with torch.inference_mode():
        while running.any():
            action = actor(torch.from_numpy(obs)).argmax(-1).numpy()
            obs, rew, term, trunc, _ = env.step(action)
            returns += rew * running
            running &= ~(term | trunc)
    env.close()
    return float(returns.mean())


class _TwinCritic(nn.Module):
    """Two Q-networks ``[in] -> cells... -> 1`` stored stacked and run as one ensemble: one
    ``baddbmm`` per layer (xdrl's ``LeanSACLoss`` and ``LeanTD3Loss`` evaluate the losses'
    stacked critics the same way). Each network starts from ``nn.Linear``'s default
    initialization."""

    def __init__(self, n_in: int, cells: tuple[int, ...] = (256, 256)) -> None:
        super().__init__()
        widths = [n_in, *cells, 1]
        sizes = list(zip(widths[:-1], widths[1:], strict=True))
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in sizes:
            layers = [nn.Linear(fan_in, fan_out) for _ in range(2)]
            self.weights.append(nn.Parameter(torch.stack([m.weight.detach().T for m in layers])))
            self.biases.append(nn.Parameter(torch.stack([m.bias.detach()[None] for m in layers])))

    def forward(self, x: torch.Tensor, detach: bool = False) -> torch.Tensor:
        """Q-values ``[2, B, 1]`` of inputs ``[B, in]``."""
        h = x.expand(2, *x.shape)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if detach:
                w, b = w.detach(), b.detach()
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = torch.relu(h)
        return h


SCALE_BIAS = math.log(math.expm1(1.0 - 0.01))  # softplus(0 + bias) + 0.01 == 1: xdrl's scale map


def _replay_minibatches(
    env, seed: int, frames: int, warmup: int, act: Callable[[torch.Tensor], torch.Tensor]
) -> Iterator[tuple[int, tuple[torch.Tensor, ...]]]:
    """One env stepped ``frames`` times, each transition stored in preallocated tensors; after
    ``warmup`` random frames, actions come from ``act(observation [1, obs_dim])`` (called under
    ``inference_mode``) and every step yields ``(step, (obs, action, reward, next_obs,
    terminated))``: a uniform minibatch of 256 of the transitions stored so far."""
    obs_dim = env.observation_space.shape[0]
    act_dim = env.action_space.shape[0]
    storage = {
        "obs": torch.zeros(frames, obs_dim),
        "act": torch.zeros(frames, act_dim),
        "rew": torch.zeros(frames, 1),
        "next": torch.zeros(frames, obs_dim),
        "term": torch.zeros(frames, 1),
    }
    obs_np, _ = env.reset(seed=seed)
    for step in range(frames):
        obs = torch.from_numpy(obs_np.astype(np.float32))
        if step < warmup:
            action = torch.from_numpy(env.action_space.sample())
        else:
            with torch.inference_mode():
                action = act(obs[None])[0]
        next_np, rew, term, trunc, _ = env.step(action.numpy())
        storage["obs"][step] = obs
        storage["act"][step] = action
        storage["rew"][step] = float(rew)
        storage["next"][step] = torch.from_numpy(next_np.astype(np.float32))
        storage["term"][step] = float(term)
        obs_np = env.reset()[0] if term or trunc else next_np
        if step >= warmup:
            idx = torch.randint(0, step + 1, (256,))
            yield step, tuple(storage[key].index_select(0, idx) for key in storage)


def sac_torch_loop(seed: int, frames: int, warmup: int) -> float:
    """Lean plain PyTorch SAC with xdrl's SAC maths; returns frames/s.

    The workload of the benchmark's SAC mode (Pendulum-v1, 1 env, UTD 1, batch 256, 256x256
    networks, ``warmup`` random frames). The maths of xdrl's ``sac`` (TorchRL's ``SACLoss``):
    a tanh-normal actor (orthogonal init, biased-softplus scale, actions scaled to [-2, 2]),
    twin critics with Polyak targets (tau 0.005), a learned temperature (target entropy -1),
    one Adam over everything (lr 3e-4) and one backward of the summed losses per step, the
    actor's loss against the critics with detached parameters. What makes it lean: the critics
    as one ensemble (``_TwinCritic``), no ``torch.distributions`` objects, preallocated replay
    tensors, fused Adam, ``torch._foreach_lerp_`` for the targets, acting under
    ``inference_mode``.
    """
    import copy

    import gymnasium as gym

    torch.manual_seed(seed)
    env = gym.make("Pendulum-v1")
    obs_dim, act_dim, gamma, tau = 3, 1, 0.99, 0.005
    actor = nn.Sequential(
        nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, 2 * act_dim),
    )  # fmt: skip
    linears = [m for m in actor if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, gain=0.01 if i == len(linears) - 1 else 2**0.5)
        nn.init.zeros_(layer.bias)
    critic = _TwinCritic(obs_dim + act_dim)
    target_critic = copy.deepcopy(critic).requires_grad_(False)
    target, online = list(target_critic.parameters()), list(critic.parameters())
    log_alpha = nn.Parameter(torch.zeros(()))
    optim = torch.optim.Adam([*actor.parameters(), *online, log_alpha], lr=3e-4, fused=True)
    half_log_2pi = 0.5 * math.log(2 * math.pi)

    def sample(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc, raw = actor(obs).chunk(2, -1)
        scale = (torch.nn.functional.softplus(raw + SCALE_BIAS) + 0.01).clamp_min(1e-4)
        pre = loc + torch.randn_like(loc) * scale
        log_prob = -0.5 * ((pre - loc) / scale) ** 2 - scale.log() - half_log_2pi
        log_det = 2.0 * (math.log(2.0) - pre - torch.nn.functional.softplus(-2.0 * pre))
        log_det = log_det + math.log(2.0)  # the affine map from [-1, 1] to [-2, 2]
        return 2.0 * torch.tanh(pre), (log_prob - log_det).sum(-1)

    batches = _replay_minibatches(env, seed, frames, warmup, lambda obs: sample(obs)[0])
    start = time.perf_counter()
    for _, (o, a, r, n, d) in batches:
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            next_action, next_log_prob = sample(n)
            next_q = target_critic(torch.cat([n, next_action], -1))
            next_value = (next_q - alpha * next_log_prob[:, None]).min(0)[0]
            y = (r + gamma * (1 - d) * next_value).squeeze(-1)
        q = critic(torch.cat([o, a], -1)).squeeze(-1)
        q_loss = (q - y).pow(2).sum(0).mean()
        new_action, log_prob = sample(o)
        q_new = critic(torch.cat([o, new_action], -1), detach=True).min(0)[0].squeeze(-1)
        actor_loss = (alpha * log_prob - q_new).mean()
        alpha_loss = (-log_alpha * (log_prob.detach() - act_dim)).mean()
        optim.zero_grad()
        (q_loss + actor_loss + alpha_loss).backward()
        optim.step()
        with torch.no_grad():
            torch._foreach_lerp_(target, online, tau)
    elapsed = time.perf_counter() - start
    env.close()
    return frames / elapsed


def td3_torch_loop(seed: int, frames: int, warmup: int, compiled: bool = False) -> dict[str, float]:
    """Lean plain PyTorch TD3 with xdrl's TD3 maths; returns frames/s and the median update time
    after the first ten updates (``compiled``: the losses through ``torch.compile``, its
    compile time inside the timed loop).

    The workload of the benchmark's TD3 mode (Pendulum-v1, SB3's TD3 defaults: 1 env, UTD 1,
    batch 256, [400, 300] networks, policy delay 2, target noise 0.2 clipped at 0.5 and
    exploration noise 0.1, in units of the action half-range 2, ``warmup`` random frames). The
    maths of xdrl's ``td3`` (TorchRL's ``TD3Loss``): a tanh-squashed actor, twin critics, the
    actor's loss against the first critic with detached parameters every second step, one Adam
    over everything (lr 3e-4) and one backward of the summed losses per step, Polyak targets
    (tau 0.005) for actor and critics every step. What makes it lean: the critics as one
    ensemble (``_TwinCritic``), preallocated replay tensors, fused Adam, ``torch._foreach_lerp_``
    for the targets, acting under ``inference_mode``.
    """
    import copy

    import gymnasium as gym

    torch.manual_seed(seed)
    env = gym.make("Pendulum-v1")
    obs_dim, act_dim, gamma, tau, high = 3, 1, 0.99, 0.005, 2.0
    actor = nn.Sequential(
        nn.Linear(obs_dim, 400), nn.ReLU(), nn.Linear(400, 300), nn.ReLU(),
        nn.Linear(300, act_dim), nn.Tanh(),
    )  # fmt: skip
    critic = _TwinCritic(obs_dim + act_dim, (400, 300))
    target_actor = copy.deepcopy(actor).requires_grad_(False)
    target_critic = copy.deepcopy(critic).requires_grad_(False)
    online = [*actor.parameters(), *critic.parameters()]
    target = [*target_actor.parameters(), *target_critic.parameters()]
    optim = torch.optim.Adam(online, lr=3e-4, fused=True)

    def explore(obs: torch.Tensor) -> torch.Tensor:
        action = high * actor(obs) + 0.1 * high * torch.randn(act_dim)
        return action.clamp(-high, high)

    def losses(o, a, r, n, d, with_actor: bool) -> torch.Tensor:
        with torch.no_grad():
            noise = (torch.randn_like(a) * 0.2 * high).clamp(-0.5 * high, 0.5 * high)
            next_action = (high * target_actor(n) + noise).clamp(-high, high)
            next_value = target_critic(torch.cat([n, next_action], -1)).min(0)[0]
            y = (r + gamma * (1 - d) * next_value).squeeze(-1)
        q = critic(torch.cat([o, a], -1)).squeeze(-1)
        loss = (q - y).pow(2).sum(0).mean()
        if with_actor:
            q1 = critic(torch.cat([o, high * actor(o)], -1), detach=True)[0]
            loss = loss - q1.mean()
        return loss

    loss_of = torch.compile(losses) if compiled else losses
    updates = []
    start = time.perf_counter()
    for step, batch in _replay_minibatches(env, seed, frames, warmup, explore):
        began = time.perf_counter()
        loss = loss_of(*batch, step % 2 == 0)
        optim.zero_grad()
        loss.backward()
        optim.step()
        with torch.no_grad():
            torch._foreach_lerp_(target, online, tau)
        updates.append(time.perf_counter() - began)
    elapsed = time.perf_counter() - start
    env.close()
    return {
        "frames_per_second": frames / elapsed,
        "update_ms": 1e3 * float(np.median(updates[10:] or updates)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loop", choices=["torchrl", "torch", "sac-torch", "td3-torch"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=10_240)
    parser.add_argument("--warmup", type=int, default=512, help="sac-/td3-torch: warm-up frames")
    parser.add_argument("--envs", type=int, default=ENVS, help="torch: envs (x 32 frames/batch)")
    parser.add_argument("--eval", action="store_true", help="torch: 20-episode eval mean after")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--compile", action="store_true", help="td3-torch: torch.compile losses")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.loop == "sac-torch":
        result = {"frames_per_second": sac_torch_loop(args.seed, args.frames, args.warmup)}
    elif args.loop == "td3-torch":
        result = td3_torch_loop(args.seed, args.frames, args.warmup, args.compile)
    elif args.loop == "torchrl":
        result = {"frames_per_second": torchrl_loop(args.seed, args.frames)}
    else:
        result = torch_loop(args.seed, args.frames, args.envs, args.eval)
    print(json.dumps({"loop": args.loop, **result}))


if __name__ == "__main__":
    main()
