"""Every file and folder of a run dir, by name, and how the files others read are written.

A run dir (``hydra.run.dir``, one per job of a sweep)::

    .hydra/                       HYDRA_DIR: the accepted run's config (xdrl.run.job_record)
        config.yaml               HYDRA_CONFIG_FILE: the composed config
        hydra.yaml                HYDRA_SETTINGS_FILE: Hydra's own config
        overrides.yaml            HYDRA_OVERRIDES_FILE: the command line's overrides
        history/<n>-config.yaml   HISTORY_DIR: the configs a resume replaced
    .xdrl-run.lock                LOCK_FILE: one live run per run dir (xdrl.run.lock)
    <job name>.log                Hydra's job log
    checkpoints/                  CHECKPOINT_DIR (xdrl.training.checkpointing)
        checkpoint-<frames>/      CHECKPOINT_NAME: TorchRL's Checkpoint, 12-digit frames
            manifest.json         MANIFEST_FILE: TorchRL's index of the components
            components/           TorchRL's component files
            config.yaml           CHECKPOINT_CONFIG_FILE: the resolved config it was written under
            checksums.json        CHECKSUMS_FILE: sha256 of every file, written last
    logs/                         LOGS_DIR: CSV or TensorBoard output (``log_dir`` in
                                  conf/logging/*.yaml), hparams.txt, videos
    wandb/                        WANDB_DIR: W&B's files (``save_dir`` in conf/logging/wandb.yaml)
    wandb-last-step.txt           WANDB_STEP_FILE: the last step W&B committed
    evaluations.jsonl             EVALUATIONS_FILE: one line per evaluation
                                  (xdrl.trainer_hooks.evaluation_history)
    summary.json                  SUMMARY_FILE: the run's outcome (xdrl.run.lifecycle), read by
                                  sweeps, reports and xdrl-eval
    stop-request.json             STOP_REQUEST_FILE: asks the run to stop after its current
                                  batch (xdrl.trainer_hooks.stop_request); the Optuna sweeper's
                                  pruner writes it, the run removes it when it stops
    superseded/<n>/               SUPERSEDED_DIR: earlier runs set aside (``resume=never``)
    policy.<format>               xdrl-export's default output
"""

from __future__ import annotations

import os
import re
from pathlib import Path

HYDRA_DIR = ".hydra"
HYDRA_CONFIG_FILE = "config.yaml"
HYDRA_SETTINGS_FILE = "hydra.yaml"
HYDRA_OVERRIDES_FILE = "overrides.yaml"
HISTORY_DIR = f"{HYDRA_DIR}/history"
LOCK_FILE = ".xdrl-run.lock"
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")
MANIFEST_FILE = "manifest.json"
CHECKPOINT_CONFIG_FILE = "config.yaml"
CHECKSUMS_FILE = "checksums.json"
LOGS_DIR = "logs"
WANDB_DIR = "wandb"
WANDB_STEP_FILE = "wandb-last-step.txt"
EVALUATIONS_FILE = "evaluations.jsonl"
SUMMARY_FILE = "summary.json"
STOP_REQUEST_FILE = "stop-request.json"
SUPERSEDED_DIR = "superseded"


def write_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a hidden temporary file beside it, flushed to disk and
    renamed into place: a reader, or the next start after a crash, sees the old file or the new
    one, never half of one; a failed write removes its temporary file. Returns ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
