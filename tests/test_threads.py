"""num_threads: auto picks by network width and cores; ints pass through; bad values fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xdrl.run.threads import (
    available_cores,
    busy_cpus,
    cgroup_cpu_quota,
    resolve_num_threads,
    thread_cap,
    wants_cores,
)


@pytest.fixture(autouse=True)
def _no_thread_cap(monkeypatch) -> None:
    """The suite caps its processes at one thread (conftest); the rule is tested without it."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


@pytest.mark.parametrize(
    ("widths", "cores", "expected"),
    [
        ([64, 64], 2, 1),  # small nets: per-op overhead dominates
        ([256, 256], 1, 1),  # one core
        ([256, 256], 2, 2),  # wide nets on 2 cores
        ([256, 256], 16, 2),  # capped at the largest count measured to help
        ([64, 256], 8, 2),  # the widest layer decides
        ([], 4, 1),  # no hidden layers known
    ],
)
def test_auto_follows_the_rule(widths: list[int], cores: int, expected: int) -> None:
    assert resolve_num_threads("auto", widths, cores) == expected


def test_an_integer_passes_through() -> None:
    assert resolve_num_threads(3, [256], cores=2) == 3


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["algorithm=sac", "algorithm.build.critic_cells=[128]"], [256, 256, 128]),  # every key
        (["algorithm=dqn"], [64, 64]),  # q_cells
        (["experiment=atari_ppo"], [64, 64, 64, 64, 512]),  # + the Nature CNN's feature layer
    ],
)
def test_the_spec_gives_every_hidden_width_the_thread_rule_reads(
    overrides: list[str], expected: list[int], tmp_path: Path
) -> None:
    from tests.conftest import compose_config
    from xdrl.config.spec import RunSpec

    assert RunSpec.of(compose_config(overrides, tmp_path / "run")).hidden_sizes == expected


def test_cgroup_v2_quota_is_the_tightest_on_the_path_rounded_up(tmp_path: Path) -> None:
    root, proc = tmp_path / "cgroup", tmp_path / "proc_cgroup"
    (root / "job" / "step").mkdir(parents=True)
    (root / "job" / "cpu.max").write_text("150000 100000\n")  # 1.5 cores -> 2
    (root / "job" / "step" / "cpu.max").write_text("max 100000\n")  # no quota of its own
    (root / "cpu.max").write_text("400000 100000\n")
    proc.write_text("0::/job/step\n")
    assert cgroup_cpu_quota(root, proc) == 2
    (root / "job" / "step" / "cpu.max").write_text("50000 100000\n")  # half a core -> 1
    assert cgroup_cpu_quota(root, proc) == 1
    assert available_cores(root, proc, load=0.0) == 1


def test_cgroup_v1_quota_and_no_quota(tmp_path: Path) -> None:
    root, proc = tmp_path / "cgroup", tmp_path / "proc_cgroup"
    folder = root / "cpu,cpuacct" / "docker" / "abc"
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text("250000\n")
    (folder / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_quota(root, proc) == 3
    (folder / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(root, proc) is None
    cores = len(os.sched_getaffinity(0))
    assert available_cores(root, proc, load=0.0) == cores  # affinity alone
    assert cgroup_cpu_quota(root, tmp_path / "missing") is None


def test_busy_cpus_are_not_counted_on_an_unpinned_process(tmp_path: Path, monkeypatch) -> None:
    proc = tmp_path / "missing"  # no cgroup quota
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert available_cores(tmp_path, proc, load=0.3) == 2  # a quiet machine
    assert available_cores(tmp_path, proc, load=1.0) == 1  # one busy loop beside
    assert available_cores(tmp_path, proc, load=7.5) == 1  # never below one
    assert resolve_num_threads("auto", [400, 300], available_cores(tmp_path, proc, load=1.2)) == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # pinned to 2 of 64 CPUs (a SLURM job):
    assert available_cores(tmp_path, proc, load=40.0) == 2  # its cpuset is its own


def test_busy_cpus_reads_the_non_idle_share_of_proc_stat(tmp_path: Path, monkeypatch) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal: 1,000 jiffies pass, 300 of them idle
    # or waiting on I/O, so 0.7 of the CPU time was busy: 1.4 of 2 CPUs
    snapshots = iter(["cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n",
                      "cpu  500 0 400 900 200 0 0 0 0 0\ncpu0 1 2 3\n"])  # fmt: skip
    stat.write_text(next(snapshots))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    slept = []

    def sleep(seconds: float) -> None:  # the second snapshot appears while "sleeping"
        slept.append(seconds)
        stat.write_text(next(snapshots))

    assert busy_cpus(stat, interval=0.25, sleep=sleep) == pytest.approx(1.4)
    assert slept == [0.25]
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.0, 0.0))
    assert busy_cpus(tmp_path / "missing", sleep=sleep) == 0.5  # no /proc: the load average


def test_busy_cpus_sees_a_busy_loop() -> None:
    """A real busy loop is counted (at least most of a core, however busy the machine is)."""
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert busy_cpus(interval=0.5) >= 0.7
    finally:
        loop.kill()
        loop.wait()


def test_the_load_is_measured_only_where_it_decides() -> None:
    assert wants_cores("auto", [256, 256])
    assert not wants_cores("auto", [64, 64])  # 1 thread whatever the cores
    assert not wants_cores(2, [256, 256])  # an explicit count


@pytest.mark.parametrize(
    ("value", "cap"), [("1", 1), ("4", 4), (" 2 ", 2), ("", None), ("0", None), ("two", None)]
)
def test_omp_num_threads_caps_auto(
    value: str, cap: int | None, tmp_path: Path, monkeypatch
) -> None:
    """A scheduler's or user's OMP_NUM_THREADS caps what auto picks; at 1 the load is not even
    sampled; a value that is not a positive integer is no cap."""
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert thread_cap() == cap
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))  # pinned to 8 CPUs
    cores = available_cores(tmp_path, tmp_path / "missing")
    assert cores == (8 if cap is None else min(8, cap))
    assert wants_cores("auto", [256, 256]) == (cap != 1)
    assert wants_cores(3, [256, 256]) is False  # an explicit count is the config's, not the cap's
