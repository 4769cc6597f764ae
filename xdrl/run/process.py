"""Process-wide set-up for one ``xdrl-train`` process, done once by the entry point.

Builders stay free of side effects on the process (tests call them directly); everything that
changes the interpreter, torch or logging for the whole process is here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Library warnings xdrl knows to be harmless where it meets them: (message prefix, category, why).
KNOWN_HARMLESS_WARNINGS: tuple[tuple[str, type[Warning], str], ...] = (
    (
        "Support of VecNormV2 for containers with non-empty batch-size",
        UserWarning,
        "xdrl keeps one set of statistics over the batch, shared frozen with the evaluation env "
        "and saved with exported policies: tests/test_observation_norm.py",
    ),
)


@dataclass(frozen=True)
class ProcessSettings:
    """What :func:`setup_process` decided, for the builders to read."""

    num_threads: int
    interactive: bool  # stdout is a terminal: a progress bar instead of plain progress lines


def setup_process(
    num_threads: int | str, hidden_sizes: Sequence[int], workers: int = 0
) -> ProcessSettings:
    """Set the torch thread count, tensordict's pandas lookup, TorchRL's log routing and the
    logging error policy, and read whether stdout is a terminal.

    ``num_threads``: the config's (an int, or ``"auto"``: :mod:`xdrl.run.threads` picks from
    ``hidden_sizes``, the networks' widths, and the cores free for this job). Both come from the
    run's spec (``RunSpec.num_threads``, ``RunSpec.hidden_sizes``). ``workers``: collector
    worker processes (``collector=multiprocess``), each stepping envs on a core of its own.

    Example:
        >>> setup_process(spec.num_threads, spec.hidden_sizes).num_threads
        1
    """
    import torch

    from xdrl.run.threads import pick_threads
    from xdrl.training.speedups import cache_missing_pandas

    logging.raiseExceptions = False  # a log write to a full disk must not print a traceback
    quiet_known_warnings()
    cache_missing_pandas()  # tensordict looks pandas up on every module call (~10% of PPO time)
    jobs = concurrent_jobs(_hydra_launcher())
    threads, cores = pick_threads(num_threads, hidden_sizes, jobs=jobs, workers=workers)
    if cores is not None and (jobs > 1 or workers):
        log.info("num_threads auto: %d (%d cores shared by up to %d parallel jobs, %d collector "
                 "workers each)", threads, cores, jobs, workers)  # fmt: skip
    torch.set_num_threads(threads)
    plain_torchrl_logging()
    return ProcessSettings(num_threads=threads, interactive=sys.stdout.isatty())


def quiet_known_warnings() -> None:
    """Ignore the library warnings of :data:`KNOWN_HARMLESS_WARNINGS`, each by its message and
    category, in this process (``xdrl-train``, ``xdrl-eval``, ``xdrl-export``); every other
    warning still shows. TorchRL's VecNormV2 note was printed twice per
    ``experiment=cartpole_novel_lstm`` run and again by ``xdrl-eval`` and ``xdrl-export``."""
    for message, category, _why in KNOWN_HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category)


@contextlib.contextmanager
def warning_lines(prog: str) -> Iterator[None]:
    """xdrl's warnings while nothing has set up logging yet (the config check before Hydra
    starts) as one stderr line each, ``<prog>: warning: <message>``, as its errors are
    ``<prog>: config error: ...`` (Python's last-resort handler printed them bare). Where
    logging is set up already its handlers keep them."""
    logger = logging.getLogger("xdrl")
    if logger.handlers or logging.getLogger().handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(f"{prog}: warning: %(message)s"))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def concurrent_jobs(launcher: Mapping[str, Any] | None) -> int:
    """Sweep jobs that may run beside this one on this machine and share its cores: a joblib
    launcher's ``n_jobs`` as joblib counts it (``-1``: the CPUs joblib may use, affinity and cgroup
    quota included; ``-2``: one fewer); 1 for a single
    run, the basic launcher (one job at a time) and SLURM (each job gets its own CPUs)."""
    if not launcher or "joblib" not in str(launcher.get("_target_", "")).lower():
        return 1
    n_jobs = launcher.get("n_jobs")
    if n_jobs is None:
        return 1
    from joblib import effective_n_jobs  # installed with the joblib launcher

    return max(1, int(effective_n_jobs(int(n_jobs))))


def _hydra_launcher() -> Mapping[str, Any] | None:
    """The launcher node of the Hydra job this process runs (None outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    launcher = HydraConfig.get().launcher
    return dict(launcher) if launcher is not None else None


def plain_torchrl_logging() -> None:
    """TorchRL's logger prints its own green ANSI lines to stdout, even into files, and skips
    the run's log; send its warnings through the run's handlers instead (its INFO lines, such as
    "Initialized LazyTensorStorage", say nothing to a user). ``RL_LOGGING_LEVEL`` still rules."""
    import torchrl  # noqa: F401 - its logger is set up on import; reroute it after

    torchrl_log = logging.getLogger("torchrl")
    for handler in list(torchrl_log.handlers):
        torchrl_log.removeHandler(handler)
    torchrl_log.propagate = True
    torchrl_log.setLevel(os.environ.get("RL_LOGGING_LEVEL", "WARNING"))
