"""num_threads: auto picks by network width and cores; ints pass through; bad values fail."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from xdrl.threads import available_cores, cgroup_cpu_quota, hidden_sizes, resolve_num_threads


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


def test_hidden_sizes_reads_every_cells_key() -> None:
    build = OmegaConf.create({"actor_cells": [64, 64], "critic_cells": [256, 256], "gamma": 0.99})
    assert hidden_sizes(build) == [64, 64, 256, 256]


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
