"""Atari and image observations (issue 21): preprocessing against gymnasium's own wrappers,
uint8 frames up to the network, the training-only protocol (life loss, reward clipping), CNN
shapes, the frame replay buffer, precision, and short PPO and DQN runs with a resume."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import read_summary, run_cli

pytest.importorskip("ale_py", reason="needs xdrl[atari]")
pytest.importorskip("cv2", reason="needs xdrl[atari]")

import gymnasium  # noqa: E402
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation  # noqa: E402

from xdrl.algorithms.encoders import NatureCNN  # noqa: E402
from xdrl.envs.atari import make_atari_env  # noqa: E402
from xdrl.envs.factory import register_ale  # noqa: E402

register_ale()


def _reference(env_id: str, **make: object) -> gymnasium.Env:
    """gymnasium's own Atari preprocessing and frame stack (the byte-level reference)."""
    env = gymnasium.make(env_id, frameskip=1, **make)
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    return FrameStackObservation(env, 4)


@pytest.mark.parametrize("env_id", ["ALE/Breakout-v5", "ALE/Pong-v5"])
def test_observations_are_gymnasiums_preprocessing_byte_for_byte(env_id: str) -> None:
    """Same seed, same actions (sticky actions on): identical uint8 stacks and raw rewards."""
    env = make_atari_env(env_id, num_envs=1, evaluation=True, fire_reset=False)
    base = env.base_env
    ref = _reference(env_id, repeat_action_probability=0.25)
    actions = np.random.default_rng(0).integers(0, ref.action_space.n, 300)
    obs = base.reset_numpy(seed=7)
    expected, _ = ref.reset(seed=7)
    assert obs.dtype == np.uint8 and obs.shape == (1, 4, 84, 84)
    np.testing.assert_array_equal(obs[0], expected)
    for action in actions:
        obs, reward, terminated, truncated = base.step_numpy(np.array([action]))
        expected, raw, ref_terminated, ref_truncated, _ = ref.step(action)
        np.testing.assert_array_equal(obs[0], expected)
        assert (reward[0, 0], terminated[0, 0], truncated[0, 0]) == (
            raw,
            ref_terminated,
            ref_truncated,
        )
        if ref_terminated or ref_truncated:
            break
    env.close()


def _lives_and_ends(evaluation: bool, steps: int = 1500) -> tuple[list[int], list[int]]:
    """Breakout with random actions: the lives left at each episode end, and at each reset."""
    env = make_atari_env("ALE/Breakout-v5", num_envs=1, evaluation=evaluation)
    base = env.base_env
    base.reset_numpy(seed=3)
    rng = np.random.default_rng(3)
    ale = base.envs[0].unwrapped.ale
    at_end, at_reset = [], []
    for _ in range(steps):
        _obs, _reward, terminated, truncated = base.step_numpy(rng.integers(0, 4, 1))
        if terminated[0, 0] or truncated[0, 0]:
            at_end.append(ale.lives())
            base.reset_numpy([0])
            at_reset.append(ale.lives())
    env.close()
    return at_end, at_reset


def test_a_lost_life_ends_a_training_episode_but_the_game_goes_on() -> None:
    at_end, at_reset = _lives_and_ends(evaluation=False)
    assert at_end[:4] == [4, 3, 2, 1]  # Breakout starts with 5 lives: one episode per life
    assert at_reset[:4] == [4, 3, 2, 1]  # the reset continued the same game
    at_end, _ = _lives_and_ends(evaluation=True)
    assert at_end and set(at_end) == {0}  # evaluation: whole games only


def test_training_rewards_are_clipped_evaluation_scores_are_raw() -> None:
    """MsPacman scores 10 per pellet: training sees +1, evaluation the game's 10."""
    sums = {}
    for evaluation in (False, True):
        env = make_atari_env("ALE/MsPacman-v5", num_envs=1, evaluation=evaluation)
        base = env.base_env
        base.reset_numpy(seed=0)
        actions = np.random.default_rng(0).integers(0, 9, 200)
        rewards = [float(base.step_numpy(np.array([a]))[1][0, 0]) for a in actions]
        sums[evaluation] = rewards
        env.close()
    assert set(sums[False]) <= {0.0, 1.0} and 1.0 in sums[False]
    assert max(sums[True]) >= 10.0
    assert [float(np.sign(r)) for r in sums[True]] == sums[False]


