"""TorchRL loggers, adjusted where they fall short for xdrl runs.

- ``CSVLogger``: TorchRL's CSV logger writes videos as ``.pt`` tensors (its mp4 path needs
  torchcodec); ours writes playable mp4 files through imageio. TorchRL's also keeps every scalar
  it ever logged in memory and saves that whole history in each checkpoint (growing with the
  run), and stats the file before each row; ours appends each row to a file it opened once and
  keeps no history (a resumed run reads the CSV files themselves).
- ``WandbLogger``: TorchRL's W&B logger commits one history row per scalar and overwrites the
  ``env`` config key; ours sends scalars with ``commit=False`` at ``step=collected frames`` so
  ``WandbFlushHook`` commits one row per iteration, and resumes the same run id.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor
from torchrl.record.loggers import CSVLogger as _TorchRLCSVLogger
from torchrl.record.loggers import Logger
from torchrl.record.loggers.wandb import WandbLogger as _TorchRLWandbLogger

from xdrl.config.errors import ConfigError, first_line
from xdrl.config.nested import flatten
from xdrl.run.layout import SUPERSEDED_DIR, WANDB_STEP_FILE

log = logging.getLogger(__name__)


class CSVLogger(_TorchRLCSVLogger):
    """TorchRL's CSV logger with videos written as mp4 files (``videos/<name>_<step>.mp4``).

    Args:
        exp_name: folder name under ``log_dir``.
        log_dir: root folder.
        video_fps: default frames per second of videos.

    Example:
        >>> logger = CSVLogger("run", log_dir="outputs/logs")
        >>> logger.log_scalar("train/agents/loss", 0.5, step=256)
    """

    def __init__(self, exp_name: str, log_dir: str | None = None, video_fps: int = 30) -> None:
        super().__init__(exp_name=exp_name, log_dir=log_dir, video_format="pt", video_fps=video_fps)
        self._last_steps = _existing_csv_steps(Path(self.experiment.log_dir) / "scalars")
        self._rows: dict[str, int] = {}  # rows this process wrote per scalar

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Append ``step,value`` to ``scalars/<name>.csv`` and flush it (TorchRL's row format;
        without a step, the row's index in this process, as TorchRL numbers them); a resumed run
        never writes a step that the file already holds (the rows since the last checkpoint
        are kept once).

        Why not TorchRL's ``add_scalar``: its per-row file check and history cost ~0.5 ms per
        CartPole PPO batch of ~25 scalars (1.5% of the batch; in process, 1 thread), and the
        history went into every checkpoint."""
        if step is None:
            step = self._rows.get(name, 0)
        elif step <= self._last_steps.get(name, -1):
            return
        else:
            self._last_steps[name] = step
        self._rows[name] = self._rows.get(name, 0) + 1
        files = self.experiment.files  # TorchRL's open files: the experiment closes them
        path = os.path.join(self.experiment.log_dir, "scalars", f"{name}.csv")
        out = files.get(path)
        if out is None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            out = files[path] = open(path, "a+")  # noqa: SIM115  # closed by the experiment
        out.write(f"{step},{float(value)}\n")
        out.flush()

    def _checkpoint_state(self) -> dict[str, object]:
        """TorchRL's video and text counters; no scalar history (kept by the CSV files)."""
        state = super()._checkpoint_state()
        state.pop("scalars", None)
        return state

    def _load_checkpoint_state(self, state_dict: Mapping[str, object]) -> None:
        """TorchRL's counters; an older checkpoint's scalar history is dropped."""
        super()._load_checkpoint_state({k: v for k, v in state_dict.items() if k != "scalars"})

    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs: Any) -> None:
        """Write ``video`` ([N,] T, C, H, W, uint8) as an mp4 file."""
        import imageio.v2 as imageio

        fps = int(kwargs.get("fps") or self.video_fps)
        frames = list(video.reshape(-1, *video.shape[-3:]).permute(0, 2, 3, 1).cpu().numpy())
        path = Path(self.experiment.log_dir) / "videos" / f"{name}_{step or 0}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        imageio.mimwrite(path, frames, fps=fps, macro_block_size=1)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        """Write the flattened config as ``hparams.txt``."""
        path = Path(self.experiment.log_dir) / "hparams.txt"
        path.write_text("".join(f"{k}: {v}\n" for k, v in flatten_config(cfg).items()))


def _read_int(path: Path) -> int:
    """An integer stored in ``path`` (-1 when absent)."""
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return -1


def _existing_csv_steps(scalars_dir: Path) -> dict[str, int]:
    """The last step of every CSV file a previous attempt of this run wrote."""
    last: dict[str, int] = {}
    for path in scalars_dir.rglob("*.csv") if scalars_dir.is_dir() else []:
        lines = path.read_text().strip().splitlines()
        if lines:
            name = path.relative_to(scalars_dir).with_suffix("").as_posix()
            last[name] = int(float(lines[-1].split(",")[0]))
    return last


def stable_run_id(run_dir: str) -> str:
    """A W&B run id derived from the run directory, so a requeued job resumes the same run; a
    dir started afresh with ``resume=never`` (earlier output in ``superseded/``) gets a new one."""
    key = os.path.abspath(run_dir)
    generations = len(list((Path(run_dir) / SUPERSEDED_DIR).glob("*")))
    if generations:
        key += f"#{generations}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


class WandbLogger(_TorchRLWandbLogger):
    """TorchRL's W&B logger, writing one history row per iteration and resuming by run dir.

    Scalars go out uncommitted at ``step=collected frames``; ``WandbFlushHook`` commits the row
    once per iteration. The run id defaults to a hash of ``save_dir`` with ``resume="allow"``, so a
    requeued job continues the same run, and steps already logged are not written twice.

    Args:
        exp_name: run name.
        save_dir: folder that receives ``wandb/``.
        project, entity, group, tags: W&B run fields.
        mode: ``online``, ``offline`` or ``disabled``; None lets ``WANDB_MODE`` decide.
        id: run id; None derives it from ``save_dir``.
        video_fps: default frames per second of videos.
        init_timeout_s: how long an online start may wait for the server; past it (or on any
            connection error) the run logs offline, with one warning naming ``wandb sync``.

    Example:
        >>> logger = WandbLogger("ppo_cartpole", save_dir="outputs/run", mode="offline")
    """

    def __init__(
        self,
        exp_name: str,
        save_dir: str,
        project: str = "xdrl",
        entity: str | None = None,
        group: str | None = None,
        tags: Sequence[str] = (),
        mode: str | None = None,
        id: str | None = None,  # noqa: A002 - wandb's own argument name
        video_fps: int = 30,
        init_timeout_s: float = 15.0,
    ) -> None:
        if importlib.util.find_spec("wandb") is None:
            raise ConfigError("logging", "logging=wandb needs wandb: pip install 'xdrl[wandb]'")
        kwargs: dict[str, Any] = {"entity": entity, "group": group, "tags": list(tags)}
        if mode is not None:
            kwargs["mode"] = mode
        os.makedirs(save_dir, exist_ok=True)
        # Offline runs reach disk every 15 s by default; a preempted job would lose more rows.
        os.environ.setdefault("WANDB_X_TRANSACTION_LOG_FLUSH_INTERVAL", "2")
        self.init_timeout_s = float(init_timeout_s)
        self.offline_fallback: str | None = None  # the offline run dir after a fallback
        self._step_file = Path(save_dir) / WANDB_STEP_FILE
        self._resumed_step = _read_int(self._step_file)
        self._written_step = self._resumed_step
        super().__init__(
            exp_name,
            save_dir=save_dir,
            project=project,
            id=id or stable_run_id(save_dir),
            video_fps=video_fps,
            log_env_packages=False,
            **kwargs,
        )

    def _create_experiment(self) -> Any:
        """``wandb.init`` with a bounded online attempt; offline when the server is unreachable
        (cluster nodes often have no internet): the run goes on and can be uploaded later."""
        import wandb

        mode = self._wandb_kwargs.get("mode") or os.environ.get("WANDB_MODE", "online")
        if mode not in ("online", "run"):
            return super()._create_experiment()
        self._wandb_kwargs["settings"] = wandb.Settings(init_timeout=self.init_timeout_s)
        try:
            return super()._create_experiment()
        except Exception as err:  # noqa: BLE001 - any failure to start online: go offline
            reason = first_line(err)
        wandb.teardown()  # the service still holds the failed online run's id
        self._wandb_kwargs["mode"] = "offline"
        self._wandb_kwargs["settings"] = wandb.Settings()
        try:
            run = super()._create_experiment()
        except Exception:  # noqa: BLE001 - a slow service may still hold the id ("in use")
            wandb.teardown()
            self._wandb_kwargs["id"] = f"{self._wandb_kwargs.get('id') or 'run'}-offline"
            run = super()._create_experiment()
        self.offline_fallback = str(Path(run.dir).parent)
        log.warning(
            "W&B could not start online within %.0f s (%s): logging offline to %s; "
            "upload it later with `wandb sync %s`",
            self.init_timeout_s,
            reason,
            self.offline_fallback,
            self.offline_fallback,
        )
        return run

    def log_scalar(
        self, name: str, value: float, step: int | None = None, commit: bool = False, **_: Any
    ) -> None:
        """Add ``name`` to the row of ``step``; the row is committed by ``WandbFlushHook``."""
        if step is not None:
            if step <= self._resumed_step:
                return  # already in this run's history from before the restart
            self._step_registry["step"] = int(step)
            if step > self._written_step:
                self._written_step = int(step)
                self._step_file.write_text(str(step))
        self._log({name: value}, step=step, commit=commit)

    def _log(self, row: dict[str, Any], **kwargs: Any) -> None:
        """``run.log`` that never stops training: a failure is one warning (the first only);
        CSV-free runs still have summary.json and evaluations.jsonl."""
        try:
            self.experiment.log(row, **kwargs)
        except Exception as err:  # noqa: BLE001 - W&B failing mid-run must not kill training
            if not getattr(self, "_log_failed", False):
                self._log_failed = True
                log.warning("W&B logging failed (%s); training goes on without it", err)

    def log_video(self, name: str, video: Tensor, **kwargs: Any) -> None:
        """Add an mp4 video ([N,] T, C, H, W, uint8) to the row of ``step``."""
        import wandb

        step = kwargs.pop("step", None)
        fps = kwargs.pop("fps", self.video_fps)
        self._log(
            {name: wandb.Video(video.cpu().numpy(), fps=fps, format="mp4")}, step=step, commit=False
        )

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        """Store the resolved config (nested) as the run's config."""
        self.experiment.config.update(dict(cfg), allow_val_change=True)


