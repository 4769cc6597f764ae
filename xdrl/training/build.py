"""build_trainer(spec): wires a TorchRL Trainer from a run's checked
:class:`~xdrl.config.spec.RunSpec`; each builder takes the values it uses."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from hydra.errors import InstantiationException
from hydra.utils import get_method, instantiate
from omegaconf import DictConfig, OmegaConf
from torchrl.collectors import Collector
from torchrl.envs.utils import ExplorationType
from torchrl.trainers import Trainer

from xdrl.algorithms.common import AlgorithmParts
from xdrl.algorithms.recurrent import recurrent_primers
from xdrl.algorithms.stepper import DetachedOptimizationStepper
from xdrl.config.check import check_config
from xdrl.config.errors import ConfigError, first_line
from xdrl.config.resume import saved_budget
from xdrl.config.settings import EvalSettings
from xdrl.config.spec import RunSpec
from xdrl.envs.factory import quiet_vecnorm_note, reward_weights_of
from xdrl.lean.collector import VectorCollector, fast_rollouts, fits
from xdrl.lean.trainer import ScheduledSaveTrainer, XdrlTrainer
from xdrl.trainer_hooks.evaluation_history import EvaluationHistory
from xdrl.trainer_hooks.logging import (
    LoggingEvaluationHookSet,
    LoggingHookSet,
    ProgressBarHook,
    ProgressLineHook,
    TrainingClock,
    WandbFinishHook,
    WandbFlushHook,
)
from xdrl.trainer_hooks.observation_norm import ObservationNormSync
from xdrl.trainer_hooks.stop_request import StopRequestHook
from xdrl.training.checkpointing import (
    BEST_METRIC,
    check_before_resume,
    make_checkpointing,
    restore,
    resume_candidates,
    resumed_run_dir,
)
from xdrl.training.env_state import EnvState
from xdrl.training.loggers import WandbLogger, log_config, stable_run_id
from xdrl.training.precision import Precision, device_has_bf16, resolve_precision
from xdrl.training.schedules import BudgetLinearLR, budget_line, lr_schedule
from xdrl.training.worker_norm import RunObservationNorm, find_norm
from xdrl.training.workers import WorkerCollector, build_worker_collector, set_env_threads

if TYPE_CHECKING:
    from xdrl.training.ray_workers import RayWorkerCollector

log = logging.getLogger(__name__)


@dataclass
class Run:
    """A built run: the Trainer and what must be closed after it."""

    trainer: Trainer
    hook_set: LoggingHookSet
    logger: Any
    envs: list[Any] = field(default_factory=list)
    workers: WorkerCollector | RayWorkerCollector | None = None  # stopped by close()
    resumed_from: str | None = None
    resume_approximate: str | None = None  # why a resume is not exact (None: exact)
    precision: Precision = "fp32"  # the networks' arithmetic: fp32, or bf16 autocast
    stop_request: StopRequestHook | None = None  # a stop asked through <run_dir>/stop-request.json
    budget_from: int | None = None  # the resumed checkpoint's budget, when total_frames changed
    clock: TrainingClock | None = None  # training time: the progress line's and summary.json's

    def close(self) -> None:
        """Close the environments (collector, evaluation) and stop the collector's worker
        processes; safe to call twice."""
        if self.workers is not None:
            self.workers.shutdown(raise_on_error=False)
        self.hook_set.close()
        for env in self.envs:
            if not env.is_closed:
                env.close()
        self.envs.clear()


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch before any network is built."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _as_spec(spec: RunSpec | DictConfig) -> RunSpec:
    """``spec``, or the spec :func:`~xdrl.config.check.check_config` makes of a composed config;
    logs the rounding of ``total_frames`` to whole batches."""
    if not isinstance(spec, RunSpec):
        spec = check_config(spec)
    if spec.total_frames != spec.requested_total_frames:
        log.info(
            "total_frames %d rounded up to %d (a whole number of %d-frame batches)",
            spec.requested_total_frames,
            spec.total_frames,
            spec.batch_frames,
        )
    return spec


def _instantiate(node: DictConfig, key: str, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` whose failures name the config key."""
    try:
        obj = instantiate(node)
        return obj(**kwargs) if kwargs else obj
    except ConfigError:
        raise
    except InstantiationException as err:
        cause = err.__cause__ or err
        if isinstance(cause, ConfigError):
            raise cause from err
        raise ConfigError(key, first_line(cause)) from err
    except TypeError as err:
        raise ConfigError(key, f"{first_line(err)} (check the keys under {key})") from err


