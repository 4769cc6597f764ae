"""xdrl's CSVLogger against TorchRL's: the same files, row for row, without the in-memory history
in checkpoints; a resumed logger skips the steps its files already hold."""

from __future__ import annotations

from pathlib import Path

import torch
from torchrl.record.loggers import CSVLogger as TorchRLCSVLogger

from xdrl.training.loggers import CSVLogger

ROWS = [
    ("train/agents/loss_objective", 0.25, 256),
    ("train/agents/loss_objective", torch.tensor(-1.5e-7), 512),
    ("collection/agents/reward/reward_mean", 1.0, 256),
    ("counters/iter", 3, 768),
    ("nested/a/b/c", float("nan"), None),  # no step: the row's index, as TorchRL numbers them
    ("nested/a/b/c", 2.0, None),
]


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.csv"))}


def _write(cls, root: Path):
    logger = cls(exp_name="run", log_dir=str(root))
    for name, value, step in ROWS:
        logger.log_scalar(name, value, step=step)
    return logger


def test_same_files_as_torchrls_csv_logger(tmp_path: Path) -> None:
    ours, theirs = _write(CSVLogger, tmp_path / "ours"), _write(TorchRLCSVLogger, tmp_path / "t")
    written = _files(tmp_path / "ours")
    assert written == _files(tmp_path / "t")
    assert written["run/scalars/nested/a/b/c.csv"] == "0,nan\n1,2.0\n"
    assert written["run/scalars/train/agents/loss_objective.csv"].startswith("256,0.25\n512,")
    assert "scalars" not in ours._checkpoint_state()  # the CSV files are the history
    assert theirs._checkpoint_state()["scalars"]  # (TorchRL's saves it all, every checkpoint)


def test_a_resumed_logger_skips_steps_its_files_hold_and_drops_old_history(
    tmp_path: Path,
) -> None:
    _write(CSVLogger, tmp_path)
    old_state = TorchRLCSVLogger(exp_name="x", log_dir=str(tmp_path / "x"))
    old_state.log_scalar("a", 1.0, step=1)
    resumed = CSVLogger(exp_name="run", log_dir=str(tmp_path))
    resumed._load_checkpoint_state(old_state._checkpoint_state())  # an older checkpoint's state
    assert not resumed.experiment.scalars
    resumed.log_scalar("train/agents/loss_objective", 9.0, step=512)  # already in the file
    resumed.log_scalar("train/agents/loss_objective", 4.0, step=1024)
    rows = (tmp_path / "run/scalars/train/agents/loss_objective.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows] == ["256", "512", "1024"]
    assert rows[-1] == "1024,4.0"
