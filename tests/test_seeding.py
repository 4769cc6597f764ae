"""Same seed, same metrics: two in-process runs of the composed config agree exactly on CPU."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SMALL, compose_config, read_scalars
from xdrl.run.lifecycle import run


def _metrics(tmp_path: Path, name: str, seed: int) -> dict[str, list[tuple[int, float]]]:
    run_dir = tmp_path / name
    cfg = compose_config([*SMALL, f"seed={seed}", "checkpoint=none"], run_dir)
    run(cfg)
    scalars = read_scalars(run_dir / "logs")
    return {k: v for k, v in scalars.items() if not k.startswith("timers/")}


def test_same_seed_gives_identical_metrics(tmp_path: Path) -> None:
    first = _metrics(tmp_path, "a", seed=3)
    second = _metrics(tmp_path, "b", seed=3)
    assert "train/agents/loss_objective" in first
    assert first == second


def test_another_seed_gives_other_metrics(tmp_path: Path) -> None:
    first = _metrics(tmp_path, "a", seed=3)
    other = _metrics(tmp_path, "c", seed=4)
    assert first["train/agents/loss_objective"] != other["train/agents/loss_objective"]
