"""Multirun sweeps: the sweep table; the basic, joblib and submitit-local launchers; Optuna."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import CONF, SMALL, read_summary, run_cli
from xdrl.sweep.summary import SweepSummary, format_table, summarize_sweep

# One 256-frame iteration per job: the cost of a job is mostly its start-up.
TINY = [o for o in SMALL if not o.startswith("total_frames=")] + [
    "total_frames=256",
    "logging=none",
    "checkpoint=none",
    "eval.before_training=false",
]


def _job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p.parent for p in sweep_dir.glob("*/.hydra"))


def _sweep_table(sweep_dir: Path) -> dict:
    assert (sweep_dir / "sweep_summary.md").is_file()
    return json.loads((sweep_dir / "sweep_summary.json").read_text())


def _hparams_search(name: str) -> str:
    """``hparams_search=<name>`` once conf/config.yaml's defaults list the group, else ``+``."""
    listed = any("hparams_search" in str(d) for d in OmegaConf.load(CONF / "config.yaml").defaults)
    return f"{'' if listed else '+'}hparams_search={name}"


def _assert_completed_sweep(result, sweep_dir: Path, seeds: list[int]) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = _job_dirs(sweep_dir)
    assert [d.name.split("_", 1)[0] for d in jobs] == [str(i) for i in range(len(seeds))]
    for job_dir, seed in zip(jobs, seeds, strict=True):
        summary = read_summary(job_dir)
        assert summary["status"] == "completed" and summary["total_frames"] == 256
        assert summary["seed"] == seed
        assert (job_dir / ".hydra" / "config.yaml").is_file()
        assert list(job_dir.glob("*.log")), "no per-job log file"
    table = _sweep_table(sweep_dir)
    assert [(j["num"], j["overrides"], j["status"]) for j in table["jobs"]] == [
        (i, [f"seed={s}"], "completed") for i, s in enumerate(seeds)
    ]
    objective = "eval/deterministic/reward/episode_reward_mean"
    assert table["metric_keys"][0] == objective
    assert all(objective in j["metrics"] for j in table["jobs"])
    assert "Sweep summary" in result.stdout and f"{len(seeds)}/{len(seeds)} jobs completed" in (
        result.stdout
    )


# ---------------------------------------------------------------------------------------------
# The table itself, in process
# ---------------------------------------------------------------------------------------------


def _fake_job(sweep_dir: Path, num: int, summary: str | None, overrides: list[str]) -> None:
    job_dir = sweep_dir / f"{num}_{','.join(overrides)}"
    (job_dir / ".hydra").mkdir(parents=True)
    hydra = {"hydra": {"job": {"num": num}, "overrides": {"task": overrides}}}
    (job_dir / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra))
    if summary is not None:
        (job_dir / "summary.json").write_text(summary)


def test_table_marks_failed_missing_and_corrupt_jobs(tmp_path: Path) -> None:
    ok = {
        "status": "completed",
        "total_frames": 512,
        "wall_time_s": 3.0,
        "eval": {"eval/a": 1.5, "eval/objective": 10.0},
    }
    _fake_job(tmp_path, 0, json.dumps(ok), ["seed=0", "+total_frames=512"])
    failed = {**ok, "status": "failed", "eval": {}, "error": "ValueError: nan in the loss"}
    _fake_job(tmp_path, 1, json.dumps(failed), ["seed=1"])
    _fake_job(tmp_path, 2, None, ["seed=2"])
    (tmp_path / "2_seed=2" / "xdrl_train.log").write_text(
        "[2026-11-23 08:00:00,000][xdrl][ERROR] - config error: seed: too small; set seed>=0\n"
        "Traceback (most recent call last):\n"
    )
    _fake_job(tmp_path, 10, "{not json", ["seed=10"])
    (tmp_path / ".submitit" / "7_3").mkdir(parents=True)
    (tmp_path / ".submitit" / "7_3" / "7_3_submitted.pkl").write_bytes(b"")

    data = summarize_sweep(tmp_path, objective="eval/objective", hide_keys=["total_frames"])
    assert [(j.num, j.status, j.overrides) for j in data.jobs] == [
        (0, "completed", ["seed=0"]),
        (1, "failed", ["seed=1"]),
        (2, "failed", ["seed=2"]),
        (10, "failed", ["seed=10"]),
    ]
    assert data.metric_keys() == ["eval/objective", "eval/a"]
    table = format_table(data)
    assert "(ValueError: nan in the loss)" in table  # each failed job's one-line reason
    assert "(config error: seed: too small; set seed>=0)" in table  # from its log: no summary
    assert "unreadable summary.json" in table
    assert "1/4 jobs completed" in table


