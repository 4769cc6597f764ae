"""xdrl logging hooks for TorchRL's Trainer: namespaced metrics, timers, evaluation, W&B.

Every hook returns Python numbers, reduced once per batch, so the Trainer (built with
``log_interval=0`` and ``auto_log_optim_steps=False``) logs each key once per iteration at
``step = trainer.collected_frames``. Namespaces: ``collection/<group>/``,
``train/<group>/``, ``counters/``, ``timers/``, ``eval/<subgroup>/``.
"""

from ._common import (
    COLLECTION_PREFIX,
    COUNTERS_PREFIX,
    EVAL_PREFIX,
    TIMERS_PREFIX,
    TRAIN_PREFIX,
    _as_float,
    _collector_mask,
    _min_mean_max,
    _prepare_episode_reward,
    _scalarize_last_dim,
    _summarize_metric,
)
from .collection import LoggingCollectionMetricsHook
from .counters import LoggingCountersHook
from .evaluation import LoggingEvaluationMetricsHook
from .evaluation_set import LoggingEvaluationHookSet
from .hook_set import LoggingHookSet
from .progress import (
    LoggingProgressMetricsHook,
    ProgressBarHook,
    ProgressLineHook,
    TrainingClock,
)
from .training import LoggingTrainingMetricsHook
from .wandb_hooks import WandbFinishHook, WandbFlushHook

__all__ = [
    "COLLECTION_PREFIX",
    "COUNTERS_PREFIX",
    "EVAL_PREFIX",
    "TIMERS_PREFIX",
    "TRAIN_PREFIX",
    "LoggingCollectionMetricsHook",
    "LoggingCountersHook",
    "LoggingEvaluationHookSet",
    "LoggingEvaluationMetricsHook",
    "LoggingHookSet",
    "LoggingProgressMetricsHook",
    "LoggingTrainingMetricsHook",
    "ProgressBarHook",
    "ProgressLineHook",
    "TrainingClock",
    "WandbFinishHook",
    "WandbFlushHook",
    "_as_float",
    "_collector_mask",
    "_min_mean_max",
    "_prepare_episode_reward",
    "_scalarize_last_dim",
    "_summarize_metric",
]
