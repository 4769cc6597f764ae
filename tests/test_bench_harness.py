"""The benchmark harness (benchmarks/): a mode is its run and its rows, the shared runner
alternates contenders and takes medians, targets come from a file, xdrl-train is the one beside
the running python."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import contenders
from benchmarks.modes import MODES
from benchmarks.report import check, fmt, load_targets, markdown, row
from benchmarks.runner import (
    Mode,
    Options,
    Row,
    add_baseline,
    alternated,
    baseline_columns,
    median,
    run_modes,
)

# Per seed, three rounds of each contender's frames/s; medians: seed 0 a 30 b 15, seed 1 a 40 b 10
FAKE_FPS = {
    (0, "a"): [10.0, 30.0, 50.0],
    (0, "b"): [15.0, 5.0, 25.0],
    (1, "a"): [40.0, 40.0, 20.0],
    (1, "b"): [10.0, 90.0, 0.0],
}


def _fake_mode(calls: list[tuple[int, str]]) -> Mode:
    def contender(seed: int, name: str):
        values = iter(FAKE_FPS[seed, name])

        def run() -> float:
            calls.append((seed, name))
            return next(values)

        return run

    def run(options: Options, seeds: list[int]) -> dict[str, Any]:
        runs = []
        for seed in seeds:
            fps = alternated({n: contender(seed, n) for n in ("a", "b")}, seed, options.reps)
            runs.append({"seed": seed, **fps, "ratio": fps["a"] / fps["b"]})
        return {"runs": runs, "ratio": median(r["ratio"] for r in runs)}

    def rows(result: dict[str, Any], targets: dict[str, Any]) -> list[Row]:
        ratio = result["ratio"]
        return [row("fake a/b", "-", "-", fmt(ratio), check(targets, "ratio", ratio))]

    return Mode(run, rows, needs_sb3=False)


def test_runner_alternates_a_fake_mode_and_reports_its_medians(tmp_path: Path) -> None:
    calls: list[tuple[int, str]] = []
    results = run_modes(
        {"fake": _fake_mode(calls)}, Options(reps=3), seeds=[0, 1], log=lambda _: None
    )
    fake = results["fake"]
    assert [(r["seed"], r["a"], r["b"]) for r in fake["runs"]] == [(0, 30.0, 15.0), (1, 40.0, 10.0)]
    assert fake["ratio"] == 3.0  # median of 2.0 and 4.0
    assert fake["bench_seconds"] >= 0
    # rounds alternate: seed 0 starts with a, then b; seed 1 starts with b, then a
    seed_0 = [(0, "a"), (0, "b"), (0, "b"), (0, "a"), (0, "a"), (0, "b")]
    seed_1 = [(1, "b"), (1, "a"), (1, "a"), (1, "b"), (1, "b"), (1, "a")]
    assert calls == seed_0 + seed_1
    targets_file = tmp_path / "targets.yaml"
    targets_file.write_text("fake:\n  ratio: {at_least: 3.5}\n")
    report = markdown(
        {
            "machine": {
                "date": "d",
                "nproc": 2,
                "cpu": "cpu",
                "python": "3",
                "load_average": (0.0, 0.0, 0.0),
                "versions": {},
            },
            "load_average_end": (0.0, 0.0, 0.0),
            "modes": results,
        },
        "cmd",
        {"fake": _fake_mode([])},
        load_targets(targets_file),
    )
    assert "| fake a/b | - | - | 3.00 | >= 3.5 | no |" in report.splitlines()


@pytest.mark.parametrize(
    ("bound", "value", "met"),
    [
        ({"at_least": 2}, 2.0, True),
        ({"at_least": 2}, 1.9, False),
        ({"at_most": 0.5}, 0.5, True),
        ({"at_most": 0.5}, 0.6, False),
        ({"below": 1}, 1.0, False),
        ({"below": 1}, 0.9, True),
    ],
)
def test_targets_bound_the_figure(bound: dict[str, float], value: float, met: bool) -> None:
    assert check({"x": bound}, "x", value)[1] is met
    assert check({"x": bound}, "y", value) == ("reference", None)
    assert check({"x": bound}, "x", None)[1] is None


def test_the_targets_file_names_real_modes_and_valid_bounds() -> None:
    targets = load_targets()
    assert set(targets) <= set(MODES)
    assert targets["ppo-throughput"]["ratio"] == {"at_least": 1.75}


def test_a_target_without_a_known_bound_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "targets.yaml"
    bad.write_text("sac:\n  ratio: {more_than: 1}\n")
    with pytest.raises(ValueError, match="sac.*ratio"):
        load_targets(bad)


def test_xdrl_train_is_found_beside_sys_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    with pytest.raises(FileNotFoundError, match="no xdrl-train beside"):
        contenders.xdrl_train()
    (bin_dir / "xdrl-train").write_text("#!/bin/sh\n")
    assert contenders.xdrl_train() == bin_dir / "xdrl-train"


def test_xdrl_runs_the_xdrl_train_beside_sys_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "xdrl-train").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    seen: list[list[str]] = []

    def fake_timed(cmd: list[str]) -> tuple[Any, float]:
        seen.append(cmd)
        raise RuntimeError("stop here")

    monkeypatch.setattr(contenders, "_timed", fake_timed)
    with pytest.raises(RuntimeError, match="stop here"):
        contenders.xdrl(["total_frames=8"], seed=3)
    assert seen[0][0] == str(bin_dir / "xdrl-train")
    assert seen[0][1:3] == ["seed=3", "checkpoint=none"] and seen[0][-1] == "total_frames=8"


def test_the_old_command_line_still_parses() -> None:
    from benchmarks.cli import parser

    args = parser().parse_args(["--mode", "sac,dqn", "--seeds", "2", "--reps", "3"])
    assert (args.mode, args.seeds, args.reps) == ("sac,dqn", 2, 3)


def test_a_missing_sb3_venv_names_the_command_that_makes_it(tmp_path: Path) -> None:
    from benchmarks.cli import main

    missing = tmp_path / "no-venv" / "bin" / "python"
    with pytest.raises(SystemExit, match="make bench-venv"):
        main(["--mode", "dqn", "--sb3-python", str(missing), "--out", str(tmp_path)])
    assert not (tmp_path / "bench.json").exists()


def test_baseline_runs_the_other_checkout_on_the_modes_overrides(monkeypatch) -> None:
    calls: list[tuple[list[str], int, Any]] = []

    def fake_xdrl(overrides: list[str], seed: int, executable: Any = None) -> dict[str, float]:
        calls.append((overrides, seed, executable))
        return {"frames_per_second": 300.0}

    monkeypatch.setattr(contenders, "xdrl", fake_xdrl)
    runs: dict[str, Any] = {}
    add_baseline(runs, Options(), ["env=x"], 3)
    assert runs == {}  # no --baseline: no contender
    other = Path("/other/.venv/bin/xdrl-train")
    add_baseline(runs, Options(baseline=other, baseline_overrides=["num_threads=1"]), ["env=x"], 3)
    assert runs["baseline"]() == 300.0
    assert calls == [(["env=x", "num_threads=1"], 3, other)]
    assert baseline_columns({"baseline": 300.0}, 200.0) == {
        "baseline_fps": 300.0,
        "baseline_ratio": 1.5,
    }
    assert baseline_columns({"xdrl": 1.0}, 200.0) == {}
