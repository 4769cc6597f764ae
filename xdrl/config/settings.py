"""The typed signatures of the config groups that are not builders: the run's top-level keys,
``algorithm``, ``eval``, ``checkpoint``, ``logging`` and ``collector``.

Each class is the group's schema (house note 1: the signature is the schema): a key is written once
in ``conf/`` (its value and comment) and once here (its type and range); :mod:`xdrl.config.check`
reads these annotations before anything heavy is imported, and its examples come from the
composed defaults, not from here. ``eval``, ``checkpoint`` and ``logging`` name their class as
their ``_target_``, so ``hydra.utils.instantiate(cfg.eval)`` gives a typed, checked object.
Fields carry no defaults where ``conf/`` sets the value (a default here would be a second copy).
Light on purpose: pydantic types only, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xdrl.config.types import NonEmptyStr, PositiveFloat, PositiveInt, Seed


@dataclass(frozen=True)
class RunSettings:
    """The top-level keys of ``conf/config.yaml`` (the groups are checked on their own)."""

    seed: Seed
    device: str
    num_threads: PositiveInt | Literal["auto"]
    precision: Literal["auto", "fp32", "bf16"]
    total_frames: PositiveInt
    frames_per_batch: PositiveInt
    run_dir: str
    exp_name: str
    resume: str | None
    lean: bool
    objective: str
    env: dict
    algorithm: dict
    logging: dict
    eval: dict
    checkpoint: dict
    collector: dict
    pareto: dict


@dataclass(frozen=True)
class AlgorithmSettings:
    """``conf/algorithm/*.yaml``: ``build`` is the builder's own signature, ``optimizer`` a torch
    optimizer's."""

    build: dict
    optimizer: dict
    lr_schedule: Literal["constant", "linear"]
    max_grad_norm: PositiveFloat | None


@dataclass(frozen=True)
class EvalSettings:
    """``conf/eval/*.yaml``: evaluation on a separate env (see the YAML comments)."""

    enabled: bool
    interval_frames: PositiveInt
    episodes: PositiveInt
    max_steps: PositiveInt
    deterministic: bool
    stochastic: bool
    before_training: bool
    render: bool
    video_fps: PositiveInt


@dataclass(frozen=True)
class CheckpointSettings:
    """``conf/checkpoint/*.yaml``: checkpoints under ``<run_dir>/checkpoints``."""

    enabled: bool
    interval_frames: PositiveInt
    keep_last: PositiveInt
    keep_best: bool = True


@dataclass(frozen=True)
class LoggingSettings:
    """``conf/logging/*.yaml``; ``logger`` is a TorchRL logger's own config (instantiate this
    class with ``_recursive_=False`` to keep it a config)."""

    logger: dict | None
    group: NonEmptyStr
    reduce_stats: bool | None
    progress_interval_s: PositiveFloat
    log_model: bool = False


@dataclass(frozen=True)
class CollectorSettings:
    """``conf/collector/*.yaml``: where the training envs step. ``single``: in this process (the
    default); ``process``: ``workers`` processes, each stepping ``env.num_envs / workers`` envs
    (TorchRL's ``MultiSyncCollector``, or ``MultiAsyncCollector`` with ``sync: false``, for
    off-policy algorithms, the weights pushed every ``update_interval`` batches);
    ``ray``: ``workers`` Ray actors (TorchRL's ``RayCollector``) on a local Ray the run starts
    (``address`` null) or on the running cluster at ``address`` (``auto`` or ``host:port``);
    ``env_threads``: threads each process steps its training envs in (envs that wait overlap)."""

    backend: Literal["single", "process", "ray"]
    workers: PositiveInt
    env_threads: PositiveInt = 1
    sync: bool = True
    update_interval: PositiveInt = 1
    address: str | None = None
