"""``num_threads: auto``: pick torch's intra-op thread count from the network widths and cores.

Rule: 1 thread when the widest hidden layer is under 128 units or one core is available (the
Nature CNN of ``encoder: cnn`` counts as its 512-unit layer, ``RunSpec.hidden_sizes``: its
convolutions are wide work);
otherwise ``min(cores, 2)``, where ``cores`` is what :func:`available_cores` finds this process
may use: CPU affinity capped by a cgroup CPU quota and, on an unpinned process, by the cores
other processes leave idle (:func:`busy_cpus`: /proc/stat sampled over a quarter second; the
1-minute load average where there is no /proc) and by ``OMP_NUM_THREADS`` where it is set
(:func:`thread_cap`). Small MLPs spend their time in per-op
overhead that more threads only add to; 256-wide layers on batches of 256 have enough work per
matmul to split.

Measured on the 2-core machine (November 2026, quiet, A/B alternated):
- 256x256 SAC (Pendulum, SB3 defaults): SB3 and a plain PyTorch loop run 1.3x faster with 2
  threads than 1 (146-155 vs 196-198 frames/s); 1 thread wins when another process keeps the
  second core busy.
- With other work on the machine, 2 threads are far worse than 1, not slightly: a 2-thread run
  waits at every parallel region for a thread the scheduler gave away. TD3 ([400, 300]) fell from
  130 frames/s (quiet) to 29 beside one other job, below SB3's 101 at 1 thread; a SAC run beside
  two other helpers' jobs (load average 5-8) ran 7x slower at 2 threads than at 1. So ``auto``
  counts the cores others use.
- Counted now, not over the last minute: the 1-minute load average still read 1.05 half a minute
  after an SB3 run had ended on a quiet machine, so ``auto`` picked 1 thread and the SAC run above
  went at 121 frames/s instead of 175 (same command, ``num_threads=1`` vs ``2``, back to back).
- 64x64 PPO (CartPole, RL-Zoo settings): 1 thread is fastest.
- Atari PPO (Nature CNN; ``scripts/bench_threads.py``, 8,192 frames, medians of 3, November 26,
  the machine shared with other jobs throughout): beside one busy loop, 2 threads 105 frames/s
  against ``auto`` (1 thread) 612; with only other jobs (load average 4.5-6.9) 188 against 741.
  In a lighter moment (load ~2, one other test running) 2 threads ran 1,940 and ``auto``, whose
  start-up sample saw that test and picked 1, ran 1,120: a wrong 1 costs up to ~2x, a wrong 2
  beside work 4-6x. Atari DQN beside a busy loop (2 rounds): 2 threads 430, ``auto`` (1) 959.
- OpenMP's wait policy does not make a second thread safe beside other work (2 threads; Nature
  CNN forward, backward and Adam on 256 frames x 4 / a 256x256 MLP's forward and backward x 300;
  quiet, then beside one busy loop; November 27, AMD EPYC): spinning (the default) 0.30 / 0.27 s
  quiet, 1.00 / 1.01 s beside the loop, where 1 thread takes 0.56 / 0.37 s either way;
  ``OMP_WAIT_POLICY=PASSIVE`` 0.61 / 0.43 s beside the loop but 0.64 s for the MLP when quiet
  (slower than 1 thread); ``GOMP_SPINCOUNT`` 1,000 to 10,000 0.65-0.75 / 0.80-1.27 s beside the
  loop. So the thread count is the lever, and xdrl leaves the wait policy at its default.
Only two cores were available to measure, so the cap at 2 is what was seen, not a bound proven
for larger machines.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

WIDE = 128  # hidden width from which a second thread pays off (256 does, 64 does not)
MAX_AUTO_THREADS = 2  # the most threads `auto` picks: the largest count measured to help
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")  # this process's cgroup path per hierarchy
PROC_STAT = Path("/proc/stat")
BUSY_SAMPLE_S = 0.25  # long enough to see a busy loop, short beside a run's start-up


def thread_cap(environ: Mapping[str, str] = os.environ) -> int | None:
    """``OMP_NUM_THREADS`` as a positive integer (how schedulers, containers and users tell a
    process how many threads it may run; ``auto`` never picks more), None when unset or not a
    positive integer."""
    value = environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def wants_cores(value: int | str, hidden_sizes: Iterable[int]) -> bool:
    """Whether :func:`resolve_num_threads` looks at the core count for this value (``auto`` on a
    network wide enough for a second thread, not capped at 1 by ``OMP_NUM_THREADS``): only then
    is :func:`available_cores` measured."""
    return value == "auto" and max(hidden_sizes, default=0) >= WIDE and thread_cap() != 1


def resolve_num_threads(value: int | str, hidden_sizes: Iterable[int], cores: int) -> int:
    """The intra-op thread count for a config value (a positive int or ``"auto"``).

    Example:
        >>> resolve_num_threads("auto", [256, 256], cores=2)
        2
    """
    if value == "auto":
        widest = max(hidden_sizes, default=0)
        if widest < WIDE or cores <= 1:
            return 1
        return min(cores, MAX_AUTO_THREADS)
    return int(value)  # a positive int (xdrl.config.check checked it)


def pick_threads(
    value: int | str, hidden_sizes: Iterable[int], *, jobs: int = 1, workers: int = 0
) -> tuple[int, int | None]:
    """The intra-op thread count for ``value`` here and now, and the cores it found (None: not
    measured, the rule does not depend on them): the cores this process may use, shared by
    ``jobs`` sweep jobs running beside it, less one per collector worker (each steps envs on a
    core of its own)."""
    if not wants_cores(value, hidden_sizes):
        return resolve_num_threads(value, hidden_sizes, 1), None
    cores = available_cores()  # samples the load: only where it decides
    return resolve_num_threads(value, hidden_sizes, max(1, cores // jobs - workers)), cores


def available_cores(
    cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP, load: float | None = None
) -> int:
    """Cores this process may run on: its CPU affinity (a SLURM job's cpuset), capped by the
    cgroup v2 CPU quota of its cgroup and every parent (``cpu.max``: what ``docker --cpus``,
    Kubernetes limits and SLURM's CPU accounting set), rounded up to whole cores, and, when the
    process may run on every CPU of the machine (not pinned to a cpuset of its own), by the CPUs
    other processes leave idle: CPUs minus the CPUs busy now (``load``; :func:`busy_cpus` when
    None), rounded to whole cores. A pinned process's cpuset is its own, so the machine-wide load
    is not counted against it. ``OMP_NUM_THREADS`` (:func:`thread_cap`) caps the result."""
    total = os.cpu_count() or 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else total
    for cap in (cgroup_cpu_quota(cgroup_root, proc_cgroup), thread_cap()):
        if cap is not None:
            cores = min(cores, cap)
    if cores >= total:  # the whole machine: others' work shares it
        if load is None:
            load = busy_cpus()
        cores = min(cores, math.floor(total - load + 0.5))
    return max(1, cores)


def busy_cpus(
    stat: Path = PROC_STAT,
    interval: float = BUSY_SAMPLE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """CPUs other processes keep busy now: the non-idle share of all CPUs' time in /proc/stat
    over ``interval`` seconds (this process sleeps meanwhile), times the CPU count. Without
    /proc/stat, the 1-minute load average (which still counts work that ended up to a minute
    ago)."""
    try:
        before = _cpu_times(stat.read_text())
        sleep(interval)
        after = _cpu_times(stat.read_text())
    except (OSError, ValueError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    total, idle = after[0] - before[0], after[1] - before[1]
    if total <= 0:
        return 0.0
    return (os.cpu_count() or 1) * (total - idle) / total


def _cpu_times(text: str) -> tuple[int, int]:
    """``(all, idle)`` jiffies of the ``cpu`` line of /proc/stat (idle includes iowait)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
            return sum(values), values[3] + values[4]
    raise ValueError("no cpu line in /proc/stat")


def cgroup_cpu_quota(
    cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
) -> int | None:
    """The tightest CPU quota on this process's cgroup and its parents, in whole cores (rounded
    up): cgroup v2's ``cpu.max``, or v1's ``cpu.cfs_quota_us``/``cpu.cfs_period_us``; None
    without a quota."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified hierarchy
            files = [(cgroup_root, "cpu.max")]
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own hierarchy
            files = [(cgroup_root / controllers, "cpu.cfs_quota_us")]
        else:
            continue
        for root, name in files:
            folder = root / path.strip("/")
            for candidate in (folder, *folder.parents):
                if not candidate.is_relative_to(root):
                    break
                quota = _quota(candidate / name)
                if quota is not None:
                    quotas.append(quota)
    return min(quotas, default=None)


def _quota(file: Path) -> int | None:
    """Whole cores of one quota file: v2 ``cpu.max`` (``"<quota> <period>"``, ``"max ..."`` is
    none) or v1 ``cpu.cfs_quota_us`` (``-1`` is none) beside its ``cpu.cfs_period_us``."""
    try:
        fields = file.read_text().split()
        if file.name == "cpu.cfs_quota_us":
            fields += (file.parent / "cpu.cfs_period_us").read_text().split()
    except OSError:
        return None
    if len(fields) != 2 or fields[0] in ("max", "-1"):
        return None
    return max(1, math.ceil(int(fields[0]) / int(fields[1])))
