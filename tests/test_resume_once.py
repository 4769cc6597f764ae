"""The resume check (does the config change what shapes the model, or the seed?) compares a
resumed run's config with its checkpoint's once: a single run's in the CLI's pre-check, before
torch is imported and before Hydra touches the run dir, a sweep job's at the job's start; the
run's later stages (the completed-run test, the restore and its log line) read that answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SMALL, WANDB_OFFLINE, read_summary, run_cli

# xdrl-train's main() with the comparison and the resolving of the whole run config counted: one
# line per call into $XDRL_TEST_COMPARED (a comparison says whether torch was imported by then);
# patched before the CLI imports anything of xdrl's.
COUNTING_MAIN = """
import os, sys
from omegaconf import DictConfig, OmegaConf
import xdrl.config.resume as resume

def note(line):
    with open(os.environ["XDRL_TEST_COMPARED"], "a") as fh:
        fh.write(line + "\\n")

compare, to_container = resume.config_changes, OmegaConf.to_container

def counted_compare(saved, new):
    note(f"compare torch={'torch' in sys.modules}")
    return compare(saved, new)

def counted_to_container(cfg, *args, **kwargs):
    if kwargs.get("resolve") and isinstance(cfg, DictConfig) and {"seed", "algorithm"} <= set(cfg):
        note("resolve")
    return to_container(cfg, *args, **kwargs)

resume.config_changes = counted_compare
OmegaConf.to_container = staticmethod(counted_to_container)
from xdrl.cli import main

sys.argv = ["xdrl-train", *sys.argv[1:]]
main()
"""

ARGS = [*SMALL, "logging=csv", "eval=none"]


def _train_counting(args: list[str], cwd: Path) -> tuple[list[str], subprocess.CompletedProcess]:
    """``xdrl-train args`` in a fresh interpreter; one entry per comparison and resolve."""
    counts = cwd / "compared.txt"
    counts.unlink(missing_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", COUNTING_MAIN, *args],
        cwd=cwd,
        env={**os.environ, **WANDB_OFFLINE, "XDRL_TEST_COMPARED": str(counts)},
        capture_output=True,
        text=True,
        timeout=900,  # a safety net against a hung run, not a deadline
    )
    return (counts.read_text().splitlines() if counts.exists() else []), result


def test_a_resumed_run_compares_its_config_once_before_torch(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*ARGS, "run_dir=run"]  # relative, as a user types it (the job reads it as given)
    first = run_cli(args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]

    # refused: one comparison, in the pre-check (no torch), one line, nothing written
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    compared, refused = _train_counting([*args, "algorithm.build.actor_cells=[32,32]"], tmp_path)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.startswith("xdrl-train: config error: resume:")
    assert compared == ["resolve", "compare torch=False"]
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before

    # resumed: the config resolved once and compared once, both in the pre-check; the run
    # records that config in its checkpoints and logs the change the comparison found
    compared, resumed = _train_counting([*args, "total_frames=1024"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert compared == ["resolve", "compare torch=False"]
    assert "Resuming with a changed config (total_frames: 512 -> 1024)" in resumed.stdout
    summary = read_summary(run_dir)
    assert summary["total_frames"] == 1024 and summary["resumed_from"].endswith("000000000512")


def test_each_resumed_sweep_job_compares_its_config_once(tmp_path: Path) -> None:
    sweep = ["-m", *ARGS, "seed=0,1", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    sweep.append("hydra.sweep.subdir=${hydra.job.num}")  # the same job dirs with total_frames
    first = run_cli(sweep, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    compared, resumed = _train_counting([*sweep, "total_frames=1024"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert compared.count("resolve") == 2 and len(compared) == 4  # one of each per job
    summaries = [read_summary(d.parent) for d in (tmp_path / "sweep").glob("*/summary.json")]
    assert sorted(s["total_frames"] for s in summaries) == [1024, 1024]
    assert all(s["resumed_from"].endswith("000000000512") for s in summaries)
