"""Every user env trains or gets one line before anything starts (issue 47, item 3).

``MultiDiscrete`` and ``MultiBinary`` actions train with PPO and A2C as independent categoricals
and get one config line under DQN, SAC and TD3; an infinite ``Box`` action bound is one config
line; an env that returns NaN/inf or raises stops the run with one line that blames the env. The
envs are the user envs of ``tests/user_envs.py``, run through ``xdrl-train`` subprocesses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tests import user_envs
from tests.conftest import read_summary, run_cli
from xdrl.lean.categorical_actor import IndependentCategoricals, MultiCategoricalActor

MATCH = "env.id=tests.user_envs:XdrlMatchTargets-v0"
BITS = "env.id=tests.user_envs:XdrlMatchBits-v0"
FAULTY = "env.id=tests.user_envs:XdrlFaultyCorridor-v0"
UNBOUNDED = "env.id=tests.user_envs:XdrlUnboundedCorridor-v0"
TRAIN = ["env=gym", "total_frames=2048", "eval.episodes=4", "logging=none", "num_threads=1"]
NVEC = (3, 4)


# The distribution and the actor


def test_independent_categoricals_match_one_categorical_per_dimension() -> None:
    """Log-probability and entropy are the sums of torch's ``Categorical`` per dimension on the
    logits split by ``nvec``; the mode is each dimension's argmax."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 6, sum(NVEC), generator=gen)
    dist = IndependentCategoricals(logits, NVEC)
    parts = [torch.distributions.Categorical(logits=p) for p in logits.split(NVEC, -1)]
    action = torch.stack([torch.randint(0, n, (5, 6), generator=gen) for n in NVEC], -1)
    expected = parts[0].log_prob(action[..., 0]) + parts[1].log_prob(action[..., 1])
    torch.testing.assert_close(dist.log_prob(action), expected)
    torch.testing.assert_close(dist.entropy(), parts[0].entropy() + parts[1].entropy())
    assert dist.mode.tolist() == torch.stack([p.logits.argmax(-1) for p in parts], -1).tolist()
    assert dist.sample().shape == (5, 6, 2) and dist.sample((3,)).shape == (3, 5, 6, 2)


def _actor() -> MultiCategoricalActor:
    from torchrl.data import Composite, MultiCategorical

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(7, 16), nn.Tanh(), nn.Linear(16, sum(NVEC)))
    spec = Composite(action=MultiCategorical(torch.tensor(NVEC)))
    return MultiCategoricalActor(net, spec, NVEC)


def test_multi_categorical_actor_fast_path_is_its_distribution() -> None:
    """The tensor path draws what the TorchRL forward (through :class:`IndependentCategoricals`)
    draws for the same RNG state, with the distribution's log-probability; its log-probability
    and entropy of given actions are the per-dimension ``Categorical`` sums."""
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    actor = _actor()
    observation = torch.randn(32, 7)
    torch.manual_seed(1)
    action, log_prob, logits = actor.sample(observation)
    torch.manual_seed(1)
    with set_exploration_type(ExplorationType.RANDOM):
        out = actor(TensorDict({"observation": observation}, batch_size=[32]))
    assert action.tolist() == out["action"].tolist()
    torch.testing.assert_close(log_prob, out["action_log_prob"])
    parts = [torch.distributions.Categorical(logits=p) for p in logits.split(NVEC, -1)]
    got_log_prob, entropy = actor.log_prob_entropy(observation, action)
    torch.testing.assert_close(
        got_log_prob, parts[0].log_prob(action[:, 0]) + parts[1].log_prob(action[:, 1])
    )
    assert entropy is not None
    torch.testing.assert_close(entropy, parts[0].entropy() + parts[1].entropy())
    mode = actor.mode(observation)[0]
    assert mode.tolist() == torch.stack([p.logits.argmax(-1) for p in parts], -1).tolist()


