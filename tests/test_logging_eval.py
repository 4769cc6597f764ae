"""Evaluation hooks on hand-built rollouts and on real CartPole envs (render path included)."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch.distributions import Categorical
from torchrl.envs import (
    Compose,
    InitTracker,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)
from torchrl.modules import ProbabilisticActor

from tests.conftest import FakeTrainer, cartpole
from xdrl.trainer_hooks.logging import (
    LoggingEvaluationHookSet,
    LoggingEvaluationMetricsHook,
    LoggingHookSet,
)

D = "eval/deterministic"


def _serial(n: int = 3, render: bool = False) -> SerialEnv:
    env = SerialEnv(n, lambda: cartpole(render))
    env.set_seed(0)
    return env


class _PushLeft(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, observation):
        self.calls += 1
        return torch.zeros(observation.shape[:-1], dtype=torch.long)


def _left_policy():
    return TensorDictModule(_PushLeft(), in_keys=["observation"], out_keys=["action"])


def _left_leaning_actor():
    """Categorical actor with logits (0.1, 0): its mode always pushes left."""
    net = torch.nn.Linear(4, 2)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.copy_(torch.tensor([0.1, 0.0]))
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(
        module, in_keys=["logits"], out_keys=["action"], distribution_class=Categorical
    )


def _hook(env, policy, **kwargs) -> LoggingEvaluationMetricsHook:
    defaults = dict(
        group="agents",
        metric_subgroup="deterministic",
        interval_frames=500,
        max_steps=200,
        deterministic=True,
        render=False,
        video_fps=15,
    )
    defaults.update(kwargs)
    return LoggingEvaluationMetricsHook(policy=policy, environment=env, **defaults)


class _RecordingLogger:
    def __init__(self, fail_video: bool = False):
        self.scalars: list[tuple[str, float, int]] = []
        self.videos: list[tuple[str, torch.Tensor, int, int]] = []
        self.fail_video = fail_video

    def log_scalar(self, name, value, step=None):
        self.scalars.append((name, value, step))

    def log_video(self, name, video, step=None, fps=None):
        if self.fail_video:
            raise RuntimeError("no encoder")
        self.videos.append((name, video, step, fps))


def test_metrics_count_only_the_first_episode_of_each_sub_env():
    # 3 sub-envs x 6 steps: env 0 ends at t=1 and t=4, env 1 at t=3, env 2 never (max_steps).
    done = torch.zeros(3, 6, 1, dtype=torch.bool)
    done[0, 1] = done[0, 4] = done[1, 3] = True
    reward = torch.arange(18, dtype=torch.float32).reshape(3, 6, 1)
    episode_reward = torch.zeros(3, 6, 2)
    episode_reward[0, 1] = torch.tensor([1.0, -1.0])
    episode_reward[1, 3] = torch.tensor([3.0, 5.0])
    episode_reward[2, 5] = torch.tensor([2.0, 0.0])
    rollout = TensorDict(
        {"next": {"done": done, "reward": reward, "episode_reward": episode_reward}}, [3, 6]
    )
    out = _hook(None, None)._metrics(rollout)
    # Returns: 0+1 = 1; 6+7+8+9 = 30; 12+...+17 = 87. Lengths 2, 4, 6.
    assert out == pytest.approx(
        {
            f"{D}/reward/episode_reward_min": 1.0,
            f"{D}/reward/episode_reward_mean": 118.0 / 3.0,
            f"{D}/reward/episode_reward_max": 87.0,
            f"{D}/episode_len_mean": 4.0,
            f"{D}/episodes_ended": 2.0 / 3.0,  # no terminated key: done, env 2 never
            f"{D}/reward/objective_0/episode_reward_min": 1.0,
            f"{D}/reward/objective_0/episode_reward_mean": 2.0,
            f"{D}/reward/objective_0/episode_reward_max": 3.0,
            f"{D}/reward/objective_1/episode_reward_min": -1.0,
            f"{D}/reward/objective_1/episode_reward_mean": 4.0 / 3.0,
            f"{D}/reward/objective_1/episode_reward_max": 5.0,
        }
    )
    assert all(type(v) is float for v in out.values())


def test_serial_env_one_episode_per_sub_env_and_early_stop():
    env = _serial(3)
    policy = _left_policy()
    out = _hook(env, policy).run(step=0)
    # CartPole pays 1 per step and always pushing left falls after 8 to 11 steps.
    assert out[f"{D}/reward/episode_reward_mean"] == pytest.approx(out[f"{D}/episode_len_mean"])
    assert 8 <= out[f"{D}/reward/episode_reward_min"] <= out[f"{D}/reward/episode_reward_max"] <= 11
    # The rollout stopped when the last sub-env finished its first episode.
    assert policy.module.calls == out[f"{D}/reward/episode_reward_max"]
    env.close()


def test_single_env_and_max_steps_truncation():
    env = cartpole()
    env.set_seed(1)
    out = _hook(env, _left_policy()).run(step=0)
    assert 8 <= out[f"{D}/episode_len_mean"] <= 11
    assert out[f"{D}/reward/episode_reward_min"] == out[f"{D}/reward/episode_reward_max"]
    truncated = _hook(_serial(2), _left_policy(), max_steps=5).run(step=0)
    assert truncated[f"{D}/episode_len_mean"] == 5.0
    assert truncated[f"{D}/reward/episode_reward_mean"] == 5.0


def test_deterministic_and_random_exploration_differ():
    env = _serial(4)
    actor = _left_leaning_actor()
    env.set_seed(0)
    left = _hook(env, _left_policy()).run(step=0)
    env.set_seed(0)
    deterministic = _hook(env, actor).run(step=0)
    assert deterministic == left
    env.set_seed(0)
    torch.manual_seed(0)
    stochastic = _hook(env, actor, deterministic=False, metric_subgroup="stochastic").run(step=0)
    assert set(stochastic) == {k.replace("deterministic", "stochastic") for k in left}
    assert stochastic["eval/stochastic/reward/episode_reward_mean"] != pytest.approx(
        left[f"{D}/reward/episode_reward_mean"]
    )
    assert actor.training  # train mode restored after evaluation


def test_schedule_interval_final_and_state():
    trainer = FakeTrainer(total_frames=1000)
    hook = _hook(_serial(2), _left_policy(), interval_frames=500)
    hook.register(trainer, name="eval_det")
    assert trainer.ops == [("post_steps_log", hook)] and trainer.modules == {"eval_det": hook}
    evaluated = []
    for frames in (300, 600, 900, 1000):
        trainer.collected_frames = frames
        out = hook(None)
        if out:
            evaluated.append(frames)
            assert all(type(v) is float for v in out.values())
    assert evaluated == [600, 1000]  # crossed 500, then the final policy
    assert hook.last_metrics == out and hook.num_evaluations == 2
    restored = _hook(None, None)
    restored.load_state_dict(hook.state_dict())
    assert restored.state_dict() == hook.state_dict()
    assert restored.state_dict()["last_eval_frames"] == 1000
    trainer.collected_frames = 1000
    restored.trainer = trainer
    assert restored(None) == {}  # already evaluated at these frames


def test_render_logs_a_video_of_the_first_sub_env():
    logger = _RecordingLogger()
    env = _serial(2, render=True)
    hook = _hook(env, _left_policy(), render=True, logger=logger)
    out = hook.run(step=0)
    assert len(logger.videos) == 1
    name, video, step, fps = logger.videos[0]
    assert (name, step, fps) == (f"{D}/video", 0, 15)
    assert video.dtype == torch.uint8 and video.ndim == 5
    assert video.shape[0] == 1 and video.shape[2:] == (3, 400, 600)
    assert 2 <= video.shape[1] <= out[f"{D}/reward/episode_reward_max"] + 1
    assert {name for name, _, _ in logger.scalars} == set(out)
    assert hook._renderable_candidates()  # found through SerialEnv -> GymEnv -> gymnasium
    single = _hook(cartpole(render=True), _left_policy(), render=True, logger=logger)
    length = single.run(step=5)[f"{D}/episode_len_mean"]
    assert logger.videos[-1][1].shape[2:] == (3, 400, 600) and logger.videos[-1][2] == 5
    # the reset frame, then one per step up to the one that ends the episode (the last comes
    # after TorchRL's rollout, which calls no callback after its final step)
    assert logger.videos[-1][1].shape[1] == length + 1


def test_render_failure_only_warns():
    logger = _RecordingLogger()
    hook = _hook(_serial(2), _left_policy(), render=True, logger=logger)  # no render_mode
    with pytest.warns(UserWarning, match="rendering failed"):
        out = hook.run(step=0)
    assert out[f"{D}/episode_len_mean"] > 0 and logger.videos == []
    broken = _RecordingLogger(fail_video=True)
    hook = _hook(_serial(1, render=True), _left_policy(), render=True, logger=broken)
    with pytest.warns(UserWarning, match="could not log the video"):
        assert hook.run(step=0)


def test_frame_conversion():
    convert = LoggingEvaluationMetricsHook._to_frame_array
    assert convert(torch.ones(3, 4, 5)).shape == (4, 5, 3)  # CHW -> HWC
    assert convert(torch.full((4, 5, 4), 0.5)).dtype.name == "uint8"  # RGBA float -> RGB
    assert convert(torch.full((4, 5, 4), 0.5))[0, 0, 0] == 127
    assert convert(torch.zeros(4, 5)).shape == (4, 5, 1)
    with pytest.raises(ValueError):
        convert(torch.zeros(2, 2, 2, 2))


def test_hook_set_two_subgroups_share_env_and_schedule():
    env = _serial(2)
    logger = _RecordingLogger()
    evals = LoggingEvaluationHookSet(
        policy=_left_leaning_actor(),
        environment=env,
        group="agents",
        interval_frames=100,
        max_steps=50,
        deterministic=True,
        non_deterministic=True,
        render=False,
        video_fps=30,
        logger=logger,
    )
    assert [h.metric_subgroup for h in evals.hooks] == ["deterministic", "stochastic"]
    assert all(h.environment is env for h in evals.hooks)
    trainer = FakeTrainer(logger=logger)
    evals.register(trainer, name="evals")
    assert list(trainer.modules) == ["evals_deterministic", "evals_stochastic"]
    out = evals.run(step=0)
    assert any(k.startswith("eval/deterministic/") for k in out)
    assert any(k.startswith("eval/stochastic/") for k in out)
    assert {(name, step) for name, _, step in logger.scalars} == {(k, 0) for k in out}
    assert evals.last_metrics == out
    assert evals.pop_eval_time() > 0 and evals.pop_eval_time() == 0
    evals.close()
    evals.close()
    assert env.is_closed


def test_logging_hook_set_pre_eval_logs_at_step_zero():
    logger = _RecordingLogger()
    evals = LoggingEvaluationHookSet(
        policy=_left_policy(),
        environment=_serial(2),
        group="agents",
        interval_frames=100,
        max_steps=50,
        deterministic=True,
        non_deterministic=False,
        render=False,
        video_fps=30,
    )
    hooks = LoggingHookSet(group="agents", frame_skip=1, eval_hook_set=evals)
    trainer = FakeTrainer(logger=logger)
    hooks.register(trainer)
    out = hooks.run_pre_eval()
    assert f"{D}/reward/episode_reward_mean" in out
    assert {step for _, _, step in logger.scalars} == {0}
    assert hooks.state_dict()["eval"]["deterministic"]["num_evaluations"] == 1
    trainer.collected_frames = 64  # resumed run: no second step-0 evaluation
    assert hooks.run_pre_eval() == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hooks.close()


def test_multi_objective_env_logs_scalarized_and_per_objective_returns():
    from torchrl.envs import LineariseRewards, MOGymEnv

    def make():
        base = MOGymEnv("deep-sea-treasure-v0", categorical_action_encoding=True)
        transforms = Compose(
            StepCounter(),
            RewardSum(in_keys=["reward"], out_keys=["episode_reward"]),
            LineariseRewards(in_keys=["reward"], weights=[0.25, 0.75]),
            InitTracker(),
        )
        return TransformedEnv(base, transforms)

    env = SerialEnv(3, make)
    env.set_seed(0)
    torch.manual_seed(0)
    out = _hook(env, None, max_steps=100).run(step=0)  # policy None: random actions
    r = f"{D}/reward"
    # Main keys sum the linearised reward; objective keys come from the raw vector returns.
    assert out[f"{r}/episode_reward_mean"] == pytest.approx(
        0.25 * out[f"{r}/objective_0/episode_reward_mean"]
        + 0.75 * out[f"{r}/objective_1/episode_reward_mean"],
        abs=1e-5,
    )
    assert f"{r}/objective_2/episode_reward_mean" not in out
    env.close()


def test_video_joins_the_pending_wandb_row():
    from torchrl.record.loggers.wandb import WandbLogger

    class RecordingWandb(WandbLogger):
        def __init__(self):  # no wandb.init
            self.calls = []

        def log_video(self, name, video, **kwargs):
            self.calls.append((name, tuple(video.shape), kwargs))

    logger = RecordingWandb()
    _hook(_serial(1, render=True), _left_policy(), render=True, logger=logger)._evaluate_once(64)
    ((name, shape, kwargs),) = logger.calls
    assert name == f"{D}/video" and shape[:1] == (1,)
    assert kwargs == {"step": 64, "fps": 15, "commit": False}
