"""Atari (the Arcade Learning Environment): ``env=atari``, any ``ALE/...`` id with the
preprocessing of Machado et al. (2018) as SB3's ``AtariWrapper`` and CleanRL apply it.

Per sub-env, in order: gymnasium's ``AtariPreprocessing`` (up to ``noop_max`` no-op starts,
``frame_skip`` emulator frames per agent step with a max over the last two, ``screen_size``
square grayscale frames, uint8), then for training only :class:`EpisodicLife` (a lost life ends
the episode; the game goes on), :class:`FireReset` for games whose action set has FIRE (press it
after every reset; without episodic life, as in evaluation, also after every lost life: an
untrained net that never presses FIRE would leave Breakout waiting until its 27,000-step limit),
then for training only :class:`ClipRewardSign`, then gymnasium's
``FrameStackObservation`` (the last ``frame_stack`` frames, ``[frame_stack, 84, 84]`` uint8;
``[1, 84, 84]`` at ``frame_stack: 1``, the CNN's one channel, as CleanRL's ``FrameStack(env, 1)``).
Evaluation envs (``evaluation=True``) play whole games and report the game's own score.

Backend, chosen by measurement (this project's 2-core machine, Breakout, 8 envs, random actions,
same run, another job beside it; ``scripts/atari_backends.py``): these gymnasium wrappers
inside xdrl's :class:`~xdrl.envs.vector_env.VectorGymEnv` stepped 871-1,216 agent steps/s; ale-py's
C++ ``AtariVectorEnv`` 1,239-1,635 at one thread and 1,611-3,029 at two. The C++ env is 1.4x
faster at one thread, but it cannot render the RGB screen for evaluation videos, cannot step a
subset of its sub-envs (evaluation rollouts), resets on its own schedule and has no per-env
state to save for an exact resume; and in a PPO batch the network, not the emulator, takes most
of the time (16 Nature-CNN steps of ~56-98 ms on a quiet machine against ~0.5-1 s to step 1,024
agent steps). So xdrl keeps one code path for every gymnasium env, the observations are
byte-identical to gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation`` (tested), and
a game is saved mid-episode for an exact resume (``xdrl.training.env_state``: ``ale.cloneState``).

Frames: ``frame_skip`` is also what the Trainer multiplies agent steps by, so ``total_frames``,
frames/s and every ``interval_frames`` count emulator frames, as the Atari literature does.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from typing import Any, Literal

from xdrl.config.errors import ConfigError
from xdrl.config.types import Fraction, NonNegativeInt, PositiveInt
from xdrl.envs.factory import ATARI_EXTRA, build_env, register_ale


def is_atari_id(env_id: str) -> bool:
    """Whether ``env_id`` names an Arcade Learning Environment game (``ALE/Pong-v5``,
    ``PongNoFrameskip-v4`` once ale_py registered it, or ``ale_py:...``)."""
    module, _, bare = env_id.rpartition(":")
    if bare.startswith("ALE/") or module == "ale_py":
        return True
    if importlib.util.find_spec("ale_py") is None:
        return False
    import gymnasium

    register_ale()
    spec = gymnasium.envs.registry.get(bare)
    return spec is not None and str(spec.entry_point).startswith("ale_py")


def check_atari(env_id: str) -> None:
    """The pre-training check of ``env=atari``: ale-py and OpenCV import, the id is a game."""
    register_ale()
    if importlib.util.find_spec("cv2") is None:
        raise ConfigError("env.id", f"Atari preprocessing needs OpenCV; install `{ATARI_EXTRA}`")
    if not is_atari_id(env_id):
        raise ConfigError(
            "env.id",
            f"{env_id!r} is not an Atari game; use an ALE id (e.g. ALE/Pong-v5) or env=gym",
        )


def wrap_atari(
    env: Any,
    *,
    noop_max: int,
    frame_skip: int,
    screen_size: int,
    frame_stack: int,
    terminal_on_life_loss: bool,
    clip_rewards: bool,
    fire_reset: bool,
) -> Any:
    """The preprocessing stack of the module docstring around one ``frameskip=1`` ALE env."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    from xdrl.envs.atari_wrappers import ClipRewardSign, EpisodicLife, FireReset

    env = AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=screen_size,
        terminal_on_life_loss=False,
        grayscale_obs=True,
    )
    if terminal_on_life_loss:
        env = EpisodicLife(env)
    meanings = env.unwrapped.get_action_meanings()
    if fire_reset and len(meanings) >= 3 and meanings[1] == "FIRE":
        env = FireReset(env, after_life_loss=not terminal_on_life_loss)
    if clip_rewards:
        env = ClipRewardSign(env)
    return FrameStackObservation(env, frame_stack)  # [k, 84, 84] for every k: a channel at 1