def test_lean_ppo_loss_matches_torchrl_on_multi_discrete_actions() -> None:
    """``LeanClipPPOLoss`` on a :class:`MultiCategoricalActor` takes its tensor path and gives
    ``ClipPPOLoss``'s losses and gradients on the same batch."""
    from tensordict import TensorDict
    from torchrl.modules import ValueOperator
    from torchrl.objectives import ClipPPOLoss

    from xdrl.lean.ppo_loss import LeanClipPPOLoss

    actor = _actor()
    critic = ValueOperator(nn.Linear(7, 1), in_keys=["observation"])
    gen = torch.Generator().manual_seed(2)
    n = 64
    batch = TensorDict(
        {
            "observation": torch.randn(n, 7, generator=gen),
            "action": torch.stack([torch.randint(0, k, (n,), generator=gen) for k in NVEC], -1),
            "action_log_prob": -torch.rand(n, generator=gen) - 1.0,
            "advantage": torch.randn(n, 1, generator=gen),
            "value_target": torch.randn(n, 1, generator=gen),
        },
        batch_size=[n],
    )
    options = {"clip_epsilon": 0.2, "entropy_bonus": True, "entropy_coeff": 0.01,
               "critic_coeff": 0.5, "loss_critic_type": "l2", "functional": False}  # fmt: skip
    results = []
    for cls in (LeanClipPPOLoss, ClipPPOLoss):
        loss = cls(actor, critic, **options)
        actor.zero_grad()
        critic.zero_grad()
        out = loss(batch.clone())
        (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()
        grads = [p.grad.clone() for p in [*actor.parameters(), *critic.parameters()]]
        results.append((out, grads))
        if cls is LeanClipPPOLoss:
            assert loss._lean()  # the tensor path ran
    (lean, lean_grads), (ref, ref_grads) = results
    for key in ("loss_objective", "loss_critic", "loss_entropy", "entropy", "kl_approx"):
        torch.testing.assert_close(lean[key], ref[key], rtol=1e-5, atol=1e-6)
    for a, b in zip(lean_grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# Training end to end


def _greedy_return(run_dir: Path, env_id: str, episodes: int = 20) -> float:
    """The mean return of the run's deterministic policy (``xdrl.load_policy``) over fresh
    episodes of the env, played here with gymnasium."""
    import gymnasium

    from xdrl import load_policy

    policy = load_policy(run_dir)
    env = gymnasium.make(env_id)
    total = 0.0
    for episode in range(episodes):
        obs, _ = env.reset(seed=1_000 + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(np.asarray(policy(obs)))
            total += float(reward)
            done = terminated or truncated
    env.close()
    return total / episodes


@pytest.mark.parametrize(
    ("env", "algorithm", "extra"),
    [
        (MATCH, "ppo", []),
        (MATCH, "a2c", []),
        (MATCH, "ppo", ["lean=false"]),  # TorchRL's ClipPPOLoss on IndependentCategoricals
        (BITS, "ppo", []),
    ],
    ids=["multidiscrete-ppo", "multidiscrete-a2c", "multidiscrete-ppo-torchrl", "multibinary-ppo"],
)
def test_multi_dimensional_discrete_actions_train(
    tmp_path: Path, env: str, algorithm: str, extra: list[str]
) -> None:
    """PPO and A2C learn to name each dimension's target: the trained policy, replayed here,
    beats a uniformly random policy's expected return by a wide margin."""
    run_dir = tmp_path / "run"
    result = run_cli(
        [*TRAIN, env, f"algorithm={algorithm}", *extra, f"hydra.run.dir={run_dir}"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_summary(run_dir)["status"] == "completed"
    env_id = env.split(":")[-1]
    nvec = (3, 4) if env == MATCH else (2, 2, 2)
    random_return = user_envs.random_match_return(nvec)  # 2.33 (MultiDiscrete), 4.0 (bits)
    greedy = _greedy_return(run_dir, env_id)
    assert greedy > random_return + 0.5 * (8.0 - random_return), (greedy, random_return)


def test_multi_discrete_policy_exports_to_onnx(tmp_path: Path) -> None:
    """``xdrl-export`` writes a MultiDiscrete PPO policy; the ONNX file's int64 ``[batch, 2]``
    actions are ``xdrl.load_policy``'s on the same observations."""
    import gymnasium
    import onnxruntime

    from tests.conftest import run_script
    from xdrl import load_policy

    run_dir, out = tmp_path / "run", tmp_path / "policy.onnx"
    args = [*TRAIN, MATCH, "algorithm=ppo", "total_frames=512", "frames_per_batch=256"]
    trained = run_cli([*args, "eval=none", f"hydra.run.dir={run_dir}"], tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    result = run_script("xdrl-export", [str(run_dir), "--format", "onnx", "--out", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    env = gymnasium.make("XdrlMatchTargets-v0")
    observations = np.stack([env.reset(seed=s)[0] for s in range(16)])
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (actions,) = session.run(None, {"observation": observations})
    assert actions.shape == (16, 2) and actions.dtype == np.int64
    policy = load_policy(run_dir)
    assert actions.tolist() == [np.asarray(policy(o)).tolist() for o in observations]


# One line before training


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ([MATCH, "algorithm=dqn"], "algorithm", ["dqn", "MultiDiscrete([3, 4])", "ppo or a2c"]),
        ([MATCH, "algorithm=sac"], "algorithm", ["sac", "MultiDiscrete([3, 4])", "ppo or a2c"]),
        ([BITS, "algorithm=td3"], "algorithm", ["td3", "MultiBinary(3)", "ppo or a2c"]),
        (
            [
                MATCH,
                "algorithm=ppo",
                "algorithm.build.recurrent=gru",
                "algorithm.build.minibatch_size=256",
                "frames_per_batch=256",
            ],
            "algorithm.build.recurrent",
            ["MultiDiscrete([3, 4])", "recurrent=null"],
        ),
        ([UNBOUNDED, "algorithm=ppo"], "env.id", ["bounds must be finite; wrap the env or clip"]),
        ([UNBOUNDED, "algorithm=sac"], "env.id", ["bounds must be finite; wrap the env or clip"]),
        (
            ["env.id=tests.user_envs:XdrlOffsetCorridor-v0", "algorithm=dqn"],
            "env.id",
            ["Discrete(2, start=1)", "count from 0"],
        ),
    ],
    ids=[
        "dqn",
        "sac",
        "td3-multibinary",
        "recurrent",
        "infinite-bounds-ppo",
        "infinite-bounds-sac",
        "discrete-start",
    ],
)
def test_unsupported_action_spaces_are_one_config_line(
    tmp_path: Path, overrides: list[str], key: str, words: list[str]
) -> None:
    """DQN/SAC/TD3 on multi-dimensional discrete actions, a recurrent policy on them, an
    infinite action bound and a discrete action space that does not start at 0: one config line
    naming the key and the space, exit 2."""
    result = run_cli(
        ["env=gym", "total_frames=8192", *overrides, f"hydra.run.dir={tmp_path / 'run'}"],
        tmp_path,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"xdrl-train: config error: {key}: "), lines[0]
    for word in words:
        assert word in lines[0]


# The env's faults


@pytest.mark.parametrize(
    ("fault", "extra", "what"),
    [
        ("observation", [], "returned NaN in its observation at step 7"),
        ("observation", ["env.normalize_observations=true"], "NaN in its observation at step 7"),
        ("reward", [], "returned inf in its reward at step 7"),
        ("raise", [], "failed at step 7 of its episode: RuntimeError: simulator lost contact"),
        ("observation", ["env.batching=serial"], "returned NaN in its observation at step 7"),
        ("raise", ["env.batching=serial"], "failed at step 7 of its episode: RuntimeError: "),
    ],
    ids=[
        "nan-obs",
        "nan-obs-normalized",
        "inf-reward",
        "raises",
        "nan-obs-serial",
        "raises-serial",
    ],
)
def test_env_faults_are_one_line_that_blames_the_env(
    tmp_path: Path, fault: str, extra: list[str], what: str
) -> None:
    """The faulty corridor's 7th step (NaN observation, inf reward or an exception): one line
    naming the env, the step and the key, exit 1, and ``summary.json`` records it as an
    ``EnvFault``, never as diverged networks."""
    run_dir = tmp_path / "run"
    result = run_cli(
        [*TRAIN, FAULTY, "algorithm=ppo", "env.num_envs=1", f"+env.make_kwargs.fault={fault}",
         *extra, f"hydra.run.dir={run_dir}"],
        tmp_path,
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(lines) == 1, result.stderr
    serial = "env.batching=serial" in extra  # a SerialEnv's sub-env is not named
    sub_env = "" if serial else "(sub-env 0) "
    assert lines[0].startswith(f"xdrl-train: error: env XdrlFaultyCorridor-v0 {sub_env}")
    assert what in lines[0]
    summary = read_summary(run_dir)
    assert summary["status"] == "failed"
    assert summary["error"].startswith("EnvFault: env XdrlFaultyCorridor-v0 ")
    assert what in summary["error"]
    assert "the networks diverged" not in summary["error"]


def test_a_fault_names_the_sub_env_and_its_episode_step() -> None:
    """In process: the sub-env whose step returned NaN is named with its own episode's step
    (sub-env 1 faults at its 3rd step while sub-env 0 stays finite)."""
    from xdrl.envs.faults import EnvFault
    from xdrl.envs.vector_env import VectorGymEnv

    env = VectorGymEnv("XdrlFaultyCorridor-v0", num_envs=2)
    env._envs[0].unwrapped.fault_step = 10**6
    env._envs[1].unwrapped.fault_step = 3
    env.set_seed(0)
    env.step_numpy(np.array([1, 1]))
    env.step_numpy(np.array([1, 1]))
    with pytest.raises(EnvFault, match=r"\(sub-env 1\) returned NaN in its observation at step 3"):
        env.step_numpy(np.array([1, 1]))
    env.close()


def test_a_run_closes_every_gymnasium_env_it_made(tmp_path: Path) -> None:
    """The run's close reaches each sub-env of the training and evaluation envs: a user env holding
    a simulator, a socket or a file sees its ``close()`` once: the env the pre-check makes to read
    the spaces, 2 training envs and 3 evaluation envs, 6 closes. VectorGymEnv used to look
    closed from birth, so only the pre-check's env was closed (1)."""
    log = tmp_path / "closed.log"
    result = run_cli(
        ["env=gym", "env.id=tests.user_envs:XdrlClosingCorridor-v0",
         f"+env.make_kwargs.closed_log={log}", "env.num_envs=2", "eval.episodes=3",
         "frames_per_batch=64", "total_frames=128", "logging=none", "num_threads=1",
         f"hydra.run.dir={tmp_path / 'run'}"],
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pids = log.read_text().split()
    assert len(pids) == 6, pids