def test_callback_writes_the_table_at_exit_when_the_sweep_fails(
    tmp_path: Path, monkeypatch
) -> None:
    registered = []
    monkeypatch.setattr("atexit.register", registered.append)
    _fake_job(tmp_path, 0, None, ["seed=0"])
    config = OmegaConf.create(
        {
            "objective": "eval/x",
            "hydra": {"sweep": {"dir": str(tmp_path)}, "overrides": {"task": ["seed=0,1"]}},
        }
    )
    callback = SweepSummary(print_table=False)
    callback.on_multirun_start(config)
    assert not (tmp_path / "sweep_summary.md").exists()
    registered[0]()  # the sweeper raised: Hydra skipped on_multirun_end, the process exits
    assert "stopped early" in (tmp_path / "sweep_summary.md").read_text()
    assert _sweep_table(tmp_path)["jobs"][0]["status"] == "failed"
    callback.on_multirun_end(config)  # nothing pending any more: no second write, no crash


def test_callback_never_crashes_on_a_missing_sweep_dir(tmp_path: Path) -> None:
    config = OmegaConf.create(
        {
            "objective": "x",
            "hydra": {"sweep": {"dir": str(tmp_path / "nowhere")}, "overrides": {"task": []}},
        }
    )
    callback = SweepSummary(print_table=False)
    callback.on_multirun_start(config)
    callback.on_multirun_end(config)
    assert "0/0 jobs completed" in (tmp_path / "nowhere" / "sweep_summary.md").read_text()


# ---------------------------------------------------------------------------------------------
# xdrl-train -m, end to end
# ---------------------------------------------------------------------------------------------


def test_basic_launcher_sweep(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(["-m", "seed=0,1", *TINY, f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path)
    _assert_completed_sweep(result, sweep_dir, seeds=[0, 1])


def test_joblib_launcher_sweep(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        [
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            "seed=0,1",
            *TINY,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=tmp_path,
    )
    _assert_completed_sweep(result, sweep_dir, seeds=[0, 1])


def test_submitit_local_launcher_sweep(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        ["-m", "hydra/launcher=local", "seed=3", *TINY, f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (job_dir,) = _job_dirs(sweep_dir)
    assert read_summary(job_dir)["status"] == "completed"
    assert list((sweep_dir / ".submitit").glob("*/*_result.pkl"))
    assert _sweep_table(sweep_dir)["jobs"][0]["status"] == "completed"


def test_optuna_search_reports_the_best_trial(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        [
            "-m",
            _hparams_search("ppo_cartpole"),
            "hydra.sweeper.n_trials=2",
            *TINY,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Best parameters" in result.stderr + result.stdout
    best = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert set(best["best_params"]) == {
        "algorithm.optimizer.lr",
        "algorithm.build.clip_epsilon",
        "algorithm.build.entropy_coef",
    }
    table = _sweep_table(sweep_dir)
    assert [j["status"] for j in table["jobs"]] == ["completed", "completed"]
    assert table["best"]["best_value"] == max(
        j["metrics"]["eval/deterministic/reward/episode_reward_mean"] for j in table["jobs"]
    )
    for job in table["jobs"]:  # each trial ran with the parameters Optuna suggested
        cfg = OmegaConf.load(sweep_dir / job["dir"] / ".hydra" / "config.yaml")
        assert f"algorithm.optimizer.lr={cfg.algorithm.optimizer.lr}" in job["overrides"]


@pytest.mark.parametrize("search", sorted(p.stem for p in (CONF / "hparams_search").glob("*.yaml")))
def test_hparams_search_composes(search: str, tmp_path: Path) -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module("xdrl.conf", version_base="1.3"):
        cfg = compose("config", overrides=[_hparams_search(search)], return_hydra_config=True)
    assert cfg.hydra.sweeper._target_.endswith("OptunaSweeper")
    assert cfg.hydra.sweeper.storage is None  # null: SQLite under the sweep dir
    assert cfg.hydra.sweeper.sampler.seed is not None
    assert cfg.hydra.sweeper.params
