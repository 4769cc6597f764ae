"""Evaluate a loaded policy over N episodes with the training hooks' own evaluation code
(:func:`~xdrl.trainer_hooks.logging.evaluation_metrics.evaluation_rollout` on the run's env with
one episode per sub-env, :func:`~xdrl.trainer_hooks.logging.evaluation_metrics.episodes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torchrl.modules import EGreedyModule

from xdrl.policy.loading import LoadedPolicy
from xdrl.trainer_hooks.logging.evaluation_metrics import episodes, evaluation_rollout


def evaluate(
    policy: LoadedPolicy,
    *,
    deterministic: bool = True,
    max_steps: int | None = None,
    video: str | Path | None = None,
) -> dict[str, Any]:
    """Play one episode per sub-env of ``policy.env``; the ``--json`` record of ``xdrl-eval``.

    ``max_steps``: step cap (None: the run's ``eval.max_steps``). ``video``: an mp4 of every
    episode, one after another (the env must be built with ``render=True``; with
    ``env.batching=parallel`` the sub-envs live in other processes and only the first episode
    is recorded). A value-based policy's record states its ``epsilon``: 0 (greedy) when
    deterministic, its evaluation epsilon (DQN's ``algorithm.build.eval_epsilon``) when not.
    """
    from xdrl.trainer_hooks.logging.video import EpisodesRecorder, FrameRecorder, write_mp4
    from xdrl.training.env_state import gym_envs

    env = policy.env
    steps = max_steps if max_steps is not None else policy.spec.eval.max_steps
    recorder: EpisodesRecorder | FrameRecorder | None = None
    if video is not None:
        envs = gym_envs(env)
        recorder = EpisodesRecorder(envs) if envs else FrameRecorder(env, label="xdrl-eval")
    rollout = evaluation_rollout(
        env,
        policy.module,
        steps,
        deterministic=deterministic,
        after_reset=recorder.start if recorder is not None else None,
    )
    if recorder is not None:
        recorder.finish()
    found = episodes(rollout)
    returns = found.returns.tolist()
    record: dict[str, Any] = {
        "run_dir": str(policy.run_dir),
        "checkpoint": str(policy.checkpoint),
        "frames": policy.frames,
        "episodes": len(returns),
        "deterministic": deterministic,
        **_epsilon(policy.module, deterministic),
        "return_mean": float(found.returns.mean()),
        "return_std": float(found.returns.std(unbiased=False)),
        "returns": returns,
        "lengths": [int(n) for n in found.lengths.tolist()],
    }
    if found.objective_returns is not None:
        record["objective_returns"] = found.objective_returns.tolist()
        record["objective_return_means"] = found.objective_returns.mean(0).tolist()
        record["scalarized_return_mean"] = record["return_mean"]
    if recorder is not None and video is not None and recorder.frames:
        record["video"] = str(write_mp4(recorder.frames, video, policy.spec.eval.video_fps))
    return record


def evaluation_epsilon(policy: torch.nn.Module) -> float | None:
    """The epsilon of the ``EGreedyModule`` inside an evaluation policy, to float32's 7 digits
    (None: no epsilon-greedy module, e.g. a policy that samples from a distribution)."""
    for module in policy.modules():
        if isinstance(module, EGreedyModule):
            return float(f"{float(module.eps):.7g}")
    return None


def _epsilon(module: torch.nn.Module, deterministic: bool) -> dict[str, float]:
    epsilon = evaluation_epsilon(module)
    if epsilon is None:
        return {}
    return {"epsilon": 0.0 if deterministic else epsilon}