def build_algorithm(
    build: DictConfig,
    env: Any,
    *,
    frames_per_batch: int,
    device: str,
    total_frames: int,
    frame_skip: int,
    lean: bool = True,
) -> AlgorithmParts:
    """The algorithm's policy, loss and hooks for ``env`` from its ``algorithm.build`` node
    (``total_frames``, ``frame_skip`` and ``lean`` only to a builder whose signature takes
    them)."""
    import inspect

    log.info("Instantiating algorithm <%s>", build._target_)
    extra: dict[str, Any] = {}
    try:
        params = inspect.signature(get_method(build._target_)).parameters
    except Exception:  # noqa: BLE001 - instantiation below names the bad target
        params = {}  # type: ignore[assignment]
    if "total_frames" in params:
        extra["total_frames"] = total_frames
    if "frame_skip" in params:
        extra["frame_skip"] = frame_skip
    if "lean" in params:
        extra["lean"] = lean
    return _instantiate(
        build,
        "algorithm.build",
        env=env,
        frames_per_batch=frames_per_batch,
        device=device,
        **extra,
    )


def build_logger(
    node: DictConfig | None, config: dict[str, Any], resume_dir: str | None = None
) -> Any:
    """The TorchRL logger of the ``logging.logger`` node (None for ``logging=none``), given the
    run's resolved ``config`` to record.

    A W&B run resumed from another run dir keeps that run's id; sweep jobs share a group.
    """
    if node is None:
        return None
    log.info("Instantiating logger <%s>", node._target_)
    overrides: dict[str, Any] = {}
    if "id" in node and node.id is None and resume_dir is not None:
        overrides["id"] = stable_run_id(resume_dir)
    if "group" in node and node.group is None:
        overrides["group"] = _sweep_group()
    merged = OmegaConf.merge(node, overrides) if overrides else node
    logger = _instantiate(merged, "logging.logger")  # type: ignore[arg-type]
    log_config(logger, config)
    return logger


def _sweep_group() -> str | None:
    """The sweep folder's name in a Hydra multirun (None for a single run)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    return "/".join(hydra_cfg.sweep.dir.rstrip("/").split("/")[-2:])


def add_recurrent_state(env: Any, policy: Any) -> Any:
    """Append to ``env`` the primers that hold ``policy``'s hidden states (zeros at each reset)
    when it holds an LSTM or GRU cell, and return them (None: no cell, ``env`` unchanged). The
    primers keep such an env off xdrl's lean collector and rollouts
    (:func:`~xdrl.lean.collector.fits`): TorchRL's carry the state."""
    primers = recurrent_primers(policy)
    if primers is not None:
        with quiet_vecnorm_note():  # re-attaching a VecNormV2 repeats its note
            env.append_transform(primers)
    return primers


