"""A run's record describes what was trained (issue 18, A1-A4): a refused resume leaves the run
dir as it was, ``resume=never`` moves the whole earlier run aside, summary.json keeps whole-run
timing over every segment, and a complete run re-run with other eval settings evaluates
nothing and changes nothing. Each test runs ``xdrl-train`` as a user would and reads the disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import SMALL, read_summary, run_cli
from xdrl.report.runs import find_runs

BASE = [*SMALL, "num_threads=1"]


def _files(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run dir by relative path, but the log (each command appends to it) and
    the lock's holder record."""
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.suffix != ".log" and p.name != ".xdrl-run.lock"
    }


def _train(tmp_path: Path, run_dir: Path, *extra: str) -> None:
    out = run_cli([f"hydra.run.dir={run_dir}", *BASE, *extra], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]


def _cells(job_dir: Path) -> list[int]:
    config = yaml.safe_load((job_dir / ".hydra" / "config.yaml").read_text())
    return config["algorithm"]["build"]["actor_cells"]


def test_a_refused_resume_leaves_the_run_dir_as_it_was(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "a"
    _train(tmp_path, run_dir, "algorithm.build.actor_cells=[64,64]")
    before = _files(run_dir)
    log = next(run_dir.glob("*.log"))
    log_before = log.read_bytes()
    out = run_cli(
        [f"hydra.run.dir={run_dir}", *BASE, "algorithm.build.actor_cells=[32,32]"], tmp_path
    )
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("xdrl-train: config error: resume: ") and "actor_cells" in line
    assert _files(run_dir) == before  # .hydra/, hparams, summary, evaluations: all untouched
    assert log.read_bytes() == log_before  # refused before Hydra started: not even a log line
    assert _cells(run_dir) == [64, 64]
    assert "algorithm.build.actor_cells=[64,64]" in (run_dir / ".hydra/overrides.yaml").read_text()

    # An accepted resume (a non-shaping change) does rewrite .hydra/, keeping the earlier one.
    _train(tmp_path, run_dir, "algorithm.build.actor_cells=[64,64]", "total_frames=768")
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    assert config["total_frames"] == 768
    assert (run_dir / ".hydra/history/1-config.yaml").read_bytes() == before[".hydra/config.yaml"]


def test_a_refused_sweep_job_leaves_its_job_dir_as_it_was(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    args = ["-m", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=job", *BASE, "seed=0"]
    first = run_cli(args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    job = sweep / "job"
    before = _files(job)
    second = run_cli([*args, "algorithm.build.actor_cells=[32,32]"], cwd=tmp_path)
    assert "config error: resume: " in second.stderr
    assert _files(job) == before
    assert _cells(job) == [64, 64]


def test_resume_never_moves_the_whole_earlier_run_aside(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "a"
    _train(tmp_path, run_dir)
    earlier = _files(run_dir)
    earlier_log = next(run_dir.glob("*.log")).read_text()
    _train(tmp_path, run_dir, "seed=1", "resume=never")

    aside = run_dir / "superseded" / "1"
    assert _files(aside) == earlier  # checkpoints, logs, summary, evaluations.jsonl, .hydra/
    assert next(aside.glob("*.log")).read_text().startswith(earlier_log)
    new_log = next(run_dir.glob("*.log")).read_text()
    assert "Wrote" in new_log and new_log.count("Final evaluation") == 1  # the new run's own

    (new,) = find_runs([run_dir])  # the superseded run is not mixed into the new one
    assert new.seed == 1 and new.status == "completed" and new.evaluations
    (old,) = find_runs([run_dir / "superseded"])  # and xdrl-report finds it there
    assert old.seed == 0 and old.status == "completed"
    assert [r["frames"] for r in old.evaluations] == [0, 256, 512]

    _train(tmp_path, run_dir, "seed=2", "resume=never")
    assert sorted(p.name for p in (run_dir / "superseded").iterdir()) == ["1", "2"]
    assert find_runs([run_dir / "superseded" / "2"])[0].seed == 1


def _csv_rows(run_dir: Path) -> dict[str, list[str]]:
    scalars = next((run_dir / "logs").glob("*/scalars"))
    return {
        p.relative_to(scalars).as_posix(): p.read_text().splitlines()
        for p in sorted(scalars.rglob("*.csv"))
    }


def test_a_run_without_checkpoints_rerun_in_its_dir_logs_only_itself(tmp_path: Path) -> None:
    # The earlier run has nothing to resume from (checkpoint=none): the new one starts afresh.
    # Its CSV files must hold its own rows only; the CSV logger skips steps a file already holds
    # (what a resumed run needs), so the earlier files left in place kept the earlier rows.
    run_dir = tmp_path / "runs" / "a"
    _train(tmp_path, run_dir, "checkpoint=none", "total_frames=768")
    earlier = _files(run_dir)
    _train(tmp_path, run_dir, "checkpoint=none", "seed=1")
    alone = tmp_path / "runs" / "alone"
    _train(tmp_path, alone, "checkpoint=none", "seed=1")

    train_rows = {k: v for k, v in _csv_rows(run_dir).items() if k.startswith("train/")}
    assert train_rows and train_rows == {
        k: v for k, v in _csv_rows(alone).items() if k.startswith("train/")
    }
    assert read_summary(run_dir)["segments"][0]["frames"] == [0, 512]
    assert _files(run_dir / "superseded" / "1") == earlier  # kept whole, as resume=never does
    (new,) = find_runs([run_dir])
    assert new.seed == 1


def test_summary_keeps_whole_run_timing_across_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "a"
    _train(tmp_path, run_dir, "total_frames=512")
    first = read_summary(run_dir)
    _train(tmp_path, run_dir, "total_frames=1024")
    summary = read_summary(run_dir)

    one, two = summary["segments"]
    assert one == first["segments"][0]
    assert (one["frames"], two["frames"]) == ([0, 512], [512, 1024])
    assert Path(two["resumed_from"]).name.endswith("512") and two["status"] == "completed"
    assert two["frames_per_second"] == round(512 / two["train_time_s"], 1)
    assert summary["wall_time_s"] == round(first["wall_time_s"] + two["wall_time_s"], 3)
    train = first["train_time_s"] + two["train_time_s"]
    assert summary["train_time_s"] == pytest.approx(train, abs=1e-3)
    assert summary["frames_per_second"] == round(1024 / summary["train_time_s"], 1)

    # Re-running the finished run keeps all of it.
    before = (run_dir / "summary.json").read_bytes()
    _train(tmp_path, run_dir, "total_frames=1024")
    assert (run_dir / "summary.json").read_bytes() == before


@pytest.mark.parametrize(
    "settings",
    [["eval.episodes=3", "eval.stochastic=true"], ["eval=video"]],
    ids=["stochastic", "video"],
)
def test_a_complete_run_rerun_with_other_eval_settings_evaluates_nothing(
    tmp_path: Path, settings: list[str]
) -> None:
    run_dir = tmp_path / "runs" / "a"
    _train(tmp_path, run_dir)
    before = _files(run_dir)
    out = run_cli([f"hydra.run.dir={run_dir}", *BASE, *settings], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert "already complete" in line and "nothing was trained or evaluated" in line
    assert f"xdrl-eval {run_dir}" in line
    assert "Final evaluation" not in out.stdout + out.stderr
    assert _files(run_dir) == before
    summary = json.loads(before["summary.json"])
    config = yaml.safe_load(before[".hydra/config.yaml"])
    assert config["eval"]["stochastic"] is False  # the recorded eval ran under these settings
    assert summary["eval"] and all(k.startswith("eval/deterministic/") for k in summary["eval"])


def _fake_run(resumed_from: str | None, frames: int, evaluations: int, metrics: dict):
    """The parts of a built run that ``xdrl.run.lifecycle._Segment`` reads."""
    from types import SimpleNamespace

    hook = SimpleNamespace(num_evaluations=evaluations, last_metrics=dict(metrics))
    eval_set = SimpleNamespace(hooks=[hook], last_metrics=hook.last_metrics)
    return SimpleNamespace(
        trainer=SimpleNamespace(collected_frames=frames),
        hook_set=SimpleNamespace(eval_hook_set=eval_set),
        resumed_from=resumed_from,
        resume_approximate=None,
        logger=None,
    )


def test_a_resume_under_other_eval_settings_reports_no_evaluation_until_it_evaluates(
    tmp_path: Path, make_cfg
) -> None:
    from xdrl.config.check import check_config
    from xdrl.run.lifecycle import _Segment

    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-000000000512"
    checkpoint.mkdir(parents=True)
    old = {"eval/deterministic/reward/episode_reward_mean": 9.0}
    for settings, stale in ((["eval.episodes=2"], False), (["eval.episodes=7"], True)):
        cfg = make_cfg(*SMALL, *settings)
        saved = {"eval": OmegaConf.to_container(make_cfg(*SMALL).eval, resolve=True)}
        (checkpoint / "config.yaml").write_text(yaml.safe_dump(saved))
        run_ = _fake_run(str(checkpoint), 512, evaluations=3, metrics=old)
        segment = _Segment(check_config(cfg), run_, start=0.0, started="t")  # type: ignore[arg-type]
        assert segment.eval_metrics() == ({} if stale else old)
        run_.hook_set.eval_hook_set.hooks[0].num_evaluations = 4  # it evaluated: new settings
        assert segment.eval_metrics() == old


def test_segments_of_a_summary_without_them_and_of_a_killed_segment(tmp_path: Path) -> None:
    from xdrl.run.segments import earlier_segments, whole_run_timing

    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    old = {  # written before segments existed: the last segment's timing only
        "status": "stopped",
        "total_frames": 1024,
        "wall_time_s": 2.0,
        "train_time_s": 1.5,
        "frames_per_second": 341.3,
        "resumed_from": str(run_dir / "checkpoints" / "checkpoint-000000000512"),
    }
    (run_dir / "summary.json").write_text(json.dumps(old))
    segments = earlier_segments(run_dir / "summary.json", 1536)  # then killed at 1536
    assert [s["frames"] for s in segments] == [[512, 1024], [1024, 1536]]
    assert segments[0]["wall_time_s"] == 2.0 and segments[0]["status"] == "stopped"
    assert segments[1] == {"frames": [1024, 1536], "status": "unrecorded"}
    last = {"frames": [1536, 2048], "wall_time_s": 1.0, "train_time_s": 0.5}
    assert whole_run_timing([*segments, last]) == {
        "wall_time_s": 3.0,
        "train_time_s": 2.0,
        "frames_per_second": round(1024 / 2.0, 1),  # frames of the timed segments / their time
    }


def test_run_dir_holds_the_whole_run_record(tmp_path: Path) -> None:
    """``run_dir=X`` puts the config record, the log, the summary and the checkpoints in X (no
    time-stamped ``outputs/`` folder beside it, where two runs started in the same second used
    to share one ``.hydra/``); ``run_dir`` and ``hydra.run.dir`` naming two folders is refused."""
    run_dir = tmp_path / "runs" / "r"
    out = run_cli([f"run_dir={run_dir}", *BASE, "algorithm.build.actor_cells=[32,32]"], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert _cells(run_dir) == [32, 32]
    assert read_summary(run_dir)["status"] == "completed"
    assert list(run_dir.glob("*.log")) and (run_dir / "checkpoints").is_dir()
    assert not (tmp_path / "outputs").exists()
    out = run_cli([f"run_dir={run_dir}", f"hydra.run.dir={tmp_path / 'other'}", *BASE], tmp_path)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("xdrl-train: config error: run_dir: ")
    assert not (tmp_path / "other").exists()
