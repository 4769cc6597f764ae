"""The gymnasium wrappers of Atari's training protocol that gymnasium does not ship: episodic
life, FIRE on reset (and, without episodic life, after a lost life) and reward sign clipping
(SB3's ``EpisodicLifeEnv``, ``FireResetEnv`` and ``ClipRewardEnv``). Module-level classes, so
the envs pickle for an exact resume."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np


def _lives(env: gymnasium.Env) -> int:
    """Lives left in the ALE game under ``env``."""
    ale: Any = getattr(env.unwrapped, "ale")  # noqa: B009 - ale_py's AtariEnv attribute
    return int(ale.lives())


class EpisodicLife(gymnasium.Wrapper):
    """A lost life ends the episode (``terminated``), but ``reset`` only resets the game when it
    is really over; otherwise it takes one no-op step and play goes on (DQN's training protocol).

    Example:
        >>> env = EpisodicLife(AtariPreprocessing(gymnasium.make("ALE/Breakout-v5", frameskip=1)))
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = _lives(self.env)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Any:
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _reward, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op lost the last life
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = _lives(self.env)
        return obs, info


class FireReset(gymnasium.Wrapper):
    """After every reset press FIRE, then action 2, for games that wait for FIRE to start
    (Breakout, Pong's serve...): SB3's ``FireResetEnv``.

    With ``after_life_loss`` (where a lost life does not end the episode, as in evaluation) the
    same two presses follow every lost life that leaves the game running: a policy that never
    presses FIRE (an untrained net) would otherwise wait, serve-less, until the time limit
    (Breakout: 27,000 agent steps). Those presses' rewards count in the step that lost the life,
    and a game they end ends that step.

    Example:
        >>> env = FireReset(AtariPreprocessing(gymnasium.make("ALE/Breakout-v5", frameskip=1)))
    """

    after_life_loss = False  # class defaults: envs pickled before these attributes still load
    lives = 0

    def __init__(self, env: gymnasium.Env, after_life_loss: bool = False) -> None:
        super().__init__(env)
        self.after_life_loss = after_life_loss
        self.lives = 0

    def reset(self, **kwargs: Any) -> Any:
        self.env.reset(**kwargs)
        obs, _reward, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            self.env.reset(**kwargs)
        obs, _reward, terminated, truncated, info = self.env.step(2)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        self.lives = _lives(self.env)
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = _lives(self.env)
        lost = lives < self.lives
        self.lives = lives
        if not (self.after_life_loss and lost) or terminated or truncated:
            return obs, reward, terminated, truncated, info
        total = float(reward)
        for press in (1, 2):
            obs, more, terminated, truncated, info = self.env.step(press)
            total += float(more)
            if terminated or truncated:
                break
        self.lives = _lives(self.env)
        return obs, total, terminated, truncated, info


class ClipRewardSign(gymnasium.RewardWrapper):
    """Rewards to their sign: -1, 0 or +1 (DQN's training reward).

    Example:
        >>> ClipRewardSign(env).reward(4.0)
        1.0
    """

    def reward(self, reward: Any) -> float:
        return float(np.sign(reward))
