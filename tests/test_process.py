"""The entry point's process set-up (house note 1): threads, TorchRL's log routing, terminal."""

from __future__ import annotations

import logging

import joblib
import pytest
import torch

from xdrl.run.process import setup_process


def test_setup_process_sets_threads_and_routes_torchrl_logs(monkeypatch) -> None:
    monkeypatch.delenv("RL_LOGGING_LEVEL", raising=False)
    before = torch.get_num_threads()
    torchrl_log = logging.getLogger("torchrl")
    saved = (list(torchrl_log.handlers), torchrl_log.propagate, torchrl_log.level)
    try:
        settings = setup_process(1, [256, 256])  # an int is taken as given, however wide
        assert settings.num_threads == 1 and torch.get_num_threads() == 1
        assert settings.interactive is False  # pytest captures stdout: not a terminal
        assert torchrl_log.handlers == [] and torchrl_log.propagate
        assert torchrl_log.level == logging.WARNING  # TorchRL's INFO chatter stays out
    finally:
        torch.set_num_threads(before)
        torchrl_log.handlers[:], torchrl_log.propagate = saved[0], saved[1]
        torchrl_log.setLevel(saved[2])


@pytest.mark.parametrize(
    ("launcher", "jobs"),
    [
        (None, 1),  # a single run outside Hydra's multirun
        ({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}, 1),
        ({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
          "n_jobs": 2}, 2),
        ({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
          "n_jobs": -1}, joblib.cpu_count()),  # joblib's own count: affinity, cgroup quota
        ({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
          "cpus_per_task": 2}, 1),
    ],
)  # fmt: skip
def test_concurrent_jobs_counts_the_jobs_that_share_this_machine(launcher, jobs) -> None:
    from xdrl.run.process import concurrent_jobs

    assert concurrent_jobs(launcher) == jobs


def test_auto_threads_are_shared_by_sweep_jobs_and_collector_workers(monkeypatch) -> None:
    import torch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # the suite's cap (conftest)

    import xdrl.run.process as process

    joblib = {"_target_": "hydra_plugins.hydra_joblib_launcher.JoblibLauncher", "n_jobs": 2}
    monkeypatch.setattr(process, "_hydra_launcher", lambda: joblib)
    monkeypatch.setattr("xdrl.run.threads.available_cores", lambda: 2)
    before = torch.get_num_threads()
    try:
        wide = [256, 256]  # 2 threads alone on 2 cores
        assert process.setup_process("auto", wide).num_threads == 1  # two jobs share two cores
        monkeypatch.setattr(process, "_hydra_launcher", lambda: None)
        assert process.setup_process("auto", wide).num_threads == 2
        workers = process.setup_process("auto", wide, workers=1)
        assert workers.num_threads == 1  # the worker takes a core
    finally:
        torch.set_num_threads(before)
