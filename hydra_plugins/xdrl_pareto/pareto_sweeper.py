"""The ``pareto`` sweeper: a weight sweep of a multi-objective env in one command, through any
Hydra launcher, ending with the sweep's Pareto front in ``<sweep dir>/report/``.

``pareto.method=grid`` crosses ``pareto.num_weights`` weight vectors spread evenly over the
simplex with the other sweep values (``seed=0,1,2``); a sweep over ``env.reward_weights`` given
on the command line is used as it is. ``pareto.method=ols`` (two objectives) runs rounds: the
extreme weights first, then the corner weights of the front found so far whose optimistic
improvement exceeds ``pareto.tolerance``, until none is left or ``pareto.max_jobs`` is spent.
Each job is an ordinary xdrl run with ``env.reward_weights=[...]``; the launching is left to
``hydra.launcher``. Loaded by Hydra at start-up, so nothing heavy is imported here.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from pydantic import Field

if TYPE_CHECKING:
    from .settings import ParetoSettings

log = logging.getLogger(__name__)

WEIGHTS_KEY = "env.reward_weights"


def weights_override(weights: Sequence[float]) -> str:
    """``env.reward_weights=[0.25,0.75]`` (6 decimals, as the report groups them)."""
    return f"{WEIGHTS_KEY}=[{','.join(repr(round(float(w), 6)) for w in weights)}]"


class ParetoSweeper(Sweeper):
    """Hydra sweeper over scalarization weights; settings come from the ``pareto`` config node.

    Args:
        max_batch_size: jobs handed to the launcher at once (None: a whole grid or OLS round).

    Example::

        xdrl-train -m hydra/sweeper=pareto experiment=dst_dqn pareto.num_weights=11 seed=0,1
    """

    def __init__(self, max_batch_size: Annotated[int, Field(ge=1)] | None = None) -> None:
        self.max_batch_size = max_batch_size
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self.hydra_context: HydraContext | None = None
        self.job_idx = 0
        self.failed: list[JobReturn] = []

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    # Launching ---------------------------------------------------------------------------------

    def _launch(self, jobs: list[list[str]]) -> list[JobReturn]:
        from xdrl.sweep.stop import sweep_interrupted

        assert self.config is not None
        size = self.max_batch_size or len(jobs)
        returns: list[JobReturn] = []
        for start in range(0, len(jobs), size):
            if sweep_interrupted(self.config.hydra.sweep.dir):  # Ctrl-C: no further job
                break
            batch = jobs[start : start + size]
            results = list(self.launcher.launch(batch, initial_job_idx=self.job_idx))
            self.job_idx += len(batch)
            self.failed += [r for r in results if r.status == JobStatus.FAILED]
            returns += results
        return returns

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.hydra_context is not None
        from xdrl.config.errors import ConfigError

        from .settings import check_sweep

        try:  # before any job or folder: one line, exit 2
            settings, dim = check_sweep(self.config)
        except ConfigError as err:
            print(f"xdrl-train: config error: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        parsed = parser.parse_overrides(arguments)
        given = [o for o in parsed if o.get_key_element().lstrip("+") == WEIGHTS_KEY]
        others = [o for o in parsed if o not in given]
        combos = BasicSweeper.split_arguments(others, None)[0] if others else [[]]

        if given:
            values = (
                list(given[0].sweep_iterator())
                if given[0].is_sweep_override()
                else [given[0].value()]
            )
            weights = [[float(w) for w in v] for v in values]  # type: ignore[union-attr]
            self._run_weights(weights, combos)
        elif settings.method == "grid":
            from xdrl.pareto.weights import inside_simplex, simplex_weights

            grid = [
                inside_simplex(w, settings.edge_margin)
                for w in simplex_weights(settings.num_weights, dim)
            ]
            self._run_weights(grid, combos)
        else:
            self._run_ols(combos, sweep_dir, settings)
        self._report(sweep_dir, settings.report_dir)
        if self.failed:
            first = self.failed[0]
            raise RuntimeError(
                f"{len(self.failed)} of {self.job_idx} jobs failed; first: {first._return_value}"
            )
        return None

    def _run_weights(self, weights: list[list[float]], combos: list[list[str]]) -> None:
        log.info("Pareto sweep: %d weight vectors x %d jobs each", len(weights), len(combos))
        self._launch([[*c, weights_override(w)] for w in weights for c in combos])

    def _run_ols(self, combos: list[list[str]], sweep_dir: Path, settings: ParetoSettings) -> None:
        """OLS rounds (see :func:`~xdrl.pareto.weights.optimistic_linear_support`); a suspect
        point is re-run once with seed + ``RETRY_SEED_OFFSET`` while ``max_jobs`` allows."""
        from xdrl.pareto.report import RETRY_SEED_OFFSET
        from xdrl.pareto.weights import optimistic_linear_support

        rounds = 0
        done = _completed_by_w0(sweep_dir)  # a re-run in the same sweep dir keeps these
        self.job_idx = sum(1 for d in sweep_dir.iterdir() if (d / ".hydra").is_dir())
        spent = 0  # jobs this OLS run counts against max_jobs (kept ones included)
        retried: set[float] = set()
        margin = settings.edge_margin
        low, high = settings.w0_range
        w0_range = (max(low, margin), min(high, 1.0 - margin))  # no weight of 0 (see README)

        def launch(w0s: list[float], seed_offset: int = 0) -> None:
            nonlocal spent
            todo = [w for w in w0s if seed_offset or done.get(round(w, 6), 0) < len(combos)]
            spent += len(w0s) * len(combos)
            jobs = [
                [*self._reseeded(c, seed_offset), weights_override([w, 1.0 - w])]
                for w in todo
                for c in combos
            ]
            self._launch(jobs)

        def evaluate(batch: list[float]) -> list[Sequence[float] | None]:
            nonlocal rounds
            rounds += 1
            kept = [w for w in batch if done.get(round(w, 6), 0) >= len(combos)]
            log.info(
                "OLS round %d: w0 = %s%s",
                rounds,
                ", ".join(f"{w:.4f}" for w in batch if w not in kept),
                f" (already in the sweep dir: {', '.join(f'{w:.4f}' for w in kept)})"
                if kept
                else "",
            )
            launch(batch)
            points = _points_by_w0(sweep_dir)
            suspect = [
                w
                for w in batch
                if round(w, 6) in points
                and points[round(w, 6)][1]
                and round(w, 6) not in retried
                and settings.retry_suspect
            ]
            room = max((settings.max_jobs - spent) // len(combos), 0)
            if suspect:
                log.info(
                    "OLS: suspect point at w0 = %s; re-running %d with seed + %d",
                    ", ".join(f"{w:.4f}" for w in suspect),
                    min(room, len(suspect)),
                    RETRY_SEED_OFFSET,
                )
                retried.update(round(w, 6) for w in suspect[:room])
                launch(suspect[:room], seed_offset=RETRY_SEED_OFFSET)
                points = _points_by_w0(sweep_dir)
            return [points[round(w, 6)][0] if round(w, 6) in points else None for w in batch]

        tried = optimistic_linear_support(
            evaluate,
            tolerance=settings.tolerance,
            max_evals=settings.max_jobs,
            cost=len(combos),
            w0_range=w0_range,
            spent=lambda: spent,
        )
        log.info("OLS: %d rounds, %d weights, %d jobs", rounds, len(tried), self.job_idx)

    def _reseeded(self, combo: list[str], offset: int) -> list[str]:
        """``combo`` with its seed (the config's when it sets none) raised by ``offset``."""
        if not offset:
            return combo
        assert self.config is not None
        seeds = [o for o in combo if o.split("=", 1)[0].lstrip("+") == "seed"]
        seed = int(seeds[-1].split("=", 1)[1]) if seeds else int(self.config.seed)
        return [*[o for o in combo if o not in seeds], f"seed={seed + offset}"]

    def _report(self, sweep_dir: Path, report_dir: str | None) -> None:
        try:
            from xdrl.pareto.report import report_sweep

            text = report_sweep(sweep_dir, report_dir)
        except Exception:  # noqa: BLE001 - the jobs' results stay on disk whatever happens here
            log.warning("Pareto report could not be written", exc_info=True)
            return
        if text is None:
            log.warning(
                "Pareto report: no job of %s finished with per-objective returns", sweep_dir
            )
            return
        print(f"\n{text}", flush=True)
        log.info("Pareto report written to %s", Path(report_dir or sweep_dir / "report"))


def _completed_by_w0(sweep_dir: Path) -> dict[float, int]:
    """How many completed jobs the sweep dir already holds for each rounded ``w0``."""
    from xdrl.pareto.report import run_spec
    from xdrl.pareto.runs import read_sweep

    counts: dict[float, int] = {}
    for run in read_sweep(sweep_dir):
        spec = run_spec(run)
        weights = None if spec is None else spec.reward_weights
        if run.status == "completed" and weights:
            key = round(float(weights[0]), 6)
            counts[key] = counts.get(key, 0) + 1
    return counts


def _points_by_w0(sweep_dir: Path) -> dict[float, tuple[list[float], bool]]:
    """The point of each rounded ``w0`` the sweep's completed jobs trained (the mean over seeds,
    a sound re-run in place of a suspect run, as the report counts them), and whether it is
    still suspect."""
    from xdrl.pareto.report import build_points
    from xdrl.pareto.runs import read_sweep

    return {
        round(float(p["weights"][0]), 6): (p["returns"], p["suspect"])
        for p in build_points(read_sweep(sweep_dir))
    }
