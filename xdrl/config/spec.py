"""``RunSpec``: one run's checked config and the values derived from it, built once.

:func:`xdrl.config.check.check_config` checks a composed config and returns its ``RunSpec``; the
run, the builders and the Trainer read its typed fields. The config itself is kept, never
mutated, for the nodes a library instantiates (``env``, ``algorithm.build``,
``algorithm.optimizer``, ``logging.logger``) and for what records it (checkpoints, ``.hydra/``).
Torch-free.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from xdrl.config.resume import ResumeCheck
from xdrl.config.settings import CheckpointSettings, EvalSettings

EVAL_SEED_OFFSET = 10_000  # the evaluation envs' seed: seed + this (apart from the training envs')
NATURE_CNN_WIDTH = 512  # the Nature CNN's feature layer (xdrl.algorithms.encoders.FEATURES)


def whole_batches(total_frames: int, batch_frames: int) -> int:
    """``total_frames`` rounded up to a whole number of ``batch_frames``-frame batches."""
    return -(-total_frames // batch_frames) * batch_frames


def _group(cls: type, node: DictConfig) -> Any:
    """The settings dataclass ``cls`` from its (checked) config group."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{str(k): v for k, v in node.items() if str(k) in names})


@dataclass(frozen=True)
class RunSpec:
    """A checked run config and its derived values (build it with ``check_config``).

    Args:
        cfg: the composed config, as given (never mutated).
        seed, device, precision, objective, num_threads: the top-level keys of the same name.
        frames_per_batch: agent steps per batch (the key of the same name).
        env_id: the environment id (``env.id``).
        frame_skip: frames per agent step (``env.frame_skip``).
        requested_total_frames: ``total_frames`` as given.
        resume, lean: the keys of the same name.
        lr_schedule, max_grad_norm: ``algorithm.*`` of the same name.
        group, reduce_stats, progress_interval_s, log_model: ``logging.*`` of the same name.
        eval, checkpoint: the typed ``eval`` and ``checkpoint`` groups.

    Example:
        >>> spec = check_config(compose("config", overrides=["total_frames=1000"]))
        >>> spec.total_frames  # rounded up to whole 1,024-frame batches
        1024
    """

    cfg: DictConfig
    seed: int
    device: str
    precision: str
    objective: str
    num_threads: int | str
    frames_per_batch: int
    env_id: str
    frame_skip: int
    requested_total_frames: int
    resume: str | None
    lean: bool
    lr_schedule: str
    max_grad_norm: float | None
    group: str
    reduce_stats: bool | None
    progress_interval_s: float
    log_model: bool
    eval: EvalSettings
    checkpoint: CheckpointSettings

    @classmethod
    def of(cls, cfg: DictConfig) -> RunSpec:
        """The spec of ``cfg``, which :func:`~xdrl.config.check.check_config` has checked."""
        return cls(
            cfg=cfg,
            seed=int(cfg.seed),
            device=str(cfg.device),
            precision=str(cfg.precision),
            objective=str(cfg.objective),
            num_threads=cfg.num_threads if cfg.num_threads == "auto" else int(cfg.num_threads),
            frames_per_batch=int(cfg.frames_per_batch),
            env_id=str(cfg.env.id),
            frame_skip=int(cfg.env.frame_skip),
            requested_total_frames=int(cfg.total_frames),
            resume=None if cfg.resume is None else str(cfg.resume),
            lean=bool(cfg.lean),
            lr_schedule=str(cfg.algorithm.lr_schedule),
            max_grad_norm=cfg.algorithm.max_grad_norm,
            group=str(cfg.logging.group),
            reduce_stats=cfg.logging.reduce_stats,
            progress_interval_s=float(cfg.logging.progress_interval_s),
            log_model=bool(cfg.logging.log_model),
            eval=_group(EvalSettings, cfg.eval),
            checkpoint=_group(CheckpointSettings, cfg.checkpoint),
        )

    def with_config(self, cfg: DictConfig) -> RunSpec:
        """This spec for ``cfg``, the same command line composed again (a single run's job: the
        pre-check checked it; Hydra's job resolves ``run_dir`` and ``exp_name``). What the
        pre-check derived (:attr:`resolved`, :attr:`resume_check`) is kept where it resolved
        them to the job's values, so neither is built twice."""
        spec = dataclasses.replace(self, cfg=cfg)
        derived = {k: v for k, v in vars(self).items() if k in ("resolved", "resume_check")}
        if derived and (self.run_dir, str(self.cfg.exp_name)) == (spec.run_dir, str(cfg.exp_name)):
            vars(spec).update(derived)  # functools.cached_property's own store
        return spec

    @property
    def batch_frames(self) -> int:
        """Frames per batch, as the Trainer counts them: ``frames_per_batch * frame_skip``."""
        return self.frames_per_batch * self.frame_skip

    @property
    def total_frames(self) -> int:
        """The frame budget the run trains: ``total_frames`` rounded up to whole batches."""
        return whole_batches(self.requested_total_frames, self.batch_frames)

    @property
    def batches(self) -> int:
        """Batches in the whole run."""
        return self.total_frames // self.batch_frames

    @property
    def eval_seed(self) -> int:
        """The evaluation envs' seed."""
        return self.seed + EVAL_SEED_OFFSET

    @property
    def algorithm_name(self) -> str:
        """The algorithm's module name (``ppo`` for ``xdrl.algorithms.ppo.build``)."""
        return str(self.cfg.algorithm.build._target_).rsplit(".", 2)[-2]

    @property
    def hidden_sizes(self) -> list[int]:
        """Every hidden layer width of the algorithm's networks: its ``*_cells`` keys, and the
        Nature CNN's feature layer where ``algorithm.build.encoder`` is ``cnn``."""
        build = self.cfg.algorithm.build
        sizes = [int(n) for k, v in build.items() if str(k).endswith("_cells") for n in v]
        if OmegaConf.select(build, "encoder") == "cnn":  # only pixel-capable algorithms have it
            sizes.append(NATURE_CNN_WIDTH)
        return sizes

    @property
    def run_dir(self) -> str:
        """The run dir (resolved inside Hydra's job)."""
        return str(self.cfg.run_dir)

    @functools.cached_property
    def resolved(self) -> dict[str, Any]:
        """The config as plain, resolved data (what checkpoints record and resumes compare);
        resolved on first use (``run_dir`` resolves only inside Hydra's job), then kept."""
        resolved = OmegaConf.to_container(self.cfg, resolve=True)
        return {str(k): v for k, v in resolved.items()} if isinstance(resolved, dict) else {}

    @functools.cached_property
    def resume_check(self) -> ResumeCheck:
        """This run's comparison with the checkpoints it may resume, one per run."""
        return ResumeCheck(self.resolved)