def test_uint8_frames_reach_the_network(tmp_path: Path) -> None:
    """The collector's batch and the replay buffer keep uint8; the CNN receives uint8 in
    collection and in the loss (it scales by 1/255 itself)."""
    from xdrl.algorithms.dqn import build as build_dqn
    from xdrl.algorithms.ppo import build as build_ppo
    from xdrl.lean.collector import VectorCollector

    env = make_atari_env("ALE/Breakout-v5", num_envs=2, seed=0)
    seen: list[torch.dtype] = []
    parts = build_ppo(env, frames_per_batch=32, minibatch_size=16, epochs=1)
    torso = next(m for m in parts.loss_module.modules() if isinstance(m, NatureCNN))
    torso.register_forward_pre_hook(lambda _m, args: seen.append(args[0].dtype))
    batch = next(iter(VectorCollector(env, parts.policy, frames_per_batch=32, total_frames=32)))
    assert batch["observation"].dtype == batch["next", "observation"].dtype == torch.uint8
    collected = batch.clone()
    for _stage, hook in parts.hooks:  # GAE, buffer, minibatch
        if callable(hook) and _stage == "batch_process":
            batch = hook(batch)
    parts.loss_module(next(h for s, h in parts.hooks if s == "process_optim_batch")(batch))
    assert seen and set(seen) == {torch.uint8}

    dqn = build_dqn(env, frames_per_batch=32, batch_size=8, buffer_size=64)
    replay = dqn.modules["replay_buffer"]
    replay.extend(collected)
    assert replay.sample()["observation"].dtype == torch.uint8
    env.close()


def test_nature_cnn_shapes_and_layouts() -> None:
    frames = torch.zeros(5, 4, 84, 84, dtype=torch.uint8)
    cnn = NatureCNN((4, 84, 84))
    assert cnn(frames).shape == (5, 512)
    assert cnn.linear.in_features == 64 * 7 * 7  # Mnih et al.'s 3,136 features
    assert cnn(torch.zeros(2, 3, 4, 84, 84, dtype=torch.uint8)).shape == (2, 3, 512)
    assert NatureCNN((210, 160, 3))(torch.zeros(2, 210, 160, 3, dtype=torch.uint8)).shape == (
        2,
        512,
    )  # colour last (a raw ALE screen)
    assert NatureCNN((4, 96, 96, 3))(torch.zeros(2, 4, 96, 96, 3)).shape == (2, 512)
    ones = torch.full((1, 4, 84, 84), 255, dtype=torch.uint8)
    assert torch.allclose(cnn(ones), cnn(torch.ones(1, 4, 84, 84)))  # uint8 scaled by 1/255