def close_logger(logger: Logger | None) -> None:
    """Close ``logger`` with TorchRL's ``Logger.close()``: flush, then finish the experiment (a
    W&B run keeps its committed and pending rows). A second call does nothing; a failure is one
    warning, so cleanup never hides the run's own outcome."""
    if logger is None:
        return
    try:
        logger.close()
    except Exception as err:  # noqa: BLE001 - cleanup must never mask the run's own outcome
        log.warning("Closing the %s failed: %s", type(logger).__name__, err)


def flatten_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``; lists and None as strings (TensorBoard hparams)."""
    return {
        key: str(value) if value is None or isinstance(value, (list, tuple)) else value
        for key, value in flatten(cfg, sep="/").items()
    }


def log_config(logger: Logger | None, cfg: Mapping[str, Any]) -> None:
    """Record the resolved run config with the logger (nested for W&B, flat elsewhere)."""
    if logger is None:
        return
    from torchrl.record.loggers import TensorboardLogger

    if isinstance(logger, TensorboardLogger):
        # TorchRL's log_hparams fails on nested configs; write them as flat text.
        text = "\n".join(f"{k}: {v}" for k, v in flatten_config(cfg).items())
        logger.experiment.add_text("config", f"```\n{text}\n```", global_step=0)
        return
    logger.log_hparams(cfg)
