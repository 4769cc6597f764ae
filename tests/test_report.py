"""xdrl-report and the evaluation history it reads: statistics checked against independent code
on synthetic run folders, the files it writes, and end-to-end runs of xdrl-train; the
``xdrl-report`` console script on bad input (an unknown metric, a full disk, corrupt evaluation
lines, runs of several envs, ``--out`` a file, folders without runs)."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import numpy as np
import pytest
import yaml
from scipy import stats

from tests.conftest import read_summary, run_cli
from xdrl.report import make_report
from xdrl.report.cli import main as report_main
from xdrl.report.runs import find_runs
from xdrl.trainer_hooks.evaluation_history import (
    EVALUATIONS_FILE,
    EvaluationHistory,
    read_evaluations,
)

METRIC = "eval/deterministic/reward/episode_reward_mean"
REPORT_FILES = {"report.md", "report.json", "curves.png", "final.png"}


# ---------------------------------------------------------------------------------------------
# Synthetic runs
# ---------------------------------------------------------------------------------------------


def fake_run(
    root: Path,
    name: str,
    *,
    seed: int,
    overrides: list[str],
    history: list[tuple[int, float]],
    status: str | None = "completed",
    env: str = "CartPole-v1",
    extra: dict[str, float] | None = None,
    config: dict[str, Any] | None = None,
    resumed_from: str | None = None,
) -> Path:
    """A run folder as xdrl-train leaves it; the config follows the overrides."""
    run_dir = root / name
    (run_dir / ".hydra").mkdir(parents=True)
    cfg: dict[str, Any] = {
        "seed": seed,
        "run_dir": str(run_dir),
        "exp_name": name,
        "resume": None,
        "env": {"id": env},
        "total_frames": 1000,
    }
    for override in overrides:
        key, value = override.split("=", 1)
        if key == "algorithm":  # Hydra composes a group's option into the group's node
            cfg[key] = {"build": {"_target_": f"xdrl.algorithms.{value}.build"}}
        elif key not in ("seed", "env.id"):
            cfg[key] = value
    cfg.update(config or {})
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}", *overrides]))
    records = [{"frames": f, "time": 0.0, "wall_time_s": 0.0, METRIC: v} for f, v in history]
    if records and extra:
        records[-1].update(extra)
    (run_dir / EVALUATIONS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    if status is not None:
        summary = {"status": status, "total_frames": history[-1][0], "seed": seed}
        summary["eval"] = dict(records[-1]) if records else {}
        if resumed_from:
            summary["resumed_from"] = resumed_from
        (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def sweep_of(root: Path, finals: dict[str, list[float]]) -> Path:
    """One run per value, a configuration per key (``algorithm=<key>``), seeds 0, 1, ..."""
    num = 0
    for algo, values in finals.items():
        for seed, value in enumerate(values):
            history = [(0, 10.0), (500, (10.0 + value) / 2), (1000, value)]
            fake_run(root, f"{num}_{algo}_{seed}", seed=seed, overrides=[f"algorithm={algo}"],
                     history=history)  # fmt: skip
            num += 1
    return root


def _report(root: Path, *args: str) -> dict[str, Any]:
    assert report_main([str(root), *args]) == 0
    return json.loads((root / "report" / "report.json").read_text())


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in report["groups"]}


def _contains(ci: list[float], value: float) -> bool:
    return ci[0] - 1e-9 <= value <= ci[1] + 1e-9


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

WIDE = [12.0, 80.0, 35.0, 100.0, 47.0, 3.0, 66.0, 90.0]
NARROW = [50.0, 51.0, 49.0, 52.0, 48.0, 50.5, 49.5, 50.0]


def test_final_statistics_match_independent_code(tmp_path: Path, capsys) -> None:
    report = _report(sweep_of(tmp_path, {"ppo": WIDE, "a2c": NARROW}))
    assert report["metric"] == METRIC
    for name, values in (("algorithm=ppo", WIDE), ("algorithm=a2c", NARROW)):
        final = _by_name(report)[name]["final"]
        assert final["iqm"] == pytest.approx(stats.trim_mean(values, 0.25))
        assert final["mean"] == pytest.approx(statistics.mean(values))
        assert final["median"] == pytest.approx(statistics.median(values))
        assert final["std"] == pytest.approx(statistics.stdev(values))
        assert _contains(final["iqm_ci"], final["iqm"])
        assert _contains(final["mean_ci"], final["mean"])
        assert _by_name(report)[name]["runs"] == 8
        assert _by_name(report)[name]["seeds"] == list(range(8))
    # IQM by hand: sorted NARROW is 48 49 49.5 50 | 50 50.5 51 52 -> middle half 49.5 50 50 50.5
    assert _by_name(report)["algorithm=a2c"]["final"]["iqm"] == pytest.approx(50.0)
    width = {
        n: g["final"]["iqm_ci"][1] - g["final"]["iqm_ci"][0] for n, g in _by_name(report).items()
    }
    assert width["algorithm=a2c"] < width["algorithm=ppo"] / 5  # runs that agree: a narrow interval
    assert "algorithm=a2c" in capsys.readouterr().out  # the table on stdout


def test_groups_best_first_and_probability_of_improvement(tmp_path: Path) -> None:
    good, bad = [90.0, 95.0, 70.0, 99.0], [60.0, 75.0, 50.0, 65.0]
    report = _report(sweep_of(tmp_path, {"a2c": bad, "ppo": good}))
    assert [g["name"] for g in report["groups"]] == ["algorithm=ppo", "algorithm=a2c"]
    assert [g["overrides"] for g in report["groups"]] == [
        {"algorithm": "ppo"},
        {"algorithm": "a2c"},
    ]
    (poi,) = report["probability_of_improvement"]
    assert (poi["x"], poi["y"]) == ("algorithm=ppo", "algorithm=a2c")
    expected = statistics.mean((x > y) + 0.5 * (x == y) for x in good for y in bad)
    assert poi["p"] == pytest.approx(expected) == pytest.approx(15 / 16)
    assert _contains(poi["ci"], poi["p"]) and 0 <= poi["ci"][0] <= poi["ci"][1] <= 1


def test_no_improvement_across_environments(tmp_path: Path) -> None:
    fake_run(tmp_path, "a0", seed=0, overrides=["env.id=A-v0"], history=[(0, 1.0)], env="A-v0")
    fake_run(tmp_path, "a1", seed=1, overrides=["env.id=A-v0"], history=[(0, 2.0)], env="A-v0")
    fake_run(tmp_path, "b0", seed=0, overrides=["env.id=B-v0"], history=[(0, 1.0)], env="B-v0")
    report = _report(tmp_path)
    assert {g["name"] for g in report["groups"]} == {"env.id=A-v0", "env.id=B-v0"}
    assert report["probability_of_improvement"] == []


def test_curves_align_runs_evaluated_at_different_frames(tmp_path: Path) -> None:
    fake_run(tmp_path, "r0", seed=0, overrides=[], history=[(0, 0.0), (100, 10.0), (200, 20.0)])
    fake_run(tmp_path, "r1", seed=1, overrides=[], history=[(0, 4.0), (50, 8.0), (200, 8.0)])
    fake_run(tmp_path, "r2", seed=2, overrides=[], history=[(0, 2.0), (100, 6.0), (300, 6.0)])
    (group,) = _report(tmp_path)["groups"]
    curve = group["curve"]
    # The union of evaluation frames inside the span all three runs cover (0..200).
    assert [p["frames"] for p in curve] == [0, 50, 100, 200]
    runs_at = {0: [0, 4, 2], 50: [5, 8, 4], 100: [10, 8, 6], 200: [20, 8, 6]}  # interpolated
    for point in curve:
        assert point["iqm"] == pytest.approx(stats.trim_mean(runs_at[point["frames"]], 0.25))
        assert _contains(point["ci"], point["iqm"])


def test_failed_stopped_and_incomplete_runs_are_listed_not_averaged(tmp_path: Path) -> None:
    history = [(0, 1.0), (1000, 30.0)]
    fake_run(tmp_path, "0_ok", seed=0, overrides=[], history=history)
    fake_run(tmp_path, "1_ok", seed=1, overrides=[], history=[(0, 1.0), (1000, 40.0)])
    fake_run(tmp_path, "2_failed", seed=2, overrides=[], history=[(0, 1.0)], status="failed")
    fake_run(tmp_path, "3_stopped", seed=3, overrides=[], history=[(0, 900.0)], status="stopped")
    fake_run(tmp_path, "4_killed", seed=4, overrides=[], history=[(0, 900.0)], status=None)
    # A run resumed from another folder is the same configuration.
    fake_run(tmp_path, "5_resumed", seed=5, overrides=["resume=/elsewhere"], history=history,
             config={"resume": "/elsewhere"}, resumed_from="/elsewhere/checkpoints/c")  # fmt: skip
    report = _report(tmp_path)
    (group,) = report["groups"]
    assert group["runs"] == 3 and group["seeds"] == [0, 1, 5]
    assert group["final"]["mean"] == pytest.approx(statistics.mean([30.0, 40.0, 30.0]))
    md = (tmp_path / "report" / "report.md").read_text()
    for name, status in (
        ("2_failed", "failed"),
        ("3_stopped", "stopped"),
        ("4_killed", "incomplete"),
    ):
        row = next(line for line in md.splitlines() if f"`{name}`" in line)
        assert f"{status}: not averaged" in row
    row = next(line for line in md.splitlines() if "`5_resumed`" in line)
    assert "completed (resumed)" in row and row.endswith("| yes |")


def test_a_group_of_one_run_has_no_interval(tmp_path: Path) -> None:
    fake_run(tmp_path, "only", seed=0, overrides=["algorithm=ppo"], history=[(0, 1.0), (10, 5.0)])
    report = _report(tmp_path)
    (group,) = report["groups"]
    assert group["final"]["iqm_ci"] is None and group["final"]["mean_ci"] is None
    assert group["final"]["std"] is None and group["final"]["iqm"] == 5.0
    assert all(point["ci"] is None for point in group["curve"])
    assert "One run only (no interval)" in (tmp_path / "report" / "report.md").read_text()


def test_per_objective_returns_appear_in_the_table(tmp_path: Path) -> None:
    key = "eval/deterministic/reward/objective_{}/episode_reward_mean"
    for seed in range(2):  # objective_i ends at i + seed
        extra = {key.format(i): float(i + seed) for i in range(2)}
        fake_run(tmp_path, f"r{seed}", seed=seed, overrides=[], history=[(0, 1.0)], extra=extra)
    _report(tmp_path)
    lines = (tmp_path / "report" / "report.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| group"))
    assert "objective_0 IQM (mean)" in header and "objective_1 IQM (mean)" in header
    row = next(line for line in lines if line.startswith("| `all runs`"))
    assert row.endswith("| 0.5 (0.5) | 1.5 (1.5) |")


# ---------------------------------------------------------------------------------------------
# Files and the command
# ---------------------------------------------------------------------------------------------


def _shape(report: dict[str, Any]) -> None:
    assert set(report) == {"metric", "groups", "probability_of_improvement", "short_runs"}
    for group in report["groups"]:
        assert set(group) == {"name", "env", "overrides", "runs", "seeds", "final", "curve"}
        assert isinstance(group["name"], str) and isinstance(group["runs"], int)
        assert isinstance(group["env"], str)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in group["overrides"].items())
        assert all(isinstance(s, int) for s in group["seeds"])
        final = group["final"]
        assert set(final) == {"mean", "std", "median", "iqm", "iqm_ci", "mean_ci"}
        assert all(isinstance(final[k], float) for k in ("mean", "median", "iqm"))
        for ci in (final["iqm_ci"], final["mean_ci"]):
            assert ci is None or (len(ci) == 2 and all(isinstance(v, float) for v in ci))
        for point in group["curve"]:
            assert set(point) == {"frames", "iqm", "ci"} and isinstance(point["frames"], int)
    for row in report["probability_of_improvement"]:
        assert set(row) == {"env", "x", "y", "p", "ci"}


def _assert_pngs(out_dir: Path) -> None:
    for name in ("curves.png", "final.png"):
        image = iio.imread(out_dir / name)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
        assert float(np.asarray(image, dtype=float).std()) > 0, f"{name} is blank"


def test_report_files_shape_and_plots(tmp_path: Path) -> None:
    report = _report(sweep_of(tmp_path, {"ppo": WIDE[:5], "a2c": NARROW[:5]}))
    _shape(report)
    out = tmp_path / "report"
    assert REPORT_FILES <= {p.name for p in out.iterdir()}
    _assert_pngs(out)
    md = (out / "report.md").read_text()
    assert f"xdrl-report {tmp_path}" in md and "![learning curves](curves.png)" in md


# Long group names: an Optuna sweep's trials, three long floats each.
LONG_OVERRIDES = [
    [
        f"algorithm.optimizer.lr={0.000123456789 * (g + 1)!r}",
        f"algorithm.build.clip_epsilon={0.1 + 0.0123456789 * g!r}",
        f"algorithm.build.entropy_coef={0.001234567891 * g!r}",
    ]
    for g in range(6)
]


def _texts_outside(fig: Any) -> list[str]:
    """Every text drawn on ``fig`` that does not lie inside the figure (empty: all inside)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    texts = [*fig.texts]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
        for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            ticks = zip(axis.get_ticklocs(), axis.get_ticklabels(), strict=True)
            texts += [label for loc, label in ticks if low <= loc <= high]  # drawn ones
        texts += ax.get_legend().get_texts() if ax.get_legend() else []
    outside = []
    for text in texts:
        box = text.get_window_extent(renderer)
        if text.get_text() and not (
            box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1
        ):
            outside.append(text.get_text())
    return outside


