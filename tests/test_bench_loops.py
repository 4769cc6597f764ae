"""The plain-PyTorch PPO floor of scripts/bench_loops.py keeps xdrl's nets and GAE maths."""

import numpy as np
import torch

from tests.conftest import load_script

loops = load_script("bench_loops")


def test_actor_critic_is_the_two_mlps() -> None:
    torch.manual_seed(0)
    actor, critic = (
        loops._orthogonal(loops._mlp(4, 2), 0.01),
        loops._orthogonal(loops._mlp(4, 1), 1),
    )
    torch.manual_seed(0)
    net = loops._ActorCritic()
    obs = torch.randn(16, 4)
    logits, value = net(obs)
    torch.testing.assert_close(logits, actor(obs))
    torch.testing.assert_close(value, critic(obs).squeeze(-1))


def test_critic_pad_gets_no_gradient() -> None:
    net = loops._ActorCritic()
    logits, value = net(torch.randn(16, 4))
    (logits.sum() + value.sum()).backward()
    assert net.w3.grad is not None and net.b3.grad is not None
    assert net.w3.grad[1, :, 1].abs().max() == 0 and net.b3.grad[1, 0, 1] == 0


def test_gae_bootstraps_truncation_and_cuts_at_every_end() -> None:
    rew = np.ones((3, 1), np.float32)
    values = np.array([[1.0], [2.0], [3.0]], np.float32)
    next_values = np.array([[2.0], [10.0], [4.0]], np.float32)
    term = np.array([[0.0], [0.0], [1.0]], np.float32)
    done = np.array([[0.0], [1.0], [1.0]], np.float32)  # step 1 truncated, step 2 terminated
    adv = loops._gae(rew, term, done, values, next_values)
    g, lam = loops.GAMMA, loops.LMBDA
    a2 = 1 - 3.0
    a1 = 1 + g * 10.0 - 2.0  # bootstraps from its final observation, no trace from step 2
    a0 = (1 + g * 2.0 - 1.0) + g * lam * a1
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2], rtol=1e-6)


def test_floor_twin_critic_is_two_networks() -> None:
    torch.manual_seed(0)
    critic = loops._TwinCritic(4, cells=(16, 12))
    x = torch.randn(8, 4)
    out = critic(x)
    assert out.shape == (2, 8, 1)
    for i in range(2):
        h = x
        for j, (w, b) in enumerate(zip(critic.weights, critic.biases, strict=True)):
            h = torch.nn.functional.linear(h, w[i].T, b[i, 0])
            h = torch.relu(h) if j < 2 else h
        torch.testing.assert_close(out[i], h)
    assert not torch.equal(out[0], out[1])  # two independently initialized networks


def test_td3_floor_trains_past_its_warmup() -> None:
    """The TD3 floor runs its whole loop (acting, delayed actor steps, targets) and reports a
    rate and its update time."""
    out = loops.td3_torch_loop(seed=0, frames=40, warmup=30)
    assert out["frames_per_second"] > 0 and out["update_ms"] > 0


def test_floor_replay_stores_the_transitions_it_stepped() -> None:
    """The SAC/TD3 floors' replay: after the random warm-up the policy acts, and every sampled
    row is a real Pendulum transition (its reward is Pendulum's cost of the stored observation
    and action, worked out here from gymnasium's formula; Pendulum never terminates)."""
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    calls = []

    def act(obs: torch.Tensor) -> torch.Tensor:
        calls.append(obs.shape)
        return torch.full((1, 1), 0.5)

    steps = []
    for step, (o, a, r, n, d) in loops._replay_minibatches(env, 0, 300, 260, act):
        steps.append(step)
        assert o.shape == (256, 3) and a.shape == (256, 1) and n.shape == (256, 3)
        theta = torch.atan2(o[:, 1], o[:, 0])
        cost = theta**2 + 0.1 * o[:, 2] ** 2 + 0.001 * a[:, 0].clamp(-2, 2) ** 2
        torch.testing.assert_close(r[:, 0], -cost, rtol=1e-4, atol=1e-4)
        assert not d.any()
    assert steps == list(range(260, 300))
    assert calls == [(1, 3)] * 40  # the policy acts on every step after the warm-up
    env.close()
