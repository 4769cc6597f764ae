"""``python -m benchmarks --mode results``: each seed's run dir is trained, resumed, adopted or
refused as its record says; the data file it writes holds what the runs wrote (their summaries
and CSV logs), read back here independently; a stopped run is resumed (two segments, one
checkpoint), not restarted; a second call adopts every completed run and trains nothing."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.cli import main as bench_main
from benchmarks.results import runs
from tests.conftest import read_summary, run_script

PRESET = "cartpole_ppo"


@pytest.fixture(scope="module")
def cartpole() -> runs.Preset:
    return runs.read_preset(PRESET)


def _fake_run(
    runs_dir: Path, preset: runs.Preset, seed: int, frames: int, status: str, **changed: Any
) -> Path:
    """A run dir as xdrl-train leaves it, as far as the plan reads it: the saved config of the
    seed's own command (``changed``: dotted keys set otherwise) and a summary."""
    run_dir = runs.run_dir_of(runs_dir, preset.name, seed)
    config = runs.compose(runs.overrides(preset, seed, run_dir, frames))
    for key, value in changed.items():
        node = config
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / "summary.json").write_text(json.dumps({"status": status}))
    return run_dir


def test_the_plan_trains_a_new_dir_adopts_a_complete_run_and_resumes_a_stopped_one(
    tmp_path: Path, cartpole: runs.Preset
) -> None:
    _fake_run(tmp_path, cartpole, 1, 2048, "completed")
    _fake_run(tmp_path, cartpole, 2, 2048, "stopped")
    _fake_run(tmp_path, cartpole, 3, cartpole.budget_frames, "interrupted")
    actions = {s: runs.plan(cartpole, s, tmp_path, 2048).action for s in (0, 1, 2)}
    assert actions == {0: "train", 1: "adopt", 2: "resume"}
    whole = runs.plan(cartpole, 3, tmp_path, cartpole.budget_frames)
    assert whole.action == "resume"
    assert whole.command == (
        f"xdrl-train experiment={PRESET} seed=3 num_threads=1 logging=csv "
        f"run_dir={tmp_path}/{PRESET}/seed3"
    )  # the whole budget: no total_frames, as the runs started by hand


def test_a_run_of_another_config_is_refused_naming_the_key(
    tmp_path: Path, cartpole: runs.Preset
) -> None:
    _fake_run(tmp_path, cartpole, 0, 2048, "stopped", **{"algorithm.build.gamma": 0.99})
    with pytest.raises(runs.Refused) as refused:
        runs.plan(cartpole, 0, tmp_path, 2048)
    assert refused.value.key == "run_dir"
    assert "algorithm.build.gamma 0.99 -> 0.98" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_another_budget_is_refused_unless_extend(tmp_path: Path, cartpole: runs.Preset) -> None:
    _fake_run(tmp_path, cartpole, 0, 2048, "completed")
    _fake_run(tmp_path, cartpole, 1, 4096, "stopped")
    with pytest.raises(runs.Refused, match="completed run towards total_frames=2048, not 4096"):
        runs.plan(cartpole, 0, tmp_path, 4096)
    with pytest.raises(runs.Refused, match="more than the 1024 asked; pass --frames 2048"):
        runs.plan(cartpole, 0, tmp_path, 1024, extend=True)
    with pytest.raises(runs.Refused, match="stopped run towards total_frames=4096.*--frames 4096"):
        runs.plan(cartpole, 1, tmp_path, 2048)
    extended = runs.plan(cartpole, 0, tmp_path, 4096, extend=True)
    assert (extended.action, extended.extended_from) == ("extend", 2048)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--frames", "20000"], "--frames: 20000 is not a fraction of cartpole_ppo's budget of "
         "12,288 frames; give 1 to 12288"),
        (["--seeds", "0", "0"], "--seeds: [0, 0] names a seed twice; name each once"),
        (["--parallel", "0"], "--parallel: must be at least 1; e.g. --parallel 2"),
        (["--sb3-args", "sac"], "--sb3-args: only with --contender sb3"),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    with pytest.raises(SystemExit) as done:
        bench_main(["--mode", "results", "--preset", PRESET, *args, "--out", str(tmp_path)])
    assert done.value.code == 2
    assert capsys.readouterr().err == f"python -m benchmarks --mode results: config error: {line}\n"
    assert not list(tmp_path.iterdir())


def _curve_csv(run_dir: Path) -> list[list[float]]:
    (path,) = run_dir.glob("logs/*/scalars/eval/deterministic/reward/episode_reward_mean.csv")
    with path.open() as fh:
        return [[int(step), float(value)] for step, value in csv.reader(fh)]


def _mode(runs_dir: Path, out: Path) -> dict[str, Any]:
    args = ["--mode", "results", "--preset", PRESET, "--seeds", "0", "1", "--frames", "2048"]
    with pytest.raises(SystemExit) as done:
        bench_main([*args, "--parallel", "2", "--runs-dir", str(runs_dir), "--out", str(out)])
    assert done.value.code == 0
    return json.loads((out / f"{PRESET}.json").read_text())