def test_long_group_names_become_tags_with_a_key_and_lay_out_without_warnings(
    tmp_path: Path, capsys
) -> None:
    for g, overrides in enumerate(LONG_OVERRIDES):
        for seed in (0, 1):
            history = [(0, 10.0), (500, 20.0 + g + seed), (1000, 30.0 + g * seed)]
            fake_run(tmp_path, f"{g}_{seed}", seed=seed, overrides=overrides, history=history)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "Tight layout not applied" included
        report = _report(tmp_path)
        from xdrl.report.plots import curves_figure, final_figure

        figures = {
            "curves": curves_figure(report["groups"], METRIC),
            "final": final_figure(report["groups"], METRIC),
        }
    assert "Warning" not in capsys.readouterr().err
    _assert_pngs(tmp_path / "report")
    tags = [f"G{i + 1} (n=2)" for i in range(len(LONG_OVERRIDES))]
    (final_ax,) = figures["final"].axes
    assert [t.get_text() for t in final_ax.get_yticklabels()] == tags[::-1]  # best on top
    (curves_ax,) = figures["curves"].axes
    assert [t.get_text() for t in curves_ax.get_legend().get_texts()] == tags
    for name, fig in figures.items():
        assert _texts_outside(fig) == [], name
        (key,) = fig.texts
        lines = key.get_text().splitlines()
        assert max(len(line) for line in lines) <= 88
        entries = " ".join(lines).split("G")[1:]  # one entry per tag, wrapped lines joined
        assert len(entries) == len(report["groups"])
        for i, (entry, group) in enumerate(zip(entries, report["groups"], strict=True)):
            assert entry.startswith(f"{i + 1}: ")
            overrides = LONG_OVERRIDES[[" ".join(o) for o in LONG_OVERRIDES].index(group["name"])]
            assert " ".join(entry.split()[1:]) == " ".join(overrides) + " (n=2)"


