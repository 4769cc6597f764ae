"""The Gaussian continuous actor of PPO and A2C (``algorithm.build.distribution=normal``): its
log-densities and entropies against ``torch.distributions.Normal``, the env stepping clipped
actions while the loss scores the sampled ones, lean and TorchRL losses agreeing on one batch,
the exported file acting as ``load_policy`` (the clipped mean), refusals, and tiny runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs.utils import ExplorationType, set_exploration_type

from tests.conftest import compose_config, missing_extra, read_summary, run_cli, run_script
from xdrl.algorithms import a2c, ppo
from xdrl.envs.factory import make_env
from xdrl.training.env_state import gym_envs

PENDULUM_HIGH = 2.0  # Pendulum-v1's torque bound


def _normal_ppo(env, seed: int = 0, **kwargs):
    torch.manual_seed(seed)
    options = {"frames_per_batch": 64, "minibatch_size": 64, "epochs": 1, **kwargs}
    return ppo.build(env, distribution="normal", **options)


def _record_actions(env) -> list[np.ndarray]:
    """The actions Pendulum's own ``step`` receives, in order (one env)."""
    (outer,) = gym_envs(env)
    inner = outer.unwrapped
    received: list[np.ndarray] = []
    step = inner.step

    def recording(action):
        received.append(np.array(action, copy=True))
        return step(action)

    inner.step = recording
    return received


def test_log_prob_and_entropy_match_torch_normal() -> None:
    """The actor samples from N(mean, exp(log_std)) with a state-independent log-std starting
    at ``log_std_init``; its log-densities and entropies are those of independent Normals,
    summed over the action dimensions (computed here with torch.distributions)."""
    env = make_env("Hopper-v5", num_envs=4, batching="vector", seed=0)
    try:
        parts = _normal_ppo(env, log_std_init=-0.7, ortho_init=False)
        actor = parts.policy
        data = env.reset()
        with set_exploration_type(ExplorationType.RANDOM):
            out = actor(data.clone())
        loc, scale, action = out["loc"], out["scale"], out["action"]
        assert loc.shape == action.shape == (4, 3)
        assert torch.allclose(scale, torch.full_like(scale, float(np.exp(-0.7))))
        reference = torch.distributions.Normal(loc, torch.full_like(loc, float(np.exp(-0.7))))
        expected = reference.log_prob(action).sum(-1)
        assert torch.allclose(out["action_log_prob"], expected, atol=1e-5)
        dist = actor.get_dist(out)
        assert torch.allclose(dist.entropy(), reference.entropy().sum(-1), atol=1e-5)
        # the scale is one learned parameter per action dimension, not an output of the MLP
        learned = [p for n, p in actor.named_parameters() if "state_independent_scale" in n]
        assert len(learned) == 1 and learned[0].shape == (3,)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            assert torch.equal(actor(data.clone())["action"], loc.clamp(-1.0, 1.0))
    finally:
        env.close()


def test_ortho_init_false_keeps_pytorch_default_init() -> None:
    """``ortho_init=false``: the MLPs keep torch's default init (the same weights a fresh
    ``nn.Linear`` draws from the same seed), not orthogonal ones with gain 0.01 at the output."""
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    try:
        actor_default = _normal_ppo(env, seed=3, ortho_init=False).policy
        actor_ortho = _normal_ppo(env, seed=3).policy
        torch.manual_seed(3)
        first = nn.Linear(3, 64)
        linears = [m for m in actor_default.modules() if isinstance(m, nn.Linear)]
        assert torch.equal(linears[0].weight, first.weight)
        out_ortho = [m for m in actor_ortho.modules() if isinstance(m, nn.Linear)][-1]
        assert out_ortho.weight.norm() < 0.02 < linears[-1].weight.norm()
    finally:
        env.close()