def test_the_mode_trains_resumes_and_adopts_and_records_what_the_runs_wrote(
    tmp_path: Path, cartpole: runs.Preset
) -> None:
    runs_dir, out = tmp_path / "runs", tmp_path / "out"
    # seed 1 was started by hand with the mode's own command and stopped after its first batch
    stopped = runs.plan(cartpole, 1, runs_dir, 2048)
    (stopped.run_dir / "stop-request.json").parent.mkdir(parents=True)
    (stopped.run_dir / "stop-request.json").write_text('{"status": "stopped", "reason": "test"}')
    first = run_script("xdrl-train", stopped.args)
    assert first.returncode == 0, first.stderr[-2000:]
    assert read_summary(stopped.run_dir)["status"] == "stopped"

    written = _mode(runs_dir, out)
    assert (written["preset"], written["frames"], written["budget_frames"]) == (PRESET, 2048, 12288)
    assert written["fraction"] == round(2048 / 12288, 6)
    assert written["machine"]["cores"] >= 1 and written["code"]["commit"]
    for entry in written["seeds"]:
        run_dir = Path(entry["run_dir"])
        summary = read_summary(run_dir)
        assert entry["command"] == runs.plan(cartpole, entry["seed"], runs_dir, 2048).command
        assert entry["final"] == summary["eval"]["eval/deterministic/reward/episode_reward_mean"]
        assert (entry["final_episodes"], entry["final_source"]) == (20, "run")
        assert entry["curve"] == _curve_csv(run_dir) and entry["curve"][-1][0] == 2048
        assert entry["frames"] == summary["total_frames"] == 2048
        walls = [s["wall_time_s"] for s in summary["segments"]]
        assert entry["wall_time_s"] == pytest.approx(sum(walls), abs=1e-3)
        assert entry["trained_here"] is True
    resumed = written["seeds"][1]
    assert [s["frames"] for s in resumed["segments"]] == [[0, 256], [256, 2048]]
    assert read_summary(stopped.run_dir)["resumed_from"].endswith("checkpoint-000000000256")
    assert resumed["resume_exact"] is True

    # again: both runs are complete, nothing trains and nothing in the run dirs changes
    before = {p: p.read_bytes() for p in runs_dir.rglob("summary.json")}
    again = _mode(runs_dir, out)
    assert {p: p.read_bytes() for p in runs_dir.rglob("summary.json")} == before
    assert [s["trained_here"] for s in again["seeds"]] == [False, False]
    assert [s["final"] for s in again["seeds"]] == [s["final"] for s in written["seeds"]]

    # a preset evaluating fewer than 10 episodes gets xdrl-eval's 10 on its last checkpoint
    few = dataclasses.replace(cartpole, eval_episodes=5)
    seed0 = runs.gather(few, runs.plan(cartpole, 0, runs_dir, 2048), trained_here=False)
    record = json.loads((Path(written["seeds"][0]["run_dir"]) / runs.EVAL_FILE).read_text())
    assert (seed0.final_source, seed0.final_episodes) == ("xdrl-eval", 10)
    assert (record["frames"], record["episodes"], record["deterministic"]) == (2048, 10, True)
    assert seed0.final == record["return_mean"] == sum(record["returns"]) / 10


FAKE_SB3 = r"""#!/bin/sh
# stands for .venv-sb3's python: imports fine, and "runs" bench_sb3.py by printing its JSON line
[ "$1" = "-c" ] && exit 0
echo "$@" >> "$(dirname "$0")/calls.txt"
seed=$(echo "$@" | sed -n 's/.*--seed \([0-9]*\).*/\1/p')
echo '{"framework": "sb3", "seed": '$seed', "frames": 2048, "final_eval_mean": 1'$seed'.5,'\
' "evals": [{"frames": 1024, "mean": 5.0}, {"frames": 2048, "mean": 1'$seed'.5}]}'
"""


def test_sb3_is_recorded_in_the_same_format_from_bench_sb3s_line(tmp_path: Path) -> None:
    python = tmp_path / "sb3" / "python"
    python.parent.mkdir()
    python.write_text(FAKE_SB3)
    python.chmod(0o755)
    args = ["--mode", "results", "--preset", "pendulum_sac", "--seeds", "0", "1"]
    args += ["--frames", "2048", "--contender", "sb3", "--sb3-args", "sac --sac-env-id Pendulum-v1"]
    args += ["--sb3-python", str(python), "--runs-dir", str(tmp_path / "runs")]
    for _ in range(2):  # the second call reads the kept lines back
        with pytest.raises(SystemExit) as done:
            bench_main([*args, "--out", str(tmp_path / "out")])
        assert done.value.code == 0
    written = json.loads((tmp_path / "out" / "pendulum_sac.sb3.json").read_text())
    assert (written["contender"], written["frames"], written["budget_frames"]) == (
        "sb3",
        2048,
        20000,
    )
    seed0 = written["seeds"][0]
    assert seed0["command"] == (
        "python scripts/bench_sb3.py sac --sac-env-id Pendulum-v1 --seed 0 --frames 2048 "
        "--threads 1 --final-eval 10"
    )
    assert [s["final"] for s in written["seeds"]] == [10.5, 11.5]
    assert seed0["curve"] == [[1024, 5.0], [2048, 10.5]]
    assert (seed0["final_episodes"], seed0["final_source"]) == (10, "bench_sb3")
    assert [s["trained_here"] for s in written["seeds"]] == [False, False]
    calls = (python.parent / "calls.txt").read_text().splitlines()
    assert len(calls) == 2 and calls[0].endswith(seed0["command"].removeprefix("python "))


def test_the_code_is_dirty_for_changed_code_not_for_the_results_own_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data file and the page it rewrites are the command's own output: a second command run
    after a first one must still record a clean checkout."""
    import subprocess

    for path in ("xdrl/a.py", "docs/results.md", "docs/results/p.svg", "benchmarks/results/p.json"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    monkeypatch.setattr(runs, "ROOT", tmp_path)
    for path in ("docs/results.md", "docs/results/p.svg", "benchmarks/results/p.json"):
        (tmp_path / path).write_text("2\n")
    assert runs.code_state()["dirty"] is False
    (tmp_path / "xdrl/a.py").write_text("2\n")
    state = runs.code_state()
    assert state["dirty"] is True and len(state["commit"]) == 12