def test_short_group_names_stay_on_the_axes(tmp_path: Path) -> None:
    from xdrl.report.plots import curves_figure, final_figure

    report = _report(sweep_of(tmp_path, {"ppo": WIDE[:3], "a2c": NARROW[:3]}))
    final = final_figure(report["groups"], METRIC)
    labels = [t.get_text() for t in final.axes[0].get_yticklabels()]
    assert labels == ["algorithm=ppo (n=3)", "algorithm=a2c (n=3)"]  # a2c (about 50) on top
    assert not final.texts and not curves_figure(report["groups"], METRIC).texts


def test_out_dir_metric_and_errors(tmp_path: Path, monkeypatch, capsys) -> None:
    key = "eval/deterministic/episode_len_mean"
    root = tmp_path / "sweep"
    for seed in range(2):
        fake_run(root, f"r{seed}", seed=seed, overrides=[], history=[(0, 1.0)], extra={key: 9.0})
    out = tmp_path / "elsewhere"
    assert report_main([str(root), "--out", str(out), "--metric", key]) == 0
    assert json.loads((out / "report.json").read_text())["metric"] == key
    assert report_main([str(tmp_path / "missing")]) == 2
    monkeypatch.setattr("xdrl.report.cli.missing_extra", lambda: ["scipy"])
    capsys.readouterr()
    assert report_main([str(root)]) == 2
    assert capsys.readouterr().err.strip() == (
        "xdrl-report: needs scipy and matplotlib: pip install 'xdrl[report]'"
    )


