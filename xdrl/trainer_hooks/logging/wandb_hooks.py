"""Weights & Biases hooks: commit one history row per iteration, finish the run at shutdown."""

from __future__ import annotations

import logging
from typing import Any

from torchrl.trainers.trainers import Trainer

from xdrl.training.loggers import close_logger

from ..base import XdrlHook

log = logging.getLogger(__name__)


def _is_wandb_logger(logger: Any) -> bool:
    try:
        from torchrl.record.loggers.wandb import WandbLogger
    except ImportError:  # pragma: no cover - torchrl always ships the module
        return False
    return isinstance(logger, WandbLogger)


class WandbFlushHook(XdrlHook):
    """Flush pending W&B scalar rows emitted through TorchRL's scalar logger.

    The xdrl W&B logger logs every scalar of an iteration with ``commit=False`` at
    ``step=collected_frames``; this hook commits that row once per iteration (register it
    last at ``post_steps_log``) and at ``shutdown``, so metrics appear while a long job
    runs. It commits only when something was logged since the last flush and does nothing
    when the trainer's logger is not a W&B logger (or is None).

    Args:
        enabled: False turns the hook into a no-op.

    Example:
        >>> flush = WandbFlushHook()
        >>> flush.register(trainer)  # after every other post_steps_log hook
    """

    hook_point = "post_steps_log"

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)
        self.trainer: Trainer | None = None
        self._last_flushed_steps: tuple[tuple[str, int], ...] = ()
        self._last_local_step: int | None = None

    @staticmethod
    def _wandb_step_registry(logger: Any) -> tuple[tuple[str, int], ...]:
        """The W&B logger's per-prefix step registry as a sorted tuple (empty if none)."""
        registry = getattr(logger, "_step_registry", None)
        if not isinstance(registry, dict):
            return ()
        return tuple(sorted((str(key), int(value)) for key, value in registry.items()))

    @staticmethod
    def _wandb_experiment(logger: Any) -> Any | None:
        """``logger.experiment`` when ``logger`` is a W&B logger, else None (creates no run)."""
        if logger is None or not _is_wandb_logger(logger):
            return None
        experiment = vars(logger).get("experiment")
        return experiment if experiment is not None else getattr(logger, "experiment", None)

    def __call__(self, *_args: Any, **_kwargs: Any) -> None:
        if not self.enabled or self.trainer is None:
            return
        logger = self.trainer.logger
        experiment = self._wandb_experiment(logger)
        if experiment is None:
            return
        steps = self._wandb_step_registry(logger)
        if not steps:
            # Nothing logged by this process yet (a resumed run drops the steps its killed
            # predecessor already wrote): a commit now would add an empty row at W&B step 0.
            return
        local_step = getattr(experiment, "_local_step", None)
        if steps == self._last_flushed_steps and local_step == self._last_local_step:
            return
        try:
            experiment.log({}, commit=True)
        except Exception as err:  # noqa: BLE001 - a finished or broken run never stops training
            log.warning("W&B flush failed: %s", err)
            return
        self._last_flushed_steps = steps
        self._last_local_step = getattr(experiment, "_local_step", None)

    def register_ops(self, trainer: Trainer) -> None:
        """Flush after every iteration and at shutdown."""
        self.trainer = trainer
        # W&B's step at start-up is no pending row: a resumed run whose first iterations only
        # repeat steps its killed predecessor wrote (and drops) must not commit an empty row.
        experiment = self._wandb_experiment(trainer.logger) if self.enabled else None
        self._last_local_step = getattr(experiment, "_local_step", None)
        trainer.register_op("post_steps_log", self)
        trainer.register_op("shutdown", self)

    def register(self, trainer: Trainer, name: str = "wandb_flush") -> None:
        super().register(trainer, name)

    def state_dict(self) -> dict[str, Any]:
        return {"last_flushed_steps": self._last_flushed_steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._last_flushed_steps = tuple(
            (str(key), int(value)) for key, value in state_dict.get("last_flushed_steps", ())
        )


class WandbFinishHook(XdrlHook):
    """Finish the W&B run at the Trainer's ``shutdown`` stage.

    Closes the trainer's logger with :func:`xdrl.training.loggers.close_logger` (TorchRL's
    ``Logger.close()``, which finishes the W&B run), the one place xdrl finishes W&B: the run
    calls it again in a ``finally`` for crashes and signals, where it does nothing the second
    time. Errors are logged and swallowed, so offline or disabled W&B runs never fail shutdown.
    Does nothing when the trainer's logger is not a W&B logger.

    Args:
        enabled: False turns the hook into a no-op.

    Example:
        >>> WandbFlushHook().register(trainer)
        >>> WandbFinishHook().register(trainer)  # after the flush hook
    """

    hook_point = "shutdown"

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)
        self.trainer: Trainer | None = None

    def __call__(self) -> None:
        if self.enabled and self.trainer is not None and _is_wandb_logger(self.trainer.logger):
            close_logger(self.trainer.logger)

    def register_ops(self, trainer: Trainer) -> None:
        self.trainer = trainer
        super().register_ops(trainer)

    def register(self, trainer: Trainer, name: str = "wandb_finish") -> None:
        super().register(trainer, name)
