"""The learning gate (benchmarks/learning_gate/): every preset is gated or skipped with a reason,
each gated preset has a stable reference of its gate overrides, the comparison names the first
value that moved (exactly on the reference's machine, within the band elsewhere), an update
rewrites only what changed; with the `learning` marker, every preset is run against its reference
and a changed loss coefficient fails the gate with the preset's name."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.learning_gate import gate
from benchmarks.learning_gate.__main__ import main
from benchmarks.learning_gate.compare import (
    MEAN_RETURN,
    Moved,
    Verdict,
    choose_record,
    compare,
)
from benchmarks.learning_gate.presets import GATED, SKIPPED, GatedPreset, experiment_presets
from benchmarks.learning_gate.record import RunResult, _spaced, read_run

REPO = Path(__file__).resolve().parents[1]
MEAN = f"eval/deterministic/{MEAN_RETURN}"
LEN = "eval/deterministic/episode_len_mean"
LOSS = "train/agents/loss_critic"
MACHINE = {"cpu": "Intel Xeon", "torch_cpu_capability": "AVX512", "isa_flags": ["avx2"]}
LIBS = {"python": "3.11.9", "torch": "2.13.0"}
REQUIRED = (
    "lunarlander_ppo",
    "cartpole_ppo",
    "cartpole_dqn",
    "cartpole_a2c",
    "pendulum_sac",
    "pendulum_td3",
    "pendulum_ppo",
    "cartpole_novel_lstm",
    "halfcheetah_sac",
    "atari_ppo",
)


def _run(eval_values: list[float], loss: list[float] | None = None) -> RunResult:
    """A made-up run: evaluations every 1,000 frames from 0, losses every 1,000 from 1,000."""
    frames = 1000 * (len(eval_values) - 1)
    evals = {
        MEAN: [[1000 * i, v] for i, v in enumerate(eval_values)],
        LEN: [[1000 * i, v] for i, v in enumerate(eval_values)],
    }
    losses = loss if loss is not None else [1.5, 1.25, 0.75]
    return RunResult(frames, evals, {LOSS: [[1000 * (i + 1), v] for i, v in enumerate(losses)]})


def _reference(run: RunResult, machine: dict[str, Any] = MACHINE) -> dict[str, Any]:
    record = {"fingerprint": machine, "versions": LIBS, "code_version": "abc", "eval": run.eval}
    return {"frames": run.frames, "machines": [{**record, "train": run.train}]}


def _verdict(reference: dict[str, Any], run: RunResult, band: float = 10.0) -> Verdict:
    mode, reason, record = choose_record(reference, MACHINE, LIBS)
    return compare("cartpole_ppo", reference, run, mode, reason, record, band)


# The table of presets and the committed references


def test_every_preset_is_gated_or_left_out_with_a_reason() -> None:
    assert sorted(set(GATED) | set(SKIPPED)) == experiment_presets()
    assert not set(GATED) & set(SKIPPED)
    assert all(len(reason) > 20 for reason in SKIPPED.values())
    assert set(REQUIRED) <= set(GATED)


@pytest.mark.parametrize("name", sorted(GATED))
def test_each_gated_preset_has_a_stable_reference_of_its_overrides(name: str) -> None:
    path = gate.reference_path(name)
    text = path.read_text()
    reference = json.loads(text)
    assert gate.dump(reference) == text  # sorted keys, 2-space indent: diffs show what moved
    assert reference["overrides"] == GATED[name].all_overrides()
    budget = next(o for o in GATED[name].overrides if o.startswith("total_frames="))
    assert reference["frames"] >= int(budget.split("=")[1])
    for record in reference["machines"]:
        assert {"fingerprint", "versions", "code_version", "eval", "train"} <= set(record)
        means = [k for k in record["eval"] if k.endswith(MEAN_RETURN)]
        assert means and all(len(record["eval"][k]) >= 2 for k in means)  # a curve, not a point
        assert record["train"], f"{name}: no train loss kept"
        assert "time" not in text and "wall" not in text


# The comparison


def test_an_unchanged_run_passes_exactly_on_the_references_machine() -> None:
    run = _run([20.0, 35.5, 80.25])
    verdict = _verdict(_reference(run), _run([20.0, 35.5, 80.25]))
    assert verdict.passed and verdict.mode == "exact"
    assert verdict.report().startswith("PASS cartpole_ppo (exact:")


def test_exact_mode_names_the_first_evaluation_that_moved_by_any_amount() -> None:
    reference = _reference(_run([20.0, 35.5, 80.25, 120.0]))
    # 1e-12 at 2,000 frames, far more at 3,000: the earlier one is named
    verdict = _verdict(reference, _run([20.0, 35.5, 80.25 + 1e-12, 300.0]))
    assert not verdict.passed
    assert verdict.moved_eval == Moved(2000, MEAN, 80.25, 80.25 + 1e-12)
    report = verdict.report()
    assert report.startswith("FAIL cartpole_ppo (exact:")
    assert f"first moved evaluation at 2,000 frames: {MEAN} expected 80.25, got" in report


def test_exact_mode_also_compares_the_kept_train_losses() -> None:
    reference = _reference(_run([20.0, 35.5, 80.25]))
    verdict = _verdict(reference, _run([20.0, 35.5, 80.25], loss=[1.5, 1.2500001, 0.75]))
    assert verdict.moved_eval is None
    assert verdict.moved_train == Moved(2000, LOSS, 1.25, 1.2500001)
    assert "first moved train value at 2,000 frames" in verdict.report()


def test_a_missing_evaluation_moves_where_it_is_missing() -> None:
    reference = _reference(_run([20.0, 35.5, 80.25]))
    verdict = _verdict(reference, _run([20.0, 35.5]))
    assert verdict.moved_eval == Moved(2000, MEAN, 80.25, None)
    assert "ran 1,000 frames, the reference 2,000" in verdict.report()


def test_another_machine_is_compared_within_the_band_after_feedback_tightly_before() -> None:
    amd = {**MACHINE, "cpu": "AMD EPYC"}
    reference = _reference(_run([20.0, 35.5, 80.25]), machine=amd)  # band 10 (_verdict)
    # untrained eval within 1% of the band, first loss within 1% of itself, later evals within
    # the band; other eval metrics and later losses move freely
    near = _run([20.05, 26.0, 90.0], loss=[1.5 * 1.009, 9.0, 9.0])
    near.eval[LEN] = [[0, 500.0], [1000, 500.0], [2000, 500.0]]
    verdict = _verdict(reference, near)
    assert verdict.passed and verdict.mode == "tolerance", verdict.report()
    assert "cpu 'AMD EPYC' here 'Intel Xeon'" in verdict.reason
    far = _verdict(reference, _run([20.0, 26.0, 60.0]))
    assert far.moved_eval == Moved(2000, MEAN, 80.25, 60.0)
    assert far.moved_train is None
    start = _verdict(reference, _run([20.5, 35.5, 80.25]))
    assert start.moved_eval == Moved(0, MEAN, 20.0, 20.5)
    first_loss = _verdict(reference, _run([20.0, 35.5, 80.25], loss=[1.5 * 1.011, 1.25, 0.75]))
    assert first_loss.moved_train == Moved(1000, LOSS, 1.5, 1.5 * 1.011)
    assert "FAIL cartpole_ppo (tolerance:" in first_loss.report()


def test_other_library_versions_are_compared_within_the_band() -> None:
    reference = _reference(_run([20.0, 35.5]))
    reference["machines"][0]["versions"] = {**LIBS, "torch": "2.12.0"}
    verdict = _verdict(reference, _run([20.0, 35.5]))
    assert verdict.mode == "tolerance" and "torch 2.12.0 here 2.13.0" in verdict.reason


def test_the_record_of_this_machine_is_chosen_among_several() -> None:
    ours, theirs = _run([20.0, 35.5]), _run([20.0, 99.0])
    reference = _reference(theirs, machine={**MACHINE, "cpu": "AMD EPYC"})
    reference["machines"].append(_reference(ours)["machines"][0])
    assert _verdict(reference, _run([20.0, 35.5])).mode == "exact"
    assert _verdict(reference, _run([20.0, 35.5])).passed


def test_train_rows_kept_are_evenly_spaced_with_first_and_last() -> None:
    rows = [[i * 256, float(i)] for i in range(1, 17)]
    assert [r[0] for r in _spaced(rows)] == [256, 1536, 2816, 4096]
    assert _spaced(rows[:3]) == rows[:3]


def test_read_run_reads_the_csvs_as_written(tmp_path: Path) -> None:
    scalars = tmp_path / "logs" / "ppo_cartpole" / "scalars"
    (scalars / "eval" / "deterministic" / "reward").mkdir(parents=True)
    (scalars / "train" / "agents").mkdir(parents=True)
    (scalars / "eval" / "deterministic" / "reward" / "episode_reward_mean.csv").write_text(
        "0,84.5\n512,14.0\n"
    )
    (scalars / "train" / "agents" / "loss_critic.csv").write_text("256,5.8431572914123535\n")
    (scalars / "train" / "agents" / "kl_approx.csv").write_text("256,0.1\n")
    (tmp_path / "summary.json").write_text(json.dumps({"total_frames": 512}))
    run = read_run(tmp_path)
    assert run == RunResult(
        512, {MEAN: [[0, 84.5], [512, 14.0]]}, {LOSS: [[256, 5.8431572914123535]]}
    )


# Updating references


def _fake_update(
    monkeypatch: pytest.MonkeyPatch, runs: list[RunResult], code: str = "c0de"
) -> None:
    """Make gate.update run the made-up ``runs`` (one per call) on MACHINE with LIBS."""
    feed = iter(runs)

    def run_all(
        presets: list[GatedPreset], jobs: int, extra: object, on_done: Callable[..., None]
    ) -> None:
        for preset in presets:
            on_done(preset.name, next(feed))

    monkeypatch.setattr(gate, "run_all", run_all)
    monkeypatch.setattr(gate, "fingerprint", lambda: MACHINE)
    monkeypatch.setattr(gate, "versions", lambda: LIBS)
    monkeypatch.setattr(gate, "code_version", lambda: code)


def test_update_rewrites_a_reference_only_when_its_curves_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_update(monkeypatch, [_run([20.0, 35.5])], code="aaa")
    assert gate.update(["cartpole_ppo"], references=tmp_path) == {"cartpole_ppo": "written"}
    first = gate.reference_path("cartpole_ppo", tmp_path).read_text()
    # same curves at a later commit: the file (and its code version) stays as it was
    _fake_update(monkeypatch, [_run([20.0, 35.5])], code="bbb")
    assert gate.update(["cartpole_ppo"], references=tmp_path) == {"cartpole_ppo": "unchanged"}
    assert gate.reference_path("cartpole_ppo", tmp_path).read_text() == first
    _fake_update(monkeypatch, [_run([20.0, 36.0])], code="ccc")
    assert gate.update(["cartpole_ppo"], references=tmp_path) == {"cartpole_ppo": "written"}
    reference = json.loads(gate.reference_path("cartpole_ppo", tmp_path).read_text())
    assert reference["overrides"] == GATED["cartpole_ppo"].all_overrides()
    assert [r["code_version"] for r in reference["machines"]] == ["ccc"]
    assert reference["machines"][0]["eval"][MEAN] == [[0, 20.0], [1000, 36.0]]


def test_update_replaces_other_machines_unless_asked_to_keep_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = gate.reference_path("cartpole_ppo", tmp_path)
    amd = {**_reference(_run([20.0, 1.0]))["machines"][0], "fingerprint": {"cpu": "AMD EPYC"}}
    path.write_text(gate.dump({"machines": [amd]}))
    _fake_update(monkeypatch, [_run([20.0, 35.5])])
    gate.update(["cartpole_ppo"], references=tmp_path, keep_other_machines=True)
    cpus = [r["fingerprint"]["cpu"] for r in json.loads(path.read_text())["machines"]]
    assert cpus == ["Intel Xeon", "AMD EPYC"]
    _fake_update(monkeypatch, [_run([20.0, 35.0])])
    gate.update(["cartpole_ppo"], references=tmp_path)
    cpus = [r["fingerprint"]["cpu"] for r in json.loads(path.read_text())["machines"]]
    assert cpus == ["Intel Xeon"]


def test_check_without_a_reference_fails_with_the_update_command(tmp_path: Path) -> None:
    (verdict,) = gate.check(["cartpole_ppo"], references=tmp_path)
    assert not verdict.passed and verdict.mode == "no-reference"
    assert "update --preset cartpole_ppo" in verdict.report()


def test_the_command_line_refuses_a_preset_it_does_not_gate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "--preset", "dst_pareto"])
    assert exc.value.code == 2
    assert "dst_pareto: a sweep (hydra -m)" in capsys.readouterr().err


# The gate itself, on real runs (marker learning: make test-learning)


@pytest.fixture(scope="module")
def verdicts(request: pytest.FixtureRequest) -> dict[str, Verdict]:
    """Every selected preset's verdict, the runs two at a time (one call of the gate)."""
    selected = [
        item.callspec.params["preset"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_preset_learns_as_its_reference"
    ]
    return {v.preset: v for v in gate.check(selected)}


@pytest.mark.learning
@pytest.mark.parametrize("preset", sorted(GATED))
def test_preset_learns_as_its_reference(preset: str, verdicts: dict[str, Verdict]) -> None:
    verdict = verdicts[preset]
    if verdict.mode == "skipped":
        pytest.skip(verdict.reason)
    assert verdict.passed, verdict.report()


def _gate(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.learning_gate", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True)


@pytest.mark.learning
def test_a_changed_loss_coefficient_fails_the_gate_naming_the_preset(tmp_path: Path) -> None:
    # a reference written here, so the check is exact on any machine
    written = _gate("update", "--preset", "cartpole_ppo", "--references", str(tmp_path))
    assert written.returncode == 0, written.stdout + written.stderr
    assert "cartpole_ppo: written" in written.stdout
    reference = json.loads(gate.reference_path("cartpole_ppo", tmp_path).read_text())
    curve = reference["machines"][0]["eval"][MEAN]
    same = _gate("check", "--preset", "cartpole_ppo", "--references", str(tmp_path))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "PASS cartpole_ppo (exact:" in same.stdout
    changed = _gate(
        "check",
        "--preset",
        "cartpole_ppo",
        "--references",
        str(tmp_path),
        "--override",
        "algorithm.build.critic_coef=0.25",  # the preset's value loss weight, halved
    )
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "FAIL cartpole_ppo (exact:" in changed.stdout
    # the untrained policy's evaluation cannot move; the first one that did names its frames,
    # the metric, the reference's value there and the new one
    line = next(ln for ln in changed.stdout.splitlines() if "first moved evaluation" in ln)
    frames = int(line.split(" at ")[1].split(" frames")[0].replace(",", ""))
    expected = dict((f, v) for f, v in curve)[frames]
    assert frames > 0
    assert line.strip().startswith(f"first moved evaluation at {frames:,} frames: {MEAN}")
    assert f"expected {expected!r}, got" in line
    assert "learning gate: 0/1 passed" in changed.stdout
