"""The evaluation env normalizes observations with the training env's statistics, frozen.

With ``env.normalize_observations: true`` each env built by :func:`xdrl.envs.factory.make_env`
carries a
TorchRL ``VecNormV2``. Left alone, the evaluation env's would learn its own running statistics
from evaluation episodes only, so the evaluated policy would see observations scaled otherwise
than those it was trained on (and its numbers would drift with the evaluation schedule). This
hook points the evaluation env's frozen ``VecNormV2`` at the training env's statistics tensors,
once: the training ``VecNormV2`` updates them in place, so every later evaluation reads them as
they are, with no copy per batch. ``xdrl-eval`` loads the same statistics from the checkpoint.
"""

from __future__ import annotations

import warnings
from typing import Any

from torchrl.envs import EnvBase, TransformedEnv
from torchrl.envs.transforms import VecNormV2
from torchrl.trainers.trainers import Trainer

from xdrl.trainer_hooks.base import XdrlHook


def observation_norm(env: EnvBase | None) -> VecNormV2 | None:
    """The ``VecNormV2`` among ``env``'s transforms, or None."""
    if not isinstance(env, TransformedEnv):
        return None
    return next((t for t in env.transform if isinstance(t, VecNormV2)), None)


class ObservationNormSync(XdrlHook):
    """Share the training env's ``VecNormV2`` statistics with the evaluation env's, frozen.

    Registered at ``post_steps_log`` before the evaluation hooks (hooks at one point run in
    registration order), it links the two once the training statistics exist (the first batch;
    a fresh run's pre-training evaluation uses the evaluation env's own) and does nothing after.
    A restore replaces the training tensors: call :meth:`link` again after it.

    Args:
        train_env: the env the collector steps.
        eval_env: the evaluation env (None: no evaluation; the hook does nothing).

    Example:
        >>> sync = ObservationNormSync(train_env, eval_env)
        >>> sync.register(trainer)  # before the evaluation hook set
    """

    hook_point = "post_steps_log"

    def __init__(self, train_env: EnvBase, eval_env: EnvBase | None) -> None:
        self.train_norm = observation_norm(train_env)
        self.eval_norm = observation_norm(eval_env)
        self.linked = False

    @property
    def active(self) -> bool:
        """Whether both envs normalize observations (otherwise the hook does nothing)."""
        return self.train_norm is not None and self.eval_norm is not None

    def __call__(self, *_: Any) -> None:
        if not self.linked:
            self.link()

    def link(self) -> None:
        """Make the evaluation ``VecNormV2`` hold the training one's statistics tensors (loading
        its state dict shares them) and freeze it; nothing until the training ones exist."""
        train, evaluation = self.train_norm, self.eval_norm
        if train is None or evaluation is None or not bool(train.initialized):
            return
        with warnings.catch_warnings():  # the first load into a not yet initialized VecNormV2
            warnings.filterwarnings("ignore", message="VecNorm wasn't initialized")
            evaluation.load_state_dict(train.state_dict())
        evaluation.freeze()
        self.linked = True

    def register(self, trainer: Trainer, name: str = "observation_norm_sync") -> None:
        """Register at ``post_steps_log`` only: the statistics are the envs' (``env_state``)."""
        del name
        self.register_ops(trainer)