def build_collector(
    env: Any,
    parts: AlgorithmParts,
    *,
    frames_per_batch: int,
    total_frames: int,
    frame_skip: int,
    device: str,
    lean: bool = True,
) -> Any:
    """xdrl's :class:`~xdrl.lean.collector.VectorCollector` where it fits (same batches, ~8x less
    time per batch) and ``lean``, else TorchRL's ``Collector`` (``total_frames`` in frames,
    whole batches)."""
    if lean and fits(env, parts.policy, parts.init_random_frames, normalize=True):
        return VectorCollector(
            env,
            parts.policy,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            init_random_frames=parts.init_random_frames,
            device=device,
            frame_skip=frame_skip,
        )
    skip = frame_skip  # TorchRL's Collector counts agent steps; xdrl's budgets are frames
    return Collector(
        env,
        parts.policy,
        frames_per_batch=frames_per_batch,
        total_frames=-(-total_frames // skip),
        device=device,
        init_random_frames=-(-parts.init_random_frames // skip),
        exploration_type=ExplorationType.RANDOM,
        track_traj_ids=False,  # nothing reads traj_ids; skipping them saves ~20% of collection
    )


def _train_collector(
    spec: RunSpec, env_factory: Any, train_env: Any, parts: AlgorithmParts
) -> tuple[Any, WorkerCollector | RayWorkerCollector | None]:
    """The run's collector: in-process (:func:`build_collector`), or worker processes for
    ``collector=multiprocess`` or Ray actors for ``collector=ray`` (then also returned second,
    to be stopped by ``Run.close``); with
    workers, ``train_env``'s observation statistics are the run's, which the workers read, and
    each worker's envs get the recurrent policy's state primers (made for their batch size)."""
    if spec.collector.backend == "single":
        set_env_threads(train_env, spec.collector.env_threads)
        collector = build_collector(
            train_env,
            parts,
            frames_per_batch=spec.frames_per_batch,
            total_frames=spec.total_frames,
            frame_skip=spec.frame_skip,
            device=spec.device,
            lean=spec.lean,
        )
        return collector, None
    skip = spec.frame_skip  # TorchRL's collectors count agent steps; xdrl's budgets frames
    norm = RunObservationNorm(train_env) if find_norm(train_env) is not None else None
    common: dict[str, Any] = {
        "workers": spec.collector.workers,
        "num_envs": int(train_env.batch_size[0]),
        "seed": spec.seed,
        "frames_per_batch": spec.frames_per_batch,
        "total_frames": -(-spec.total_frames // skip),
        "init_random_frames": -(-parts.init_random_frames // skip),
        "device": spec.device,
        "lean": spec.lean and fits(train_env, parts.policy, parts.init_random_frames),
        "env_threads": spec.collector.env_threads,
        "observation_norm": norm,
        "state_primers": recurrent_primers(parts.policy),
    }
    if spec.collector.backend == "ray":  # imported here: Ray starts only for collector=ray
        from xdrl.training.ray_workers import build_ray_collector

        ray_workers = build_ray_collector(
            env_factory, parts.policy, address=spec.collector.address, **common
        )
        return ray_workers, ray_workers
    workers = build_worker_collector(
        env_factory,
        parts.policy,
        sync=spec.collector.sync,
        update_interval=spec.collector.update_interval,
        **common,
    )
    return workers, workers


def build_evaluation(
    ev: EvalSettings,
    env_factory: Any,
    parts: AlgorithmParts,
    logger: Any,
    envs: list[Any],
    *,
    seed: int,
    device: str,
    group: str,
    reduce_stats: bool | None,
) -> LoggingEvaluationHookSet | None:
    """The evaluation hook set on its own env (one episode per evaluation env), seeded
    ``seed``."""
    if not ev.enabled:
        return None
    env = env_factory(
        num_envs=ev.episodes, seed=seed, device=device, render=ev.render, evaluation=True
    )
    add_recurrent_state(env, parts.eval_policy)
    eval_env = fast_rollouts(env)
    envs.append(eval_env)
    return LoggingEvaluationHookSet(
        policy=parts.eval_policy,
        environment=eval_env,
        group=group,
        interval_frames=ev.interval_frames,
        max_steps=ev.max_steps,
        deterministic=ev.deterministic,
        non_deterministic=ev.stochastic,
        render=ev.render,
        video_fps=ev.video_fps,
        reduce_stats=reduce_stats,
        logger=logger,
        value_gamma=parts.value_gamma,
    )


def _follow_budget(
    spec: RunSpec, resumed: Path | None, schedule: BudgetLinearLR | None, parts: AlgorithmParts
) -> int | None:
    """The budget the resumed checkpoint trained under, when this run's ``total_frames``
    differs (None: the same, or a fresh run), said in one line: the schedules over the budget
    follow the new one (the learning rate re-anchored itself on load, the clip reads the
    Trainer's ``total_frames``)."""
    old = saved_budget(resumed, spec.batch_frames) if resumed is not None else None
    if old is None and schedule is not None and schedule.resumed_batches is not None:
        old = schedule.resumed_batches * spec.batch_frames  # a checkpoint without its config
    if old is None or old == spec.total_frames:
        return None
    names = (["lr"] if schedule is not None else []) + [
        hook.schedule_name for _, hook in parts.hooks if hasattr(hook, "schedule_name")
    ]
    log.info(budget_line(old, spec.total_frames, names, schedule))
    return old


def _objective_metadata(objective: str, eval_set: LoggingEvaluationHookSet | None) -> Any:
    """Checkpoint metadata for ``checkpoint.keep_best``: ``objective`` of an evaluation taken at
    the save's own frame count (a save between evaluations carries none: no stale metric)."""

    def metadata(trainer: Trainer) -> dict[str, float]:
        if eval_set is None or eval_set.last_eval_frames != trainer.collected_frames:
            return {}
        value = eval_set.last_metrics.get(objective)
        return {BEST_METRIC: float(value)} if value is not None else {}

    return metadata


def build_trainer(spec: RunSpec | DictConfig, *, interactive: bool = False) -> Run:
    """Turn a run's checked spec into a ready-to-train TorchRL Trainer with xdrl's hooks (a
    composed config is checked into its spec first: :func:`~xdrl.config.check.check_config`).

    ``interactive``: stdout is a terminal (a progress bar rather than plain progress lines).
    Process-wide settings (threads, ...) are the entry point's:
    :func:`xdrl.run.process.setup_process`.
    """
    spec = _as_spec(spec)
    cfg = spec.cfg  # the nodes a library instantiates; read, never changed
    seed_everything(spec.seed)
    envs: list[Any] = []
    run_dir = spec.run_dir
    candidates = resume_candidates(spec.resume, run_dir)
    check_before_resume(candidates, spec.resume_check, spec.total_frames)  # before any write
    resume_dir = str(resumed_run_dir(candidates[0])) if candidates else None

    # Environment
    log.info("Instantiating env <%s> x%d", cfg.env.id, cfg.env.num_envs)
    env_factory = _instantiate(cfg.env, "env")
    train_env = env_factory(seed=spec.seed, device=spec.device)
    envs.append(train_env)

    # Algorithm
    parts = build_algorithm(
        cfg.algorithm.build,
        train_env,
        frames_per_batch=spec.frames_per_batch,
        device=spec.device,
        total_frames=spec.total_frames,
        frame_skip=spec.frame_skip,
        lean=spec.lean,
    )
    add_recurrent_state(train_env, parts.policy)

    # Collector
    collector, workers = _train_collector(spec, env_factory, train_env, parts)

    # Optimizer
    optimizer = _instantiate(
        cfg.algorithm.optimizer, "algorithm.optimizer", params=parts.loss_module.parameters()
    )

    # Logger
    logger = build_logger(cfg.logging.logger, spec.resolved, resume_dir)

    # Checkpoints
    checkpoint = rotation = None
    if spec.checkpoint.enabled:
        checkpoint, rotation = make_checkpointing(
            run_dir,
            spec.checkpoint.keep_last,
            config=spec.resolved,
            keep_best=spec.checkpoint.keep_best and spec.eval.enabled,
        )

    eval_set = build_evaluation(
        spec.eval,
        env_factory,
        parts,
        logger,
        envs,
        seed=spec.eval_seed,
        device=spec.device,
        group=spec.group,
        reduce_stats=spec.reduce_stats,
    )

    # Trainer: lean: false keeps the checkpoint schedule (ScheduledSaveTrainer), not the average
    trainer_class = XdrlTrainer if spec.lean else ScheduledSaveTrainer
    stepper = parts.optimization_stepper or DetachedOptimizationStepper(lean=spec.lean)
    _log_pieces(spec.lean, collector, parts, stepper, trainer_class)
    trainer = trainer_class(
        collector=collector,
        total_frames=spec.total_frames,
        frame_skip=spec.frame_skip,
        optim_steps_per_batch=parts.optim_steps_per_batch,
        loss_module=parts.loss_module,
        optimizer=optimizer,
        optimization_stepper=stepper,
        logger=logger,
        clip_grad_norm=spec.max_grad_norm is not None,
        clip_norm=spec.max_grad_norm,
        progress_bar=False,  # xdrl's ProgressBarHook draws the terminal's bar
        num_epochs=parts.num_epochs,
        log_interval=0,
        auto_log_optim_steps=False,
        checkpoint=checkpoint,
        checkpoint_rotation=rotation,
        checkpoint_metadata=_objective_metadata(spec.objective, eval_set) if rotation else None,
        # saves at each multiple's first batch, as evaluations: XdrlTrainer.save_trainer
        save_trainer_interval=spec.checkpoint.interval_frames if checkpoint else spec.total_frames,
    )

    # Hooks: timers first, the algorithm's own, then xdrl's logging and evaluation
    norm_sync = ObservationNormSync(train_env, eval_set.environment if eval_set else None)
    if norm_sync.active:  # before the evaluation hooks: they evaluate on the training statistics
        norm_sync.register(trainer)
    hook_set = LoggingHookSet(
        group=spec.group,
        frame_skip=spec.frame_skip,
        episode_reward_weights=reward_weights_of(train_env),
        reduce_stats=spec.reduce_stats,
        eval_hook_set=eval_set,
    )
    hook_set.register(trainer)
    if eval_set is not None:  # <run_dir>/evaluations.jsonl, whatever the logger
        EvaluationHistory(run_dir, eval_set).register(trainer)
    stop_request = StopRequestHook(run_dir)  # a sweeper's pruner stops the run through a file
    stop_request.register(trainer)
    for stage, hook in parts.hooks:
        if stage is None:
            hook.register(trainer)
        else:
            trainer.register_op(stage, hook)
    for name, module in parts.modules.items():
        trainer.register_module(name, module)
    precision = resolve_precision(spec.precision)
    log.info("Precision: %s (precision=%s)", precision, spec.precision)
    if precision == "bf16" and not device_has_bf16(spec.device):
        log.warning("precision=bf16 on %s without native bf16 arithmetic: slower than fp32",
                    spec.device)  # fmt: skip
    env_state = EnvState(train_env, collector, eval_set.environment if eval_set else None)
    trainer.register_module("env_state", env_state)  # envs mid-episode: an exact resume
    schedule = lr_schedule(spec.lr_schedule, spec.batches, optimizer)
    if schedule is not None:
        schedule.register(trainer)
    clock = TrainingClock()  # the progress view's fps and summary.json's are both read from it
    if interactive:
        ProgressBarHook(
            spec.total_frames, progress_hook=hook_set.progress_hook, clock=clock
        ).register(trainer)
    else:
        ProgressLineHook(
            spec.total_frames,
            interval_s=spec.progress_interval_s,
            progress_hook=hook_set.progress_hook,
            frame_skip=spec.frame_skip,
            clock=clock,
        ).register(trainer)
    is_wandb = isinstance(logger, WandbLogger)
    WandbFlushHook(enabled=is_wandb).register(trainer)
    # logging.log_model: W&B stays open until run.py has logged the model (it finishes W&B then)
    WandbFinishHook(enabled=is_wandb and not spec.log_model).register(trainer)

    # Resume
    resumed = restore(trainer, candidates, spec.resume_check)
    restored, approximate = _resume_exactness(env_state, workers)
    if resumed is not None and not restored:  # approximate: fresh episodes
        (workers or train_env).set_seed(spec.seed + int(trainer.collected_frames))
    if resumed is not None:
        _log_resume_exactness(approximate, asynchronous=not spec.collector.sync)
    budget_from = _follow_budget(spec, resumed, schedule, parts)
    norm_sync.link()  # a restore replaced the training statistics: share them again
    return Run(
        trainer=trainer,
        hook_set=hook_set,
        logger=logger,
        envs=envs,
        workers=workers,
        resumed_from=str(resumed) if resumed else None,
        resume_approximate=approximate if resumed else None,
        precision=precision,
        stop_request=stop_request,
        budget_from=budget_from,
        clock=clock,
    )


def _resume_exactness(
    env_state: EnvState, workers: WorkerCollector | RayWorkerCollector | None
) -> tuple[bool, str | None]:
    """Whether a restore put the train envs' episodes back, and why the resume is approximate
    (None: exact); with workers, their collector state holds the episodes."""
    if workers is None:
        return env_state.train_restored, env_state.approximate
    notes = [n for n in (workers.resume_note, env_state.approximate) if n]
    return workers.resume_note is None, "; ".join(notes) or None


def _log_pieces(
    lean: bool, collector: Any, parts: AlgorithmParts, stepper: Any, trainer: type
) -> None:
    """Name the classes the run trains with: what ``lean`` chose, as built."""
    names = {
        "collector": type(collector).__name__,
        "policy": type(parts.policy).__name__,
        "loss": type(parts.loss_module).__name__,
    }
    for stage, hook in parts.hooks:
        if stage == "process_optim_batch":  # a buffer's bound sample method
            owner = getattr(hook, "__self__", hook)
            names["replay"] = type(getattr(owner, "replay_buffer", owner)).__name__
        elif hasattr(hook, "gae") or hasattr(hook, "value_estimator"):
            names["advantage"] = type(hook).__name__
        elif hasattr(hook, "target_params_updater"):
            names["target"] = type(hook.target_params_updater).__name__
    names["trainer"] = trainer.__name__
    names["step"] = "FusedAdamStep" if getattr(stepper, "lean", True) else "optimizer.step()"
    pieces = ", ".join(f"{piece} {name}" for piece, name in names.items())
    log.info("Pieces (lean=%s): %s", str(lean).lower(), pieces)


def _log_resume_exactness(approximate: str | None, *, asynchronous: bool = False) -> None:
    if approximate is None:
        log.info("Resume is exact: envs, episodes in progress and every RNG restored")
    else:
        log.warning("Resume is approximate: %s", approximate)
    if asynchronous:
        log.info("collector.sync=false: the batches the workers held at the checkpoint (at most "
                 "one each) are not trained on, and which worker's batch comes next varies from "
                 "run to run")  # fmt: skip