def test_pareto_hook_section_is_appended(tmp_path: Path, monkeypatch) -> None:
    seen = []
    module = types.ModuleType("xdrl.pareto.report")

    def pareto_report(runs, out_dir):
        seen.append(([r.dir.name for r in runs], out_dir))
        return "## Pareto front\n\nfront here\n"

    module.pareto_report = pareto_report  # type: ignore[attr-defined]
    module.PARETO_PNG = "pareto.png"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xdrl.pareto", types.ModuleType("xdrl.pareto"))
    monkeypatch.setitem(sys.modules, "xdrl.pareto.report", module)
    root = sweep_of(tmp_path, {"ppo": [1.0, 2.0]})
    make_report([root])
    ((names, staged),) = seen
    assert names == ["0_ppo_0", "1_ppo_1"]
    assert staged.parent == root and not staged.exists()  # built beside report/, swapped in
    assert "## Pareto front" in (root / "report" / "report.md").read_text()


def test_find_runs_reads_every_field(tmp_path: Path) -> None:
    fake_run(tmp_path / "multirun" / "s1", "0_x", seed=3, overrides=["a=1"], history=[(0, 1.0)])
    fake_run(tmp_path / "outputs", "single", seed=4, overrides=[], history=[(0, 2.0), (8, 3.0)])
    (tmp_path / "multirun" / "s1" / "report").mkdir()  # a report folder is no run
    runs = find_runs([tmp_path, tmp_path / "outputs"])  # a folder named twice counts once
    assert [r.dir.name for r in runs] == ["0_x", "single"]
    assert runs[0].overrides == ["seed=3", "a=1"] and runs[0].config["seed"] == 3
    assert runs[1].summary is not None and runs[1].status == "completed"
    assert [e["frames"] for e in runs[1].evaluations] == [0, 8]