def test_ppo_shares_one_torso_and_its_lean_loss_matches_torchrl() -> None:
    from torchrl.objectives import ClipPPOLoss

    from xdrl.algorithms.ppo import build as build_ppo

    env = make_atari_env("ALE/Pong-v5", num_envs=2, seed=0)
    parts = build_ppo(env, frames_per_batch=16, minibatch_size=16, epochs=1, entropy_coef=0.01)
    lean = parts.loss_module
    actor, critic = lean.actor_network, lean.critic_network
    assert actor.logits_net[0] is critic.module[0]  # one Nature CNN for both heads
    torsos = [m for m in lean.modules() if isinstance(m, NatureCNN)]
    assert len({id(m) for m in torsos}) == 1
    assert actor.logits_net[1].out_features == 6 and critic.module[1].out_features == 1
    n = 16
    with torch.no_grad():
        batch = env.rollout(8, actor).reshape(-1)[:n]
    batch.set("advantage", torch.randn(n, 1))
    batch.set("value_target", torch.randn(n, 1))
    reference = ClipPPOLoss(
        actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, critic_coeff=0.5,
        loss_critic_type="l2", functional=False, normalize_advantage=True,
    )  # fmt: skip
    results = []
    for loss in (lean, reference):
        out = loss(batch.clone())
        lean.zero_grad()
        (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()
        results.append((out, [p.grad.clone() for p in lean.parameters()]))
    (out, grads), (ref, ref_grads) = results
    for key in ("loss_objective", "loss_critic", "loss_entropy"):
        torch.testing.assert_close(out[key], ref[key], rtol=1e-5, atol=1e-6)
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
    env.close()


def test_frame_replay_rebuilds_the_stored_stacks_exactly() -> None:
    """Every sampleable transition's two stacks equal the collector's, across episode ends and
    a ring that wrapped; 2 frames per transition against TorchRL's 8."""
    from xdrl.algorithms.dqn import build as build_dqn
    from xdrl.lean.collector import VectorCollector

    env = make_atari_env("ALE/Breakout-v5", num_envs=2, seed=0, noop_max=3)
    parts = build_dqn(env, frames_per_batch=64, buffer_size=100, batch_size=8)
    replay = parts.modules["replay_buffer"]
    collector = VectorCollector(
        env, parts.policy, frames_per_batch=64, total_frames=384, init_random_frames=10**6
    )
    batches = [replay.extend(batch) for batch in collector]
    everything = torch.cat(batches, 1)
    assert everything["next", "done"].sum() > 2  # episode ends inside the checked window
    checked = 0
    for row in range(replay.rows):
        t = everything.shape[1] - 1 - (replay.cursor - 1 - row) % replay.rows
        for e in range(2):
            rows, envs = torch.tensor([row]), torch.tensor([e])
            if not replay._valid(rows, replay.data["step_count"][rows, envs]).item():
                continue
            got = replay._gather(rows, envs)[0]
            assert torch.equal(got["observation"], everything[e, t]["observation"])
            assert torch.equal(got["next", "observation"], everything[e, t]["next", "observation"])
            assert got["action"] == everything[e, t]["action"]
            checked += 1
    assert checked >= 90  # of 100: only the oldest rows' histories were overwritten
    per_transition = replay.nbytes() / (replay.rows * 2)
    assert per_transition < 2 * 84 * 84 + 64  # two frames and a few scalars
    assert replay.sample()["observation"].shape == (8, 4, 84, 84)
    env.close()


def test_precision_auto_is_fp32_and_bf16_hardware_is_read_from_the_cpu_flags(
    tmp_path: Path,
) -> None:
    """``auto`` is fp32 (bf16 did not learn as well in a same-seed Breakout comparison);
    ``bf16`` is bf16; the CPU flags tell whether bf16 is native (a warning where it is not)."""
    from xdrl.training.precision import cpu_has_bf16, resolve_precision

    with_bf16, without = tmp_path / "a", tmp_path / "b"
    with_bf16.write_text("processor: 0\nflags: fpu sse avx512f avx512_bf16\n")
    without.write_text("processor: 0\nflags: fpu sse avx2\n")
    assert cpu_has_bf16.__wrapped__(with_bf16) and not cpu_has_bf16.__wrapped__(without)
    assert resolve_precision("fp32") == "fp32"
    assert resolve_precision("bf16") == "bf16"
    assert resolve_precision("auto") == "fp32"


def test_clip_is_annealed_linearly_with_the_frames() -> None:
    from types import SimpleNamespace

    from xdrl.algorithms.ppo import ClipAnnealingHook

    loss = SimpleNamespace(clip_epsilon=torch.tensor(0.1))
    hook = ClipAnnealingHook(loss)
    trainer = SimpleNamespace(collected_frames=0, total_frames=4096, register_op=lambda *a: None)
    hook.register(trainer)
    for frames, clip in [(1024, 0.075), (2048, 0.05), (4096, 0.0)]:
        trainer.collected_frames = frames
        hook()
        assert float(loss.clip_epsilon) == pytest.approx(clip)


def test_evaluation_video_frames_are_the_rgb_screen() -> None:
    from xdrl.trainer_hooks.logging.video import FrameRecorder

    env = make_atari_env("ALE/Pong-v5", num_envs=1, seed=0, render=True, evaluation=True)
    env.reset()
    recorder = FrameRecorder(env)
    assert recorder.capture()
    frame = recorder.frames[0]
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8  # not the 84x84 input
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 2  # colours, not grey
    env.close()


def test_a_non_atari_image_env_trains_a_continuous_cnn_policy() -> None:
    """CarRacing's (96, 96, 3) RGB frames, stacked by env.frame_stack: a tanh-normal PPO actor
    on the Nature CNN."""
    pytest.importorskip("Box2D", reason="needs xdrl[box2d]")
    from xdrl.algorithms.ppo import build as build_ppo
    from xdrl.envs.factory import make_env

    env = make_env("CarRacing-v3", num_envs=2, batching="vector", seed=0, frame_stack=2)
    assert env.observation_spec["observation"].shape == (2, 2, 96, 96, 3)
    assert env.observation_spec["observation"].dtype == torch.uint8
    parts = build_ppo(env, frames_per_batch=8, minibatch_size=8, epochs=1)
    rollout = env.rollout(4, parts.policy)
    assert rollout["action"].shape == (2, 4, 3)
    assert any(isinstance(m, NatureCNN) for m in parts.loss_module.modules())
    env.close()


def test_missing_ale_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from xdrl.cli import _precheck

    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py now fails
    monkeypatch.chdir(tmp_path)
    for override in ("env=atari", "env.id=ALE/Pong-v5"):
        line = _precheck([override])
        assert line is not None and line.startswith("env.id: ")
        assert "pip install 'xdrl[atari]'" in line and "\n" not in line


@pytest.mark.parametrize("preset", ["atari_ppo", "atari_dqn"])
def test_a_short_breakout_run_resumes_from_its_checkpoint(preset: str, tmp_path: Path) -> None:
    """A few thousand frames end to end, stopped at its budget, then continued from its
    checkpoint to a larger one; frames count 4 per agent step."""
    small = [
        f"experiment={preset}",
        "env.num_envs=2",
        "frames_per_batch=32",
        "num_threads=1",
        "eval.episodes=1",
        "eval.max_steps=50",
        "eval.interval_frames=2048",
        "checkpoint.interval_frames=1024",
        "hydra.run.dir=run",
    ]
    if preset == "atari_ppo":
        small += ["algorithm.build.minibatch_size=16", "algorithm.build.epochs=1"]
    else:
        small += [
            "algorithm.build.init_random_frames=512",
            "algorithm.build.buffer_size=1000",
            "algorithm.build.utd=0.125",
        ]
    first = run_cli([*small, "total_frames=1024"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "1,024/1,024 frames (100.0%)" in first.stdout and "256 agent steps" in first.stdout
    summary = read_summary(tmp_path / "run")
    assert (summary["total_frames"], summary["agent_steps"]) == (1024, 256)
    second = run_cli([*small, "total_frames=2048"], cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "completed" and summary["resumed_from"]
    assert summary["resume_exact"], summary.get("resume_approximate_reason")
    assert (summary["total_frames"], summary["agent_steps"]) == (2048, 512)
    assert "eval/" + ("stochastic" if preset == "atari_ppo" else "deterministic") in " ".join(
        summary["eval"]
    )


def test_one_pass_gae_matches_torchrls_gae() -> None:
    """The image critic's single pass, in chunks of rows, gives TorchRL's values, advantages and
    targets, across episode ends inside the batch (life losses in Breakout)."""
    from xdrl.algorithms.on_policy import OnePassGAE
    from xdrl.algorithms.ppo import build as build_ppo
    from xdrl.lean.collector import VectorCollector

    env = make_atari_env("ALE/Breakout-v5", num_envs=2, seed=1, noop_max=2)
    parts = build_ppo(env, frames_per_batch=256, minibatch_size=256, epochs=1)
    (hook,) = [h for s, h in parts.hooks if isinstance(h, OnePassGAE)]
    collector = VectorCollector(env, parts.policy, frames_per_batch=256, total_frames=256)
    batch = next(iter(collector))
    assert batch["next", "done"].any()  # an episode ends inside the batch
    hook.chunk = 100  # 256 rows in three passes (100, 100, 56)
    ours = hook(batch.clone())
    with torch.no_grad():
        reference = parts.loss_module.value_estimator(batch.clone())
    for key in ["state_value", ("next", "state_value"), "advantage", "value_target"]:
        torch.testing.assert_close(ours[key], reference[key], rtol=1e-5, atol=1e-5)
    env.close()


def test_a_game_mid_episode_is_saved_and_restored_exactly() -> None:
    """The emulator state (RAM, frame, sticky-action RNG) and the wrappers' counters survive
    the checkpoint's pickle: the restored game plays on identically."""
    import pickle

    from xdrl.training.env_state import dumps

    env = make_atari_env("ALE/Breakout-v5", num_envs=1, seed=0)
    game = env.base_env.envs[0]
    for _ in range(30):
        game.step(3)
    copy = pickle.loads(dumps(game))
    for action in np.random.default_rng(0).integers(0, 4, 200):
        first, second = game.step(action), copy.step(action)
        np.testing.assert_array_equal(first[0], second[0])
        assert first[1:4] == second[1:4]
        if first[2] or first[3]:
            game.reset()
            copy.reset()
    env.close()


def test_heads_compute_in_float32_under_bf16_autocast() -> None:
    """Logits and values keep float32's precision from bf16 features (not a bf16 matmul cast
    up afterwards)."""
    from xdrl.algorithms.encoders import Head

    torch.manual_seed(0)
    head = Head(512, 6, gain=1.0)
    features = torch.randn(32, 512)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = head(features.bfloat16())
    expected = torch.nn.functional.linear(features.bfloat16().float(), head.weight, head.bias)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what the layer computed before
        rounded = torch.nn.functional.linear(features, head.weight, head.bias).float()
    assert (rounded - expected).abs().max() > 1e-3


@pytest.mark.parametrize("explore", [True, False])
def test_dqn_tensor_path_on_frames_is_its_tensordict_forward(explore: bool) -> None:
    """The collector's tensor path of DQN's policy (Nature CNN Q-network, epsilon-greedy) gives
    the outputs its TensorDict forward gives on the same frames and RNG state."""
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from xdrl.algorithms import dqn

    env = make_atari_env("ALE/Breakout-v5", num_envs=3, seed=0)
    policy = dqn.build(env, frames_per_batch=48).policy
    policy.module[1].eps.fill_(0.5)  # half the actions random: both branches of the draw
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    torch.manual_seed(3)
    fast = policy.act(frames, explore)
    torch.manual_seed(3)
    mode = ExplorationType.RANDOM if explore else ExplorationType.DETERMINISTIC
    with set_exploration_type(mode), torch.no_grad():
        slow = policy(TensorDict({"observation": frames}, batch_size=[3]))
    assert fast is not None and set(fast) == {"action", "action_value", "chosen_action_value"}
    for key, value in fast.items():
        assert value.shape == slow[key].shape and value.dtype == slow[key].dtype, key
        torch.testing.assert_close(value, slow[key], rtol=0, atol=1e-6, msg=key)
    env.close()


def _noop_game(env_id: str, cap: int) -> tuple[int, bool, list[tuple[int, int]]]:
    """One evaluation game of a policy that always plays NOOP (an untrained net that never
    presses FIRE): the agent steps it took (at most ``cap``), whether it ended, and every
    emulator action with the lives left after it."""
    env = make_atari_env(env_id, num_envs=1, evaluation=True, max_episode_steps=27_000)
    base = env.base_env
    inner = base.envs[0].unwrapped
    emulator: list[tuple[int, int]] = []
    step = inner.step

    def logged(action: int) -> object:
        out = step(action)
        emulator.append((int(action), int(inner.ale.lives())))
        return out

    inner.step = logged
    base.reset_numpy(seed=0)
    for steps in range(1, cap + 1):
        _obs, _reward, terminated, truncated = base.step_numpy(np.array([0]))
        if terminated[0, 0] or truncated[0, 0]:
            env.close()
            return steps, bool(terminated[0, 0]), emulator
    env.close()
    return cap, False, emulator


def test_an_evaluation_game_never_waits_for_fire_after_a_lost_life() -> None:
    """Breakout serves only on FIRE. c1ccce2 pressed it after a reset only: once the first life
    was lost, a NOOP policy's evaluation game ran to the 27,000-step cap (26,993 agent steps
    measured). Now FIRE follows every lost life that leaves the game running: the game ends
    when its 5 lives are lost, far below the cap."""
    steps, ended, emulator = _noop_game("ALE/Breakout-v5", cap=2_000)
    assert ended and steps < 1_000
    assert emulator[-1][1] == 0  # the game is over: no lives left
    # FIRE (action 1) presses: one run of frames per press; the policy itself never fires
    starts = [i for i, (a, _) in enumerate(emulator) if a == 1 and emulator[i - 1][0] != 1]
    lives_before = [emulator[i - 1][1] for i in starts]
    assert lives_before == [5, 4, 3, 2, 1]  # after the reset, then once after each lost life
    for previous, start in zip(starts, starts[1:], strict=False):
        between = {a for a, _ in emulator[previous:start]}
        assert between <= {0, 1, 2}  # NOOP play and the FIRE reset's two presses, nothing else


def test_training_presses_fire_at_reset_not_in_the_step_that_lost_a_life() -> None:
    """Training ends an episode at a lost life (episodic life): the step that lost it returns
    ``terminated`` without pressing FIRE; the reset that follows presses it."""
    env = make_atari_env("ALE/Breakout-v5", num_envs=1)
    base = env.base_env
    inner = base.envs[0].unwrapped
    actions: list[int] = []
    step = inner.step

    def logged(action: int) -> object:
        actions.append(int(action))
        return step(action)

    inner.step = logged
    base.reset_numpy(seed=0)
    for _ in range(2_000):
        lives, actions[:] = inner.ale.lives(), []
        _obs, _reward, terminated, _truncated = base.step_numpy(np.array([0]))
        if inner.ale.lives() < lives:
            break
    else:
        pytest.fail("no life lost in 2,000 NOOP steps")
    assert terminated[0, 0] and set(actions) == {0}  # the life-losing step: NOOP frames only
    actions[:] = []
    base.reset_numpy([0])
    assert 1 in actions  # the reset serves
    env.close()


def test_workers_collect_the_in_process_batches_uint8_stacks_and_lost_lives() -> None:
    """``collector=multiprocess``: 2 workers of 1 game each, on the lean path, collect the batch
    the in-process collector collects (same seeds; a policy whose logits pick LEFT, so both
    sample the same actions): uint8 frame stacks, sticky actions, no-op starts and a lost life
    (which ends the training episode) all as in one process."""
    from functools import partial

    from tensordict import assert_close

    from xdrl.algorithms.ppo import build as build_ppo
    from xdrl.lean.collector import VectorCollector
    from xdrl.training.workers import build_worker_collector

    steps = 24  # per game: the paddle, held left, misses the first ball at step 19
    factory = partial(make_atari_env, "ALE/Breakout-v5")
    env = factory(num_envs=2, seed=3)
    parts = build_ppo(env, frames_per_batch=2 * steps, minibatch_size=2 * steps, epochs=1)
    head = parts.policy.logits_net[1]
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([-30.0, -30.0, -30.0, 30.0]))  # NOOP FIRE RIGHT LEFT
    budget = dict(frames_per_batch=2 * steps, total_frames=2 * steps)
    expected = next(iter(VectorCollector(env, parts.policy, **budget)))
    env.close()
    workers = build_worker_collector(
        factory, parts.policy, workers=2, num_envs=2, seed=3, init_random_frames=0,
        device="cpu", lean=True, **budget,
    )  # fmt: skip
    try:
        got = next(iter(workers))
    finally:
        workers.shutdown()
    assert got["observation"].dtype == torch.uint8
    assert got["observation"].shape == (2, steps, 4, 84, 84)
    assert bool((got["action"] == 3).all())
    assert bool(got["next", "terminated"].any(1).all())  # each game lost a life
    assert_close(got, expected)
