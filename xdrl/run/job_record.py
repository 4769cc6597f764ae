"""A run dir's ``.hydra/`` (``config.yaml``, ``hydra.yaml``, ``overrides.yaml``), written by xdrl.

Hydra writes ``.hydra/`` at every job start, before the task function runs, so a command that
xdrl then refuses (a resume whose config changed the model, a second live run in the dir, a run
that is already complete) would leave the earlier result labelled with a config that never
trained, and ``xdrl-report`` and the sweep table would pair them. xdrl sets
``hydra.output_subdir: null`` and writes the same three files itself (the same text Hydra writes):
at once into a dir that holds no run yet, otherwise only when the run is accepted, that is when it
is about to train. The files it replaces are kept as ``.hydra/history/<n>-config.yaml`` and
``<n>-overrides.yaml`` when the config changed. Torch-free: the CLI imports it in every job.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from xdrl.run.layout import (
    HISTORY_DIR,
    HYDRA_CONFIG_FILE,
    HYDRA_DIR,
    HYDRA_OVERRIDES_FILE,
    HYDRA_SETTINGS_FILE,
)

log = logging.getLogger(__name__)

FILES = (HYDRA_CONFIG_FILE, HYDRA_SETTINGS_FILE, HYDRA_OVERRIDES_FILE)


class JobRecord:
    """The ``.hydra/`` files of one Hydra job, ready to write into its run dir.

    Args:
        run_dir: the job's output folder (``hydra.runtime.output_dir``).
        texts: file name -> YAML text, for each of :data:`FILES`.

    Example:
        >>> record = JobRecord.of_current_job(cfg)  # inside the task function
        >>> record.write_if_absent()  # a new dir: labelled at once
        >>> record.write()  # an existing run: only once the resume is accepted
    """

    def __init__(self, run_dir: str | Path, texts: dict[str, str]) -> None:
        self.dir = Path(run_dir) / HYDRA_DIR
        self.texts = texts

    @classmethod
    def of_current_job(cls, cfg: DictConfig) -> JobRecord | None:
        """The record of the running Hydra job whose task config is ``cfg`` (None outside one,
        or when the user asked Hydra to write its own output subdir)."""
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return None
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.output_subdir is not None:  # Hydra wrote it already
            return None
        texts = {
            HYDRA_CONFIG_FILE: OmegaConf.to_yaml(cfg),
            HYDRA_SETTINGS_FILE: OmegaConf.to_yaml(HydraConfig.instance().cfg),  # {"hydra": ...}
            HYDRA_OVERRIDES_FILE: OmegaConf.to_yaml(hydra_cfg.overrides.task),
        }
        return cls(hydra_cfg.runtime.output_dir, texts)

    def exists(self) -> bool:
        """Whether the run dir already holds a run's config."""
        return (self.dir / HYDRA_CONFIG_FILE).is_file()

    def write_if_absent(self) -> None:
        """Write the files into a dir that holds no run's config (a new run, or one whose earlier
        run was moved to ``superseded/``)."""
        if not self.exists():
            self.write()

    def write(self) -> None:
        """Write the three files (each atomically), keeping a changed earlier config in
        ``.hydra/history/``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._keep_changed_config()
        for name in FILES:
            tmp = self.dir / f".{name}.tmp"
            tmp.write_text(self.texts[name])
            os.replace(tmp, self.dir / name)

    def _keep_changed_config(self) -> None:
        old = self.dir / HYDRA_CONFIG_FILE
        if not old.is_file() or old.read_text() == self.texts[HYDRA_CONFIG_FILE]:
            return
        history = self.dir.parent / HISTORY_DIR
        history.mkdir(parents=True, exist_ok=True)
        n = 1 + max((int(p.name.split("-")[0]) for p in history.glob("*-config.yaml")), default=0)
        for name in (HYDRA_CONFIG_FILE, HYDRA_OVERRIDES_FILE):
            if (self.dir / name).is_file():
                (history / f"{n}-{name}").write_text((self.dir / name).read_text())
        log.info("The run's previous config is kept in %s", history / f"{n}-config.yaml")
