"""The run's env rebuilt from its saved config (:func:`make_env`), what its policy takes from it
(:func:`policy_input_env`: the gymnasium observation below the one-hot encoding and the
``env.mask_observations`` mask, which the policy applies itself), and why a checkpoint does not
fit an env changed by an override (:func:`env_mismatch`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from omegaconf import OmegaConf

from xdrl.config.errors import ConfigError, first_line
from xdrl.envs.observation_encoding import integer_grid
from xdrl.policy.module import ObservationMask, OneHot


def make_env(config: dict[str, Any], *, num_envs: int, seed: int, render: bool = False) -> Any:
    """The run's env, built by its own ``env`` factory (``xdrl.envs.factory.make_env`` via
    Hydra)."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        from xdrl.lean.collector import fast_rollouts

        factory = instantiate(OmegaConf.create(config["env"]))
        env = factory(num_envs=num_envs, seed=seed, device="cpu", render=render, evaluation=True)
        return fast_rollouts(env)
    except InstantiationException as err:
        cause = err.__cause__ or err
        if isinstance(cause, ConfigError):
            raise cause from err
        raise ConfigError("env", first_line(cause)) from err


class PolicyInput(NamedTuple):
    """What a loaded policy takes, read from the run's env.

    Args:
        env: the gymnasium env whose ``step`` returns the policy's input (below the one-hot
            encoding and the observation mask, which the policy applies itself).
        one_hot: the run's one-hot encoding as a module (None: none).
        mask: the run's ``env.mask_observations`` as a module (None: none).
        owner: the TorchRL env to close after use.
    """

    env: Any
    one_hot: OneHot | None
    mask: ObservationMask | None
    owner: Any


def policy_input_env(env: Any, config: dict[str, Any]) -> PolicyInput:
    """The first gymnasium env inside ``env`` with the stateless wrappers the policy applies
    itself peeled off (the one-hot encoding, then the observation mask), as a
    :class:`PolicyInput`; its owner is ``env`` itself, or a one-env copy built from ``config``
    where ``env``'s gymnasium envs live in other processes or are not created yet."""
    from xdrl.envs.masking import masked_indices
    from xdrl.envs.observation_encoding import OneHotObservation
    from xdrl.training.env_state import gym_envs

    owner = env
    envs = gym_envs(env)
    if not envs:
        single = {**config, "env": {**config["env"], "batching": "serial"}}
        owner = make_env(single, num_envs=1, seed=int(config["seed"]))
        envs = gym_envs(owner)
        assert envs, "a one-env serial env holds its gymnasium env"
    first, one_hot, mask = envs[0], None, None
    if isinstance(first, OneHotObservation):
        one_hot = OneHot(*integer_grid(first.env.observation_space))
        first = first.env
    indices = masked_indices(first)
    if indices is not None:
        first = first.env
        mask = ObservationMask(indices, int(np.prod(first.observation_space.shape)))
    return PolicyInput(first, one_hot, mask, owner)


def env_mismatch(
    saved: dict[str, Any], config: dict[str, Any], env: Any, overrides: list[str]
) -> ConfigError | None:
    """Why a checkpoint does not fit the env that ``overrides`` made, when that is the reason:
    its observations (as ``env.step`` returns them) or actions differ from those of the run's
    own env, named by the override's key; None when they agree or nothing in ``env`` changed."""
    changed = [item.partition("=")[0] for item in overrides if item.startswith("env.")]
    if not changed:
        return None
    key = "env.id" if "env.id" in changed else changed[0]
    trained_env = make_env(saved, num_envs=1, seed=int(saved["seed"]))
    owners = [trained_env]
    try:
        trained, now = policy_input_env(trained_env, saved), policy_input_env(env, config)
        owners += [taken.owner for taken in (trained, now) if taken.owner is not env]
        was, new = saved["env"]["id"], config["env"]["id"]
        fix = "evaluate on the run's env"
        shapes = (
            tuple(trained.env.observation_space.shape),
            tuple(now.env.observation_space.shape),
        )
        if shapes[0] != shapes[1]:
            return ConfigError(
                key, f"{new} gives observations of shape {shapes[1]}, the policy was trained on "
                f"{shapes[0]} ({was}); {fix}",
            )  # fmt: skip
        actions = (trained.env.action_space, now.env.action_space)
        if actions[0] != actions[1]:
            return ConfigError(
                key, f"{new} has actions {actions[1]}, the policy was trained on {actions[0]} "
                f"({was}); {fix}",
            )  # fmt: skip
        return None
    finally:
        for owner in owners:
            owner.close()
