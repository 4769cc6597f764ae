"""The shape every xdrl hook shares: one default hook point, ``register`` as TorchRL's hooks do
it, and an empty ``state_dict`` for hooks that keep nothing across a resume."""

from __future__ import annotations

from typing import Any, ClassVar

from torchrl.trainers.trainers import Trainer, TrainerHookBase


class XdrlHook(TrainerHookBase):
    """A hook called at one Trainer point; a hook set registers its children with
    :meth:`register_ops` and saves their state itself.

    Subclasses set ``hook_point`` and override ``register`` only to name their default module
    name (``def register(self, trainer, name="logging_counters"): super().register(trainer,
    name)``), and ``state_dict``/``load_state_dict`` only when they keep state.

    Example:
        >>> class Frames(XdrlHook):
        ...     hook_point = "pre_steps_log"
        ...     def __call__(self, batch): return {"frames": batch.numel()}
        >>> Frames().register(trainer, name="frames")
    """

    hook_point: ClassVar[str]

    def register_ops(self, trainer: Trainer) -> None:
        """Register this hook at its ``hook_point`` without registering it as a module."""
        trainer.register_op(self.hook_point, self)

    def register(self, trainer: Trainer, name: str) -> None:
        """Register at ``hook_point`` and as the trainer module ``name`` (saved in checkpoints)."""
        self.register_ops(trainer)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        del state_dict