def make_atari_env(
    id: str = "ALE/Breakout-v5",  # noqa: A002 - the config key users know from gymnasium
    *,
    num_envs: PositiveInt = 8,
    batching: Literal["vector", "serial", "parallel"] = "vector",
    max_episode_steps: PositiveInt | None = None,
    frame_skip: PositiveInt = 4,
    frame_stack: PositiveInt = 4,
    noop_max: NonNegativeInt = 30,
    screen_size: PositiveInt = 84,
    repeat_action_probability: Fraction = 0.25,
    terminal_on_life_loss: bool = True,
    clip_rewards: bool = True,
    fire_reset: bool = True,
    reward_weights: None = None,
    normalize_observations: Literal[False] = False,
    make_kwargs: dict[str, Any] | None = None,
    import_modules: Sequence[str] = (),
    seed: int | None = None,
    device: str = "cpu",
    render: bool = False,
    evaluation: bool = False,
):
    """A batched TorchRL env over ``num_envs`` preprocessed Atari games (module docstring).

    Args:
        id: an ALE id, e.g. ``ALE/Pong-v5``.
        num_envs: games stepped together.
        batching: as :func:`xdrl.envs.factory.make_env` (``vector`` is the fast path).
        max_episode_steps: time limit in agent steps (None: the ALE's 108,000 frames).
        frame_skip: emulator frames per agent step (max-pooled over the last two); the frame
            counters count every one.
        frame_stack: frames stacked into one observation.
        noop_max: up to this many no-op actions after a reset (random count).
        screen_size: side of the square grayscale frame.
        repeat_action_probability: sticky actions (0.25: the ``-v5`` default, Machado et al.).
        terminal_on_life_loss: training only: a lost life ends the episode.
        clip_rewards: training only: rewards to their sign.
        fire_reset: press FIRE after a reset in games that need it (and after a lost life
            where that does not end the episode: evaluation, or ``terminal_on_life_loss=false``).
        reward_weights: must be null (Atari rewards are scalar).
        normalize_observations: must be false (pixels are scaled inside the network).
        make_kwargs: extra ``gymnasium.make`` arguments for the ALE env.
        import_modules: modules to import first.
        seed: seed of the first game (the others follow).
        device: device of the env's tensors.
        render: create the games with ``render_mode="rgb_array"`` (evaluation videos show the
            real RGB screen).
        evaluation: an evaluation env: whole games, raw scores (no life loss, no clipping).

    Example:
        >>> env = make_atari_env("ALE/Pong-v5", num_envs=2, seed=0)
        >>> env.reset()["observation"].shape, env.reset()["observation"].dtype
        (torch.Size([2, 4, 84, 84]), torch.uint8)
    """
    check_atari(id)
    kwargs: dict[str, Any] = {
        "frameskip": 1,  # AtariPreprocessing skips frames itself (max-pooled)
        "repeat_action_probability": repeat_action_probability,
    }
    if max_episode_steps is not None:  # gymnasium's TimeLimit counts emulator frames here
        kwargs["max_episode_steps"] = max_episode_steps * frame_skip
    kwargs.update(make_kwargs or {})
    wrap = functools.partial(
        wrap_atari,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=screen_size,
        frame_stack=frame_stack,
        terminal_on_life_loss=terminal_on_life_loss and not evaluation,
        clip_rewards=clip_rewards and not evaluation,
        fire_reset=fire_reset,
    )
    return build_env(
        id,
        num_envs=num_envs,
        batching=batching,
        import_modules=[*import_modules, "ale_py"],  # registers the ids (worker processes too)
        make_kwargs=kwargs,
        seed=seed,
        device=device,
        render=render,
        wrap=wrap,
    )