def test_report_imports_no_torch(tmp_path: Path) -> None:
    root = sweep_of(tmp_path, {"ppo": [1.0, 2.0]})
    code = (
        "import sys; from xdrl.report.cli import main; import xdrl.sweep.summary; "
        f"assert main([{str(root)!r}]) == 0; "
        "print(sorted(m for m in ('torch', 'torchrl', 'wandb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# ---------------------------------------------------------------------------------------------
# The evaluation history
# ---------------------------------------------------------------------------------------------


class _Hook:
    def __init__(self) -> None:
        self.num_evaluations = 0


class _Evaluation:
    """Stands in for LoggingEvaluationHookSet: hooks with a count, the latest metrics, the frames
    of the latest complete evaluation."""

    def __init__(self) -> None:
        self.hooks = [_Hook()]
        self.last_metrics: dict[str, float] = {}
        self.last_eval_frames = 0
        self.interrupted_at: int | None = None  # no evaluation interrupted

    def evaluate(self, value: float, frames: int = 0) -> None:
        self.hooks[0].num_evaluations += 1
        self.last_metrics = {METRIC: value}
        self.last_eval_frames = frames


class _Trainer:
    def __init__(self, frames: int) -> None:
        self.collected_frames = frames
        self.ops: list[tuple[str, Any]] = []

    def register_op(self, stage: str, op: Any) -> None:
        self.ops.append((stage, op))


def test_history_records_each_evaluation_once(tmp_path: Path) -> None:
    evaluation, trainer = _Evaluation(), _Trainer(0)
    history = EvaluationHistory(tmp_path, evaluation)  # type: ignore[arg-type]
    history.register(trainer)  # type: ignore[arg-type]
    assert [stage for stage, _ in trainer.ops] == ["setup", "post_steps_log"]
    evaluation.evaluate(1.0)  # before training (run_pre_eval)
    history.setup()
    for frames in (256, 512, 768):
        trainer.collected_frames = frames
        if frames != 512:  # no evaluation due at 512
            evaluation.evaluate(frames / 100, frames)
        history(None)
    records = read_evaluations(tmp_path / EVALUATIONS_FILE)
    assert [(r["frames"], r[METRIC]) for r in records] == [(0, 1.0), (256, 2.56), (768, 7.68)]
    assert all({"time", "wall_time_s"} <= set(r) for r in records)


def test_history_resumed_keeps_records_up_to_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / EVALUATIONS_FILE
    # A killed run: evaluated at 0, 256, 512 and 768, its last checkpoint at 512.
    path.write_text(
        "".join(json.dumps({"frames": f, METRIC: f / 10}) + "\n" for f in (0, 256, 512, 768))
    )
    evaluation, trainer = _Evaluation(), _Trainer(512)
    evaluation.hooks[0].num_evaluations = 3  # restored from the checkpoint
    evaluation.last_eval_frames = 512
    history = EvaluationHistory(tmp_path, evaluation)  # type: ignore[arg-type]
    history.register(trainer)  # type: ignore[arg-type]
    history.setup()
    assert [r["frames"] for r in read_evaluations(path)] == [0, 256, 512]
    trainer.collected_frames = 768
    evaluation.evaluate(99.0, 768)
    history(None)
    records = read_evaluations(path)
    assert [r["frames"] for r in records] == [0, 256, 512, 768] and records[-1][METRIC] == 99.0


def test_history_of_a_fresh_run_replaces_an_old_file(tmp_path: Path) -> None:
    (tmp_path / EVALUATIONS_FILE).write_text(json.dumps({"frames": 0, METRIC: -1.0}) + "\n")
    evaluation, trainer = _Evaluation(), _Trainer(0)
    history = EvaluationHistory(tmp_path, evaluation)  # type: ignore[arg-type]
    history.register(trainer)  # type: ignore[arg-type]
    history.setup()  # no evaluation before training
    assert read_evaluations(tmp_path / EVALUATIONS_FILE) == []


# ---------------------------------------------------------------------------------------------
# xdrl-train, end to end
# ---------------------------------------------------------------------------------------------

TINY = [
    "total_frames=512",
    "frames_per_batch=256",
    "env.num_envs=4",
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=50",
    "logging=none",
]


def test_sweep_ends_with_the_report(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    args = ["-m", "seed=0,1,2,3", "algorithm.build.epochs=1,2", *TINY, "checkpoint=none"]
    result = run_cli([*args, f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sorted(p.parent for p in sweep_dir.glob("*/.hydra"))
    assert len(jobs) == 8
    for job in jobs:
        frames = [r["frames"] for r in read_evaluations(job / EVALUATIONS_FILE)]
        assert frames == [0, 256, 512]  # logging=none: the history is written anyway
    out = sweep_dir / "report"
    assert REPORT_FILES <= {p.name for p in out.iterdir()}
    assert "Sweep report" in result.stdout
    assert "Made by `xdrl-train -m seed=0,1,2,3 algorithm.build.epochs=1,2" in (
        (out / "report.md").read_text()
    )
    report = json.loads((out / "report.json").read_text())
    _shape(report)
    names = {g["name"] for g in report["groups"]}
    assert names == {"algorithm.build.epochs=1", "algorithm.build.epochs=2"}
    assert all(g["runs"] == 4 and g["seeds"] == [0, 1, 2, 3] for g in report["groups"])
    assert [p["frames"] for p in report["groups"][0]["curve"]] == [0, 256, 512]
    assert len(report["probability_of_improvement"]) == 1
    _assert_pngs(out)
    # The command-line tool reads the same folder to the same numbers.
    again = _xdrl_report(sweep_dir, "--out", tmp_path / "again")
    assert again.returncode == 0, again.stderr
    assert "algorithm.build.epochs=1" in again.stdout
    assert (
        json.loads((tmp_path / "again" / "report.json").read_text())["groups"] == (report["groups"])
    )


def test_history_has_no_duplicate_frames_after_a_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    common = [*TINY[1:], "algorithm.build.epochs=1", "checkpoint.interval_frames=256"]
    for total in (512, 1024):
        result = run_cli([f"total_frames={total}", *common, f"hydra.run.dir={run_dir}"], tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    assert read_summary(run_dir)["resumed_from"].endswith("checkpoint-000000000512")
    frames = [r["frames"] for r in read_evaluations(run_dir / EVALUATIONS_FILE)]
    assert frames == [0, 256, 512, 768, 1024]


def test_wandb_sweep_report_logs_plots_and_table(tmp_path: Path, monkeypatch) -> None:
    from omegaconf import OmegaConf

    from xdrl.report.sweep import sweep_report, wandb_target

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    sweep_dir = sweep_of(tmp_path / "multirun" / "2026-11-23" / "05-00-00", {"ppo": [1.0, 2.0]})
    config = OmegaConf.create(
        {
            "logging": {"logger": {"_target_": "xdrl.training.loggers.WandbLogger", "project": "p",
                                   "entity": None, "group": None, "mode": None}},
            "hydra": {"sweep": {"dir": str(sweep_dir)}},
        }
    )  # fmt: skip
    target = wandb_target(config)
    assert target == {"project": "p", "entity": None, "group": "2026-11-23/05-00-00", "mode": None}
    assert wandb_target(OmegaConf.create({"logging": {"logger": None}})) is None
    assert sweep_report(str(sweep_dir), None, print_table=False, wandb=target) == (
        sweep_dir / "report"
    )
    (run_dir,) = (sweep_dir / "report" / "wandb").glob("offline-run-*")
    media = run_dir / "files" / "media"
    assert {p.name.split("_")[0] for p in (media / "images" / "report").glob("*.png")} == {
        "curves",
        "final",
    }
    (table,) = (media / "table" / "report").glob("groups_*.table.json")
    data = json.loads(table.read_text())
    assert data["columns"][:3] == ["group", "runs", "seeds"]
    assert data["data"][0][:3] == ["algorithm=ppo", 2, "0,1"]


def test_group_names_defaults_and_config_differences(tmp_path: Path) -> None:
    fake_run(tmp_path, "a", seed=0, overrides=[], history=[(0, 1.0)])
    fake_run(tmp_path, "b", seed=0, overrides=["algorithm=a2c"], history=[(0, 2.0)])
    assert {g["name"] for g in _report(tmp_path)["groups"]} == {"defaults", "algorithm=a2c"}
    other = tmp_path / "other"
    fake_run(other, "c", seed=0, overrides=[], history=[(0, 1.0)], config={"gamma": 0.9})
    fake_run(other, "d", seed=0, overrides=[], history=[(0, 1.0)], config={"gamma": 0.99})
    assert {g["name"] for g in _report(other)["groups"]} == {"gamma=0.9", "gamma=0.99"}


def test_runs_that_all_agree_give_a_point_interval(tmp_path: Path) -> None:
    report = _report(sweep_of(tmp_path, {"ppo": [500.0] * 5}))  # BCa would give NaN here
    final = report["groups"][0]["final"]
    assert final["iqm_ci"] == final["mean_ci"] == [500.0, 500.0] and final["std"] == 0.0


# ---------------------------------------------------------------------------------------------
# Reports never lie and never half-write: xdrl-report as a user runs it
# ---------------------------------------------------------------------------------------------

LEN_METRIC = "eval/deterministic/episode_len_mean"


def _xdrl_report(*args: str | Path) -> subprocess.CompletedProcess:
    """``xdrl-report *args`` in a fresh interpreter, as a user runs it. Not from the warm
    interpreter (tests/warm_python.py): xdrl-report imports no torch, and a fresh start cost
    0.7 s of CPU where a child of the torch-holding server cost 1.7 s."""
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}  # as run_script does
    script = Path(sys.executable).with_name("xdrl-report")
    return subprocess.run(
        [str(script), *map(str, args)], env=env, capture_output=True, text=True, timeout=600
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _two_metric_sweep(root: Path) -> Path:
    """Two configurations of two seeds reporting the return and the episode length."""
    for algo, base in (("ppo", 100.0), ("a2c", 50.0)):
        for seed in range(2):
            fake_run(root, f"{algo}_{seed}", seed=seed, overrides=[f"algorithm={algo}"],
                     history=[(0, 1.0), (100, base + seed)],
                     extra={LEN_METRIC: base / 2 + seed})  # fmt: skip
    return root


def test_unknown_metric_is_one_line_with_a_did_you_mean_and_writes_nothing(tmp_path: Path) -> None:
    root = _two_metric_sweep(tmp_path / "sweep")
    assert report_main([str(root)]) == 0  # the good report (in process: the CLI is below)
    before = _snapshot(root / "report")
    misspelt = "eval/deterministic/reward/episode_reward_maen"
    result = _xdrl_report(root, "--metric", misspelt)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"xdrl-report: --metric {misspelt}: no run reports it; did you mean --metric {METRIC}?\n"
    )
    far = _xdrl_report(root, "--metric", "loss")
    assert far.returncode == 2 and far.stderr == (
        f"xdrl-report: --metric loss: no run reports it; the runs report {LEN_METRIC}, {METRIC}\n"
    )
    assert _snapshot(root / "report") == before  # the good report is untouched
    assert sorted(p.name for p in root.iterdir()) == ["a2c_0", "a2c_1", "ppo_0", "ppo_1", "report"]
    # Runs evaluated with sampled actions only: the default metric is refused the same way.
    stochastic = METRIC.replace("deterministic", "stochastic")
    run = fake_run(tmp_path / "other", "r", seed=0, overrides=[], history=[(0, 1.0)], status=None)
    (run / EVALUATIONS_FILE).write_text(json.dumps({"frames": 0, stochastic: 1.0}) + "\n")
    default = _xdrl_report(tmp_path / "other")
    assert default.returncode == 2 and default.stderr == (
        f"xdrl-report: the default metric {METRIC}: no run reports it; "
        f"did you mean --metric {stochastic}?\n"
    )
    assert not (tmp_path / "other" / "report").exists()


def test_a_new_report_replaces_the_old_one_as_a_set(tmp_path: Path) -> None:
    root = _two_metric_sweep(tmp_path / "sweep")
    assert report_main([str(root)]) == 0
    out = root / "report"
    (out / "pareto.png").write_bytes(b"from an earlier weight sweep")  # a report file: replaced
    (out / "wandb").mkdir()  # not a report file (a W&B run logged from it): carried over
    (out / "wandb" / "run.wandb").write_text("offline run")
    assert report_main([str(root), "--metric", LEN_METRIC]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([*REPORT_FILES, "wandb"])
    assert (out / "wandb" / "run.wandb").read_text() == "offline run"
    assert json.loads((out / "report.json").read_text())["metric"] == LEN_METRIC
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_a_full_disk_leaves_the_previous_report_whole(tmp_path: Path) -> None:
    root = _two_metric_sweep(tmp_path / "sweep")
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        out = disk / "report"
        assert report_main([str(root), "--out", str(out)]) == 0
        before = _snapshot(out)
        # Fill the disk but for half the report's size: the next report cannot be written whole.
        room = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        with (disk / "filler").open("wb") as fh:
            fh.write(b"\0" * (room - sum(map(len, before.values())) // 2))
        result = _xdrl_report(root, "--out", out, "--metric", LEN_METRIC)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr == (
            f"xdrl-report: error: No space left on device: {out} (nothing written; an earlier "
            "report there is unchanged)\n"
        )
        assert _snapshot(out) == before
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "report"]  # no temp files
        (disk / "filler").unlink()
        assert report_main([str(root), "--out", str(out), "--metric", LEN_METRIC]) == 0
        assert json.loads((out / "report.json").read_text())["metric"] == LEN_METRIC
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_corrupt_evaluation_lines_are_skipped_with_a_warning_and_named(tmp_path: Path) -> None:
    history = [(0, 1.0), (500, 20.0), (1000, 40.0)]
    runs = {f"r{s}": fake_run(tmp_path, f"r{s}", seed=s, overrides=[], history=history)
            for s in range(4)}  # fmt: skip
    noise = bytes(b for b in random.Random(0).randbytes(64) if b != ord("\n"))
    lines = {name: (run / EVALUATIONS_FILE).read_bytes().splitlines() for name, run in runs.items()}
    lines["r1"][1] = noise  # random bytes in the middle
    lines["r2"][1] = json.dumps({"frames": 500, METRIC: "n/a"}).encode()  # a non-numeric value
    lines["r3"][2] = lines["r3"][2][:20]  # a torn last line
    for name in ("r1", "r2", "r3"):
        (runs[name] / EVALUATIONS_FILE).write_bytes(b"\n".join(lines[name]) + b"\n")
    result = _xdrl_report(tmp_path)
    assert result.returncode == 0, result.stderr
    files = {name: run.resolve() / EVALUATIONS_FILE for name, run in runs.items()}
    assert result.stderr.splitlines() == [
        f"xdrl-report: warning: {files['r1']}: skipped line 2 (not JSON)",
        f"xdrl-report: warning: {files['r2']}: skipped line 2 ({METRIC} is 'n/a', not a number)",
        f"xdrl-report: warning: {files['r3']}: skipped line 3 (not JSON)",
    ]
    short = [str(runs[n].resolve()) for n in ("r1", "r2", "r3")]
    assert (
        f"Short runs (unreadable evaluation records skipped): {', '.join(short)}" in result.stdout
    )
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    named = [(s["run"], [x["line"] for x in s["skipped"]], s["last_frames"])
             for s in report["short_runs"]]  # fmt: skip
    assert named == [(short[0], [2], 1000), (short[1], [2], 1000), (short[2], [3], 500)]
    (group,) = report["groups"]
    assert group["runs"] == 4 and group["final"]["mean"] == 40.0  # the finals are in summary.json
    # The curve ends where the torn run's readable history ends (and the report says so).
    assert [p["frames"] for p in group["curve"]] == [0, 500]
    at_500 = [20.0, (1.0 + 40.0) / 2, (1.0 + 40.0) / 2, 20.0]  # r1, r2 lost 500: interpolated
    assert group["curve"][1]["iqm"] == pytest.approx(stats.trim_mean(at_500, 0.25))
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"- `{short[2]}`: line 3 (not JSON); last readable evaluation at 500 frames" in md
    assert "| completed, short |" in next(x for x in md.splitlines() if x.startswith("| `r3`"))


def test_runs_of_different_envs_are_never_ranked_together(tmp_path: Path, capsys) -> None:
    key = "eval/deterministic/reward/objective_{}/episode_reward_mean"
    finals = {("dst", 0): 5.0, ("dst", 1): 7.0, ("rg", 0): 50.0, ("rg", 1): 1.0}
    envs = {"dst": ("deep-sea-treasure-v0", 2), "rg": ("resource-gathering-v0", 3)}
    for (env, w), value in finals.items():
        env_id, objectives = envs[env]
        weights = [0.0] * objectives
        weights[w] = 1.0
        for seed in range(2):
            fake_run(tmp_path, f"{env}_{w}_{seed}", seed=seed, overrides=[f"env={env}", f"w={w}"],
                     history=[(0, 0.0), (100, value + seed)], env=env_id,
                     extra={key.format(i): value + seed + i for i in range(objectives)},
                     config={"env": {"id": env_id, "reward_weights": weights}})  # fmt: skip
    assert report_main([str(tmp_path)]) == 0
    stdout = capsys.readouterr().out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    order = [(g["env"], g["name"]) for g in report["groups"]]
    assert order == [  # by env, best first within it: rg's 1.0 is not ranked below dst's 5.0
        ("deep-sea-treasure-v0", "env=dst w=1"), ("deep-sea-treasure-v0", "env=dst w=0"),
        ("resource-gathering-v0", "env=rg w=0"), ("resource-gathering-v0", "env=rg w=1"),
    ]  # fmt: skip
    pairs = [(p["env"], p["x"], p["y"], p["p"]) for p in report["probability_of_improvement"]]
    assert pairs == [
        ("deep-sea-treasure-v0", "env=dst w=1", "env=dst w=0", 1.0),
        ("resource-gathering-v0", "env=rg w=0", "env=rg w=1", 1.0),
    ]
    for text in (stdout, (tmp_path / "report" / "report.md").read_text()):
        tables = text.split("Environment `")[1:]
        assert [t.split("`", 1)[0] for t in tables] == [envs["dst"][0], envs["rg"][0]]
        assert "objective_2" not in tables[0].split("\n\n")[1] and "objective_2" in tables[1]
    for env_id, objectives in envs.values():  # a front per env, its own objective count
        front = json.loads((tmp_path / "report" / f"pareto-{env_id}" / "pareto.json").read_text())
        assert front["env"] == env_id and front["objectives"] == objectives
        assert len(front["points"]) == 2
        assert f"](pareto-{env_id}/pareto.png)" in (tmp_path / "report" / "report.md").read_text()
    _assert_pngs(tmp_path / "report")


def test_out_a_file_and_folders_without_runs_are_one_line(tmp_path: Path) -> None:
    root = _two_metric_sweep(tmp_path / "sweep")
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    result = _xdrl_report(root, "--out", target)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"xdrl-report: --out {target} is a file; give a folder (it is created or replaced)\n"
    )
    assert target.read_text() == "mine" and not (root / "report").exists()
    result = _xdrl_report(root, "--out", root)  # would swap the runs away
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"xdrl-report: --out {root} holds runs; give a folder of its own (default: {root}/report)\n"
    )
    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    (other / "logs").mkdir(parents=True)
    (other / "logs" / "x.csv").write_text("1,2\n")
    for folder in (empty, other):
        result = _xdrl_report(folder)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (
            f"xdrl-report: no run folders (.hydra/config.yaml) under {folder}; "
            "give run or sweep folders\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "notes.txt", "other", "sweep"]
    assert [p.name for p in empty.iterdir()] == [] and [p.name for p in other.iterdir()] == ["logs"]
