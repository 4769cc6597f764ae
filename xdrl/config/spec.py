"""``RunSpec``: one run's checked config and the values derived from it, built once.

:func:`xdrl.config.check.check_config` checks a composed config and returns its ``RunSpec``; the
run, the builders and the Trainer read its typed fields. The config itself is kept, never
mutated, for the nodes a library instantiates (``env``, ``algorithm.build``,
``algorithm.optimizer``, ``logging.logger``) and for what records it (checkpoints, ``.hydra/``).

A saved config (a run dir's ``.hydra/config.yaml``, a checkpoint's ``config.yaml``) is read back
into the same ``RunSpec`` by :meth:`RunSpec.from_saved`: moved ``_target_`` paths are renamed
(:mod:`xdrl.config.renames`) and the keys an older run lacked are filled from today's default
config, so every reader (``xdrl-eval``, ``xdrl-export``, ``xdrl-report``, the Pareto report)
reads typed fields instead of ``.get()`` chains. Torch-free.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from xdrl.config.errors import ConfigError, first_line
from xdrl.config.renames import renamed_config
from xdrl.config.resume import ResumeCheck
from xdrl.config.settings import CheckpointSettings, CollectorSettings, EvalSettings
from xdrl.run.layout import HYDRA_CONFIG_FILE, HYDRA_DIR

EVAL_SEED_OFFSET = 10_000  # the evaluation envs' seed: seed + this (apart from the training envs')
# Nodes a library instantiates: a key a saved one lacks stays missing (its function's own default
# applies, as it did for the run), not filled from today's config of maybe another function.
INSTANTIATED = frozenset({"env", "algorithm.build", "algorithm.optimizer", "logging.logger"})
# Keys inside those nodes that the spec reads: filled from today's defaults when a run lacks them
# (runs from before env.frame_skip stepped every frame, today's default).
READ_IN_INSTANTIATED = ("env.frame_skip",)
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
        eval, checkpoint, collector: the typed ``eval``, ``checkpoint`` and ``collector``
            groups.
        reward_weights: ``env.reward_weights`` (None: a single-objective env, or unweighted).
        ref_point: ``env.pareto.ref_point``, the Pareto report's hypervolume reference (None:
            none).
        suspect_gap: ``pareto.suspect_gap``, the Pareto report's value-gap bound.

    Example:
        >>> spec = check_config(compose("config", overrides=["total_frames=1000"]))
        >>> spec.total_frames  # rounded up to whole 1,024-frame batches
        1024
        >>> RunSpec.from_run_dir("outputs/2026-11-24/10-00-00_ppo_cartpole").env_id
        'CartPole-v1'
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
    collector: CollectorSettings
    reward_weights: tuple[float, ...] | None
    ref_point: tuple[float, ...] | None
    suspect_gap: float

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
            collector=_group(CollectorSettings, cfg.collector),
            reward_weights=_floats(OmegaConf.select(cfg, "env.reward_weights")),
            ref_point=_floats(OmegaConf.select(cfg, "env.pareto.ref_point")),
            suspect_gap=float(cfg.pareto.suspect_gap),
        )

    @classmethod
    def from_saved(cls, config: Mapping[str, Any], source: str = "config") -> RunSpec:
        """The spec of a saved config (plain data, as read from its YAML file): moved
        ``_target_`` paths renamed, the keys an older run lacked filled from today's default
        config (not inside the nodes a library instantiates, :data:`INSTANTIATED`, but for the
        keys the spec reads there); interpolations stay as written (``${hydra:...}`` resolves
        only inside a run). ``source`` names the config in the error.

        Raises:
            ConfigError: a key the spec reads is missing or not of its type.
        """
        filled = _filled(renamed_config(dict(config)), _default_data())
        try:
            return cls.of(OmegaConf.create(filled))
        except (OmegaConfBaseException, AttributeError, KeyError, TypeError, ValueError) as err:
            key = getattr(err, "full_key", None) or source
            raise ConfigError(
                key,
                f"not a run config xdrl can read ({first_line(err)}); pass one xdrl-train wrote",
            ) from None

    @classmethod
    def from_run_dir(cls, run_dir: str | Path) -> RunSpec:
        """The spec of a run dir's ``.hydra/config.yaml`` (see :meth:`from_saved`).

        Raises:
            ConfigError: the file is missing, unreadable or not a run config.
        """
        path = Path(run_dir) / HYDRA_DIR / HYDRA_CONFIG_FILE
        try:
            config = load_saved_config(path)
        except (OSError, ValueError) as err:
            raise ConfigError("RUN_DIR", f"{path} cannot be read ({first_line(err)})") from None
        return cls.from_saved(config, str(path))

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
    def collector_workers(self) -> int:
        """Collector worker processes on this machine's cores (``collector=multiprocess``, or
        ``collector=ray`` on the local Ray the run starts; 0: envs step in this process, or on
        a Ray cluster's nodes)."""
        local = self.collector.backend == "process" or (
            self.collector.backend == "ray" and self.collector.address is None
        )
        return self.collector.workers if local else 0

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


def _floats(value: Any) -> tuple[float, ...] | None:
    """A list of numbers as a tuple of floats (None stays None)."""
    return None if value is None else tuple(float(v) for v in value)


def load_saved_config(path: Path) -> dict[str, Any]:
    """A saved config file as plain data, moved ``_target_`` paths renamed.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not YAML, or holds no mapping.
    """
    import yaml

    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"{path} is not YAML ({first_line(err)})") from None
    if not isinstance(config, Mapping):
        raise ValueError(f"{path} holds no config")
    return {str(k): v for k, v in renamed_config(config).items()}


def _filled(saved: Mapping[str, Any], defaults: Mapping[str, Any], prefix: str = "") -> dict:
    """``saved`` with each key it lacks taken from ``defaults`` (a new dict): nested mappings
    alike, but an :data:`INSTANTIATED` node gets only the keys of :data:`READ_IN_INSTANTIATED`."""
    out = dict(saved)
    for key, default in defaults.items():
        path = f"{prefix}{key}"
        if key not in out:
            out[key] = default
        elif isinstance(out[key], Mapping) and isinstance(default, Mapping):
            if path in INSTANTIATED:
                read = [k.rpartition(".")[2] for k in READ_IN_INSTANTIATED if k.startswith(path)]
                lacks = {k: default[k] for k in read if k in default and k not in out[key]}
                out[key] = {**out[key], **lacks}
            else:
                out[key] = _filled(out[key], default, f"{path}.")
    return out


@functools.lru_cache(maxsize=1)
def composed_defaults() -> DictConfig | None:
    """Today's default config (``xdrl-train`` with no overrides), composed once on first use;
    None where it cannot be composed."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    try:
        if GlobalHydra.instance().is_initialized():  # inside a Hydra app (a sweep job)
            return compose("config")
        with initialize_config_module("xdrl.conf", version_base="1.3"):
            return compose("config")
    except Exception:  # noqa: BLE001 - callers do without (an example, a filled key)
        return None


@functools.lru_cache(maxsize=1)
def _default_data() -> dict[str, Any]:
    """:func:`composed_defaults` as plain data, interpolations as written ({} without it)."""
    defaults = composed_defaults()
    data = {} if defaults is None else OmegaConf.to_container(defaults, resolve=False)
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}