@pytest.mark.parametrize("batching", ["vector", "serial"])
def test_env_steps_clipped_actions_while_loss_scores_sampled_ones(batching: str) -> None:
    """With a wide Gaussian most samples fall outside Pendulum's +-2: the batch keeps them as
    sampled, Pendulum receives them clipped, and the loss's importance ratios at the unchanged
    policy are exactly 1 (it scores the stored samples); scoring the clipped copies instead
    would move them, so the check can fail."""
    env = make_env("Pendulum-v1", num_envs=1, batching=batching, seed=0)
    try:
        parts = _normal_ppo(env, log_std_init=1.5)
        received = _record_actions(env)
        collector = Collector(env, parts.policy, frames_per_batch=64, total_frames=64)
        batch = next(iter(collector))
        collector.shutdown(close_env=False)
        action = batch["action"].reshape(-1, 1)
        assert action.abs().max() > 2 * PENDULUM_HIGH
        sent = torch.as_tensor(np.stack(received)).reshape(-1, 1)
        assert torch.equal(sent, action.clamp(-PENDULUM_HIGH, PENDULUM_HIGH))
        loss = parts.loss_module
        batch = loss.value_estimator(batch)
        with torch.no_grad():
            out = loss(batch.reshape(-1))
        assert float(out["mean_ratio"]) == pytest.approx(1.0, abs=1e-6)
        assert float(out["max_ratio"]) == pytest.approx(1.0, abs=1e-6)
        clipped = batch.reshape(-1).clone()
        clipped["action"] = clipped["action"].clamp(-PENDULUM_HIGH, PENDULUM_HIGH)
        with torch.no_grad():
            moved = loss(clipped)
        assert abs(float(moved["mean_ratio"]) - 1.0) > 1e-3
    finally:
        env.close()


def _batch_process(parts, batch):
    """``batch`` through the parts' per-batch hooks (reward normalization, GAE, buffer)."""
    for stage, hook in parts.hooks:
        if stage == "batch_process":
            batch = hook(batch)
    return batch


def test_lean_and_torchrl_losses_agree_on_one_batch() -> None:
    """lean (xdrl's GAE and buffer, ``LeanClipPPOLoss`` on its tensor path through
    ``NormalHead``) and ``lean=false`` (TorchRL's GAE, buffer and ``ClipPPOLoss``) give the same
    advantages, losses and gradients on one batch, with the return normalization of
    ``normalize_rewards``."""
    env = make_env("Pendulum-v1", num_envs=2, batching="vector", seed=0)
    try:
        options = {"log_std_init": -0.5, "ortho_init": False, "normalize_rewards": True}
        options |= {"entropy_coef": 0.01, "frames_per_batch": 128}
        lean = _normal_ppo(env, lean=True, **options)
        plain = _normal_ppo(env, lean=False, **options)
        assert type(lean.loss_module).__name__ == "LeanClipPPOLoss"
        assert type(plain.loss_module).__name__ == "ClipPPOLoss"
        collector = Collector(env, lean.policy, frames_per_batch=128, total_frames=128)
        batch = next(iter(collector))
        collector.shutdown(close_env=False)
        a = _batch_process(lean, batch.clone()).reshape(-1)
        b = _batch_process(plain, batch.clone()).reshape(-1)
        assert torch.allclose(a["advantage"], b["advantage"], atol=1e-5)
        outs = []
        for parts, data in ((lean, a), (plain, b)):
            out = parts.loss_module(data)
            total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
            total.backward()
            grads = [p.grad.clone() for p in parts.loss_module.parameters() if p.grad is not None]
            outs.append((out, grads))
        (out_a, grads_a), (out_b, grads_b) = outs
        for key in ("loss_objective", "loss_critic", "loss_entropy", "entropy", "kl_approx"):
            assert torch.allclose(out_a[key], out_b[key], atol=1e-6), key
        assert lean.loss_module._lean() and lean.loss_module.__dict__["_normal_head"] is not None
        assert len(grads_a) == len(grads_b) > 0
        assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(grads_a, grads_b, strict=True))
    finally:
        env.close()


def test_a2c_takes_the_gaussian_actor() -> None:
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    try:
        torch.manual_seed(0)
        parts = a2c.build(env, frames_per_batch=16, distribution="normal", log_std_init=-1.0)
        with set_exploration_type(ExplorationType.RANDOM):
            out = parts.policy(env.reset())
        assert torch.allclose(out["scale"], torch.full((1,), float(np.exp(-1.0))))
    finally:
        env.close()


