"""The exceptions the CLI prints as one line (a bad configuration, a run that failed), the one
line of any other error, and its full trace for the run's log file."""

from __future__ import annotations

import logging


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


def first_line(err: BaseException) -> str:
    """The first non-empty line of ``err``'s message; its type name when the message is empty."""
    lines = str(err).strip().splitlines()
    return lines[0].strip() if lines else type(err).__name__


def trace_to_log_files(err: BaseException, message: str, logger: logging.Logger) -> None:
    """``message`` with ``err``'s full traceback, into the process's log files only (Hydra's
    ``<run_dir>/<job>.log``); the terminal gets the one line the caller prints."""
    trace = (type(err), err, err.__traceback__)
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, message, (), trace)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
