"""``logging.log_model: true``: at the end of a W&B run, export the newest checkpoint's policy as
ONNX into the run dir and log it with ``summary.json`` as a ``model`` artifact of the run (in
offline mode the artifact is recorded in the run's log and both files are copied into the
offline run's ``files/``, for ``wandb sync``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MODEL_FILE = "policy.onnx"


def log_model(run_dir: str | Path, summary_file: str | Path) -> Path | None:
    """Export and log the policy; returns the ONNX file (None: no active W&B run or no
    checkpoint). A failure is logged, never raised: the run itself already finished."""
    wandb: Any = sys.modules.get("wandb")
    run = getattr(wandb, "run", None) if wandb is not None else None
    if run is None:
        log.warning("logging.log_model: no active W&B run; nothing uploaded")
        return None
    from xdrl.config.errors import ConfigError
    from xdrl.policy.export import ExportError, export_policy
    from xdrl.policy.loading import load_run

    try:
        policy = load_run(run_dir, "last")
    except ConfigError as err:
        log.warning("logging.log_model: %s; nothing uploaded", err)
        return None
    out = Path(run_dir) / MODEL_FILE
    try:
        export_policy(policy, "onnx", out)
    except (ExportError, ImportError) as err:
        log.warning("logging.log_model: the policy was not exported (%s)", err)
        return None
    finally:
        policy.close()
    artifact = wandb.Artifact(
        f"policy-{run.id}", type="model", metadata={"checkpoint": policy.checkpoint.name}
    )
    artifact.add_file(str(out))
    if Path(summary_file).is_file():
        artifact.add_file(str(summary_file))
    run.log_artifact(artifact)
    if getattr(run.settings, "mode", None) == "offline":  # a copy in the run's own files/
        for path in (out, Path(summary_file)):
            if path.is_file():
                run.save(str(path), base_path=str(path.parent), policy="now")
    log.info("logging.log_model: logged %s and %s as artifact %s", out, summary_file, artifact.name)
    return out