def test_default_stays_tanh_normal() -> None:
    """Without the new keys, PPO's continuous actor is the tanh-normal one, as before."""
    env = make_env("Pendulum-v1", num_envs=1, seed=0)
    try:
        torch.manual_seed(0)
        actor = ppo.build(env, frames_per_batch=64).policy
        assert type(actor).__name__ == "TanhNormalActor"
    finally:
        env.close()


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["algorithm.build.distribution=normal"], "algorithm.build.distribution"),
        (
            [
                "env=pendulum",
                "algorithm.build.distribution=normal",
                "algorithm.build.recurrent=lstm",
                "algorithm.build.minibatch_size=2048",
            ],
            "algorithm.build.distribution",
        ),
        (["env=pendulum", "algorithm.build.log_std_init=-2"], "algorithm.build.log_std_init"),
        (["env=pendulum", "algorithm.build.distribution=gaussian"], "algorithm.build.distribution"),
    ],
)
def test_bad_combinations_one_line_exit_2(tmp_path: Path, overrides: list[str], key: str) -> None:
    """``normal`` on a discrete env (CartPole), with a recurrent actor, ``log_std_init`` without
    it, an unknown distribution: one config-error line naming the key, exit 2, before training."""
    result = run_cli(["total_frames=64", *overrides, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xdrl-train: config error: "), result.stderr
    assert key in lines[0] and "Traceback" not in result.stderr


def test_export_equals_load_policy_and_is_the_clipped_mean(tmp_path: Path) -> None:
    """A tiny normal-PPO Pendulum run with observation normalization, its actor's means pushed
    past the bounds: ``xdrl-export``'s check passes, onnxruntime on raw observations gives
    ``load_policy``'s actions, and those are the means clipped to +-2."""
    import xdrl.run.lifecycle
    from xdrl.policy.export import export_policy, sample_observations
    from xdrl.policy.loading import load_run

    run_dir = tmp_path / "run"
    overrides = [
        "env=pendulum",
        "algorithm.build.distribution=normal",
        "algorithm.build.log_std_init=-1",
        "algorithm.build.ortho_init=false",
        "env.normalize_observations=true",
        "total_frames=256",
        "frames_per_batch=128",
        "env.num_envs=2",
        "eval.enabled=false",
        "num_threads=1",
    ]
    xdrl.run.lifecycle.run(compose_config(overrides, run_dir))
    assert read_summary(run_dir)["status"] == "completed"
    policy = load_run(run_dir)
    try:
        last = [m for m in policy.module.modules() if isinstance(m, nn.Linear)][-1]
        with torch.no_grad():
            last.weight.mul_(20.0)  # means well past +-2 for most observations
        out = tmp_path / "policy.onnx"
        export_policy(policy, "onnx", out)
        observations = sample_observations(policy.config, n=300, seed=4)
        loaded = policy(observations)
        session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        onnx = session.run(["action"], {"observation": observations})[0]
        assert np.abs(onnx - loaded).max() <= 1e-5
        det = policy.deterministic_module
        with torch.no_grad():
            from tensordict import TensorDict

            data = TensorDict({"observation": det.normalize(torch.from_numpy(observations))}, [300])
            mean = policy.module.module[0](data)["loc"].numpy()
        assert (np.abs(mean) > PENDULUM_HIGH).mean() > 0.2  # clipping matters here
        assert np.allclose(loaded, np.clip(mean, -PENDULUM_HIGH, PENDULUM_HIGH), atol=1e-5)
    finally:
        policy.close()


def test_tiny_hopper_ppo_preset_trains_and_evaluates(tmp_path: Path) -> None:
    """``experiment=hopper_ppo`` shortened to two batches trains, evaluates deterministically,
    and ``xdrl-eval`` replays the saved policy."""
    if missing_extra("hopper"):
        pytest.skip("needs xdrl[mujoco]")
    run_dir = tmp_path / "run"
    result = run_cli(
        [
            "experiment=hopper_ppo",
            "total_frames=1024",
            "eval.interval_frames=512",
            "eval.episodes=2",
            "eval.max_steps=100",
            "num_threads=1",
            f"hydra.run.dir={run_dir}",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    evaluated = run_script(
        "xdrl-eval", [str(run_dir), "--episodes", "2", "--json", "e.json"], tmp_path
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert json.loads((tmp_path / "e.json").read_text())
