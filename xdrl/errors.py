"""The exceptions the CLI prints as one line: a bad configuration, and a run that failed."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value that cannot work, named by its config key.

    Args:
        key: the dotted config key at fault, e.g. ``"env.reward_weights"``.
        message: what is wrong and how to fix it, in one sentence.

    Example:
        >>> raise ConfigError("env.id", "unknown id 'CartPol-v1'; did you mean 'CartPole-v1'?")
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class RunError(RuntimeError):
    """A run that failed for a reason outside its config (a full disk, a lost mount), said in one
    line; the full traceback is in the run's log.

    Example:
        >>> raise RunError("No space left on device: outputs/run/checkpoints")
    """
