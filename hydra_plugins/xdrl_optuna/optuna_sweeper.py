"""The ``optuna`` sweeper: a hyperparameter search on current Optuna through any Hydra launcher.

Each trial is an ordinary xdrl run (``cfg.objective`` is its value). What it adds to Optuna's
ask-and-tell loop:

- the search space is written in Hydra's sweep syntax, in ``hydra.sweeper.params`` or on the
  command line: ``choice(a,b)``, ``range(lo,hi[,step])`` (``hi`` excluded),
  ``interval(lo,hi)``, ``tag(log, interval(lo,hi))``, ``tag(int, interval(lo,hi))``;
- every dimension is checked against the key's schema before the first trial: reversed or empty
  bounds, or a space with no valid value, are one line (exit 2); a space that can sample an
  invalid value is said once, and a trial that samples one fails alone with its reason;
- the study lives in SQLite under the sweep dir (``optuna.db``), so the same command continues
  it: finished trials count toward ``n_trials``, and trials left running (Ctrl-C, a killed
  sweep) run again in their own job folders, which resume from their checkpoints;
- a continued study never re-samples what it measured: a seeded sampler continues from a seed
  derived from the study's length (:func:`continued_seed`), and a configuration a trial already
  holds is not launched again (the ask is told FAIL with ``duplicate_of``, the next one tried);
- the best trial so far is written to ``<sweep dir>/optimization_results.yaml`` after each batch,
  and every trial with the parameter importances to ``<sweep dir>/study.md``;
- with ``seeds_per_trial: k`` each trial runs k tuning seeds as k jobs and its value is their
  aggregate (:mod:`.seeded`), and ``recheck`` re-runs the best trials on fresh test seeds and
  writes the winner as a preset (:mod:`.recheck`);
- a ``pruner`` stops a trial early: ``WilcoxonPruner`` between its seeds (:mod:`.seeded`), the
  median, halving and Hyperband pruners on the evaluations its runs write while they
  train (:mod:`.pruning`: the jobs stop at a checkpoint, their summary.json says ``pruned``).

Loaded by Hydra at start-up: Optuna is imported only when the sweep starts.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    RangeSweep,
)
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict
from pydantic import Field

from hydra_plugins.xdrl_optuna.objectives import frames_to_reach
from hydra_plugins.xdrl_optuna.pruning import (
    BETWEEN_SEEDS,
    POLL_S,
    SEED_STRIDE,
    WITHIN_RUNS,
    EvaluationWatcher,
    judge_waiting,
    pruner_kind,
)
from hydra_plugins.xdrl_optuna.recheck import RECHECK_DIR, run_recheck
from hydra_plugins.xdrl_optuna.seeded import (
    fail_trial,
    job_folder,
    outcome,
    pair_up,
    run_seeded,
    seed_values,
)
from hydra_plugins.xdrl_optuna.seeds import check_seed_settings, tuning_seeds
from xdrl.config.errors import ConfigError
from xdrl.report.study import (
    DUPLICATE_ATTR,
    INTERVAL_ATTR,
    SEED_VALUES_ATTR,
    SEEDS_ATTR,
    STUDY_FILE,
    pareto_rows,
    write_study_report,
)
from xdrl.sweep.stop import sweep_interrupted
from xdrl.sweep.summary import OPTUNA_RESULTS  # the sweep table reads it back

log = logging.getLogger(__name__)

MAX_DUPLICATE_ASKS = 20  # repeats in a row after which the sampler is taken to be stuck
RECHECK_DEFAULTS = {"top": 0, "seeds": 10, "first_seed": 1000}  # hydra.sweeper.recheck


def continued_seed(seed: int, trials: int) -> int:
    """The sampler's seed for a study that already holds ``trials`` trials.

    A sampler rebuilt with its configured seed replays its first draws, so a study continued
    after Ctrl-C used to re-run trials 0, 1, ... with their exact parameters. A fresh study
    (``trials == 0``) keeps the seed as given, so one command stays reproducible as before; a
    continued one draws from a seed mixed from both numbers by NumPy's ``SeedSequence``, which
    depends only on the study itself: the same commands give the same trials, no sampler state
    has to be kept beside the study (Optuna's pickled-sampler recipe would tie the sweep dir to
    the Optuna version and to the sampler's settings), and a changed sampler config is honoured.
    """
    import numpy as np

    if trials == 0:
        return seed
    return int(np.random.SeedSequence([seed, trials]).generate_state(1)[0])


def distribution(key: str, override: Override) -> Any:
    """The Optuna distribution of one sweep override (``interval(0.1,0.3)`` -> Float(0.1, 0.3))."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    sweep = override.value()
    text = _text(override)
    if isinstance(sweep, ChoiceSweep):
        if not sweep.list:
            raise ConfigError(key, f"{text} is empty; list at least one value")
        return CategoricalDistribution([_plain(v) for v in sweep.list])
    if isinstance(sweep, RangeSweep):
        start, stop, step = sweep.start, sweep.stop, sweep.step
        values: list[Any] = list(override.sweep_iterator())
        if not values or step == 0:
            raise ConfigError(
                key, f"{text} is empty or reversed; write range(low, high) with low < high"
            )
        if all(isinstance(v, int) for v in (start, stop, step)):
            return IntDistribution(int(min(values)), int(max(values)), step=abs(int(step)))
        return CategoricalDistribution([float(v) for v in values])
    if isinstance(sweep, IntervalSweep):
        low, high = float(sweep.start or 0.0), float(sweep.end or 0.0)
        if not low < high:
            raise ConfigError(
                key,
                f"{text} is empty or reversed (low >= high); write interval({min(low, high)}, "
                f"{max(low, high)})",
            )
        log_scale = "log" in sweep.tags
        if log_scale and low <= 0:
            raise ConfigError(key, f"{text}: a log scale needs low > 0; raise the lower bound")
        if "int" in sweep.tags:
            return IntDistribution(math.ceil(low), math.floor(high), log=log_scale)
        return FloatDistribution(low, high, log=log_scale)
    raise ConfigError(key, f"{text} is not a search dimension; use choice, range or interval")


def _text(override: Override) -> str:
    """The override's value as written (``interval(0.1, 0.3)``)."""
    return (override.input_line or "").split("=", 1)[-1].strip()


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def samples_to_check(dist: Any) -> list[Any]:
    """The values of a dimension the pre-check tries: each choice, or both ends and the middle."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    middle = (dist.low + dist.high) / 2
    if isinstance(dist, IntDistribution):
        steps = (int(middle) - dist.low) // dist.step
        return sorted({dist.low, dist.low + steps * dist.step, dist.high})
    return [dist.low, middle, dist.high] if not dist.log else [dist.low, dist.high]


def check_space(config: DictConfig, space: dict[str, Any], spec: dict[str, str]) -> None:
    """Each dimension against the config check: the run config with the key set to a sample
    (the config without the search is checked first, so an error is the sample's).

    No valid sample: a :class:`ConfigError`; some invalid: one warning (those trials fail)."""
    from xdrl.config.check import check_config

    base = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
    check_config(copy.deepcopy(base))  # what every trial shares: its own error, if any
    for key, dist in space.items():
        errors: list[str] = []
        samples = samples_to_check(dist)
        for value in samples:
            trial_cfg = copy.deepcopy(base)
            with open_dict(trial_cfg):
                OmegaConf.update(trial_cfg, key, value, force_add=True)
            try:
                check_config(trial_cfg)
            except ConfigError as err:
                errors.append(err.message if err.key == key else str(err))
        if len(errors) == len(samples):
            raise ConfigError(key, f"{spec[key]} holds no valid value ({errors[0]})")
        if errors:
            log.warning(
                "%s: %s can sample invalid values (%s); trials that do fail alone",
                key,
                spec[key],
                errors[0],
            )


def check_sampler(sampler: Any, space: dict[str, Any], spec: dict[str, str]) -> None:
    """A sampler that can sample ``space``: CMA-ES needs the ``cmaes`` package and numeric
    dimensions only (Optuna would sample a categorical one at random, apart from the model, with
    a warning at every trial)."""
    import importlib.util

    from optuna.distributions import CategoricalDistribution
    from optuna.samplers import CmaEsSampler

    if not isinstance(sampler, CmaEsSampler):
        return
    if importlib.util.find_spec("cmaes") is None:
        raise ConfigError(
            "hydra.sweeper.sampler",
            "CMA-ES needs the cmaes package; pip install 'xdrl[cmaes]' (or sampler=tpe)",
        )
    for key, dist in space.items():
        if isinstance(dist, CategoricalDistribution):
            raise ConfigError(
                "hydra.sweeper.sampler",
                f"CMA-ES samples numeric dimensions only and {key} is {spec[key]} (categorical);"
                " write it as interval(a,b) or tag(int, interval(a,b)), or use sampler=tpe",
            )


class OptunaSweeper(Sweeper):
    """Hydra sweeper running an Optuna study (ask and tell) whose trials are xdrl runs.

    Args:
        sampler: an Optuna sampler config (``_target_: optuna.samplers.TPESampler``, ...).
        direction: ``maximize`` or ``minimize`` the trials' ``objective``.
        study_name: the study's name in the storage (None: the job name).
        storage: an Optuna storage URL (None: ``sqlite:///<sweep dir>/optuna.db``).
        n_trials: finished trials the study should hold in all (a re-run counts earlier ones).
        n_jobs: trials launched at once (the launcher decides where they run).
        params: the search space, ``{key: "interval(0.1, 0.3)"}`` (command-line sweeps add to it).
        seeds_per_trial: tuning seeds each trial runs (``seed`` .. ``seed + k - 1``), one job each.
        aggregate: a trial's value from its seeds' values: ``iqm``, ``mean``, ``median``, ``min``.
        pruner: an Optuna pruner config: ``WilcoxonPruner`` judges a trial seed by seed; the
            median, halving and Hyperband pruners judge its runs' evaluations.
        recheck: ``{top, seeds, first_seed}``: re-run the ``top`` best trials on ``seeds`` test
            seeds from ``first_seed`` on, and write the best after re-check as a preset.
        frames_to_reach: a second objective, the frames until a run's evaluations first reach
            this value (minimized; None: one objective); the result is a Pareto set.

    Example::

        xdrl-train -m hparams_search=ppo_cartpole hydra.sweeper.n_trials=40
        xdrl-train -m hparams_search=ppo_cartpole_seeds hydra/sweeper/pruner=wilcoxon
    """

    def __init__(
        self,
        sampler: Any = None,
        direction: Literal["maximize", "minimize"] = "maximize",
        study_name: str | None = None,
        storage: str | None = None,
        n_trials: Annotated[int, Field(ge=1)] = 20,
        n_jobs: Annotated[int, Field(ge=1)] = 1,
        params: dict[str, Any] | None = None,
        seeds_per_trial: Annotated[int, Field(ge=1)] = 1,
        aggregate: Literal["iqm", "mean", "median", "min"] = "iqm",
        pruner: Any = None,
        recheck: dict[str, Any] | None = None,
        frames_to_reach: float | None = None,
    ) -> None:
        self.sampler_config = sampler
        self.direction = direction
        self.study_name = study_name
        self.storage = storage
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.params = dict(params or {})
        self.seeds_per_trial = seeds_per_trial
        self.aggregate = aggregate
        self.pruner = _built(pruner)
        self.recheck = {**RECHECK_DEFAULTS, **(recheck or {})}
        self.poll_s = POLL_S  # seconds between reads of the running jobs' evaluations
        self.frames_to_reach = frames_to_reach
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self.hydra_context: HydraContext | None = None

    @staticmethod
    def check_settings(settings: Mapping[str, Any]) -> None:
        """What the annotations of ``__init__`` cannot say, checked with them before Hydra builds
        the sweeper (:func:`xdrl.sweep.settings.check_sweeper_settings`): the re-check's keys
        and their types (its node is a plain mapping, so a misspelt
        ``+hydra.sweeper.recheck.topp`` was kept and ignored)."""
        import difflib

        from xdrl.config.check import check_value

        recheck = settings["recheck"] if "recheck" in settings else None
        for name, value in (recheck or {}).items():
            key = f"hydra.sweeper.recheck.{name}"
            if name not in RECHECK_DEFAULTS:
                close = difflib.get_close_matches(str(name), list(RECHECK_DEFAULTS), n=1)
                hint = (
                    f"did you mean hydra.sweeper.recheck.{close[0]}?"
                    if close
                    else (f"its keys: {', '.join(RECHECK_DEFAULTS)}")
                )
                raise ConfigError(key, f"not a re-check key; {hint}")
            check_value(key, value, int, RECHECK_DEFAULTS[name])

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    # The search space -----------------------------------------------------------------------

    def _space(self, arguments: list[str]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
        """The distributions, their source text, and the overrides every trial gets."""
        assert self.hydra_context is not None and self.config is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        searched = parser.parse_overrides([f"{k}={v}" for k, v in self.params.items()])
        given = parser.parse_overrides(arguments)
        overrides = {o.get_key_element(): o for o in searched}
        overrides.update({o.get_key_element(): o for o in given if o.is_sweep_override()})
        fixed = [  # a searched key is the search's, whatever else sets it
            o.input_line
            for o in given
            if not o.is_sweep_override() and o.get_key_element() not in overrides
        ]
        if not overrides:
            raise ConfigError("hydra.sweeper.params", "no search space; add key: interval(a,b)")
        if "seed" in overrides and self._seeded:
            raise ConfigError("seed", "is set by hydra.sweeper.seeds_per_trial; do not search it")
        space = {key: distribution(key, o) for key, o in overrides.items()}
        spec = {key: _text(o) for key, o in overrides.items()}
        check_space(self.config, space, spec)
        return space, spec, [str(f) for f in fixed]

    # The study ------------------------------------------------------------------------------

    def sweep(self, arguments: list[str]) -> None:
        assert self.config is not None
        try:  # before any trial or folder: one line, exit 2; the sweeper's own settings first
            if self.direction not in ("maximize", "minimize"):
                raise ConfigError(
                    "hydra.sweeper.direction", f"got {self.direction!r}; set maximize or minimize"
                )
            for key, value, example in (
                ("n_trials", self.n_trials, 20),
                ("n_jobs", self.n_jobs, 1),
            ):
                if not isinstance(value, int) or value < 1:
                    raise ConfigError(
                        f"hydra.sweeper.{key}",
                        f"got {value!r}; set an integer >= 1, e.g. hydra.sweeper.{key}={example}",
                    )
            self._check_seeds()
            self._check_two_objectives()
            space, spec, fixed = self._space(arguments)  # checks the run config at each sample
            check_sampler(self.sampler_config, space, spec)
        except ConfigError as err:
            print(f"xdrl-train: config error: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        study = self._study(sweep_dir)
        self._run(study, space, fixed, sweep_dir)
        _log_best(study)
        if self.recheck["top"] and not sweep_interrupted(sweep_dir):
            self._recheck(study, fixed, sweep_dir)

    # Several seeds per trial ----------------------------------------------------------------

    @property
    def _seeded(self) -> bool:
        """Whether trials run as one job per seed (several seeds, or a pruner between seeds)."""
        return self.seeds_per_trial != 1 or self._prunes or self.frames_to_reach is not None

    @property
    def _prunes(self) -> bool:
        return self._prune_kind is not None

    @property
    def _prune_kind(self) -> str | None:
        """``seeds`` (Wilcoxon, between a trial's seeds), ``evaluations`` (within its runs) or
        None (no pruner)."""
        return pruner_kind(self.pruner)

    @property
    def _per_instance(self) -> bool:
        """A Wilcoxon pruner within runs: each (seed, evaluation) is one instance."""
        from optuna.pruners import WilcoxonPruner

        return self._prune_kind == WITHIN_RUNS and isinstance(self.pruner, WilcoxonPruner)

    def _base_seed(self) -> int:
        assert self.config is not None
        return int(self.config.seed) if "seed" in self.config else 0

    def _check_seeds(self) -> None:
        check_seed_settings(
            seeds_per_trial=self.seeds_per_trial,
            aggregate_name=self.aggregate,
            base_seed=self._base_seed(),
            recheck=self.recheck,
        )
        self._check_pruner()

    def _check_two_objectives(self) -> None:
        """``frames_to_reach`` needs evaluations during training, a sampler and a study that
        take two objectives (no pruner, no CMA-ES) and no re-check (which ranks on one)."""
        from optuna.samplers import CmaEsSampler

        if self.frames_to_reach is None:
            return
        key = "hydra.sweeper.frames_to_reach"
        if isinstance(self.frames_to_reach, bool) or not isinstance(
            self.frames_to_reach, int | float
        ):
            raise ConfigError(key, f"got {self.frames_to_reach!r}; set a number (e.g. 475)")
        self._check_evaluations(
            key, "reads the evaluations a run writes while it trains", "frames_to_reach=null"
        )
        if self._prunes:
            raise ConfigError(key, "Optuna prunes one-objective studies only; set pruner=none")
        if isinstance(self.sampler_config, CmaEsSampler):
            raise ConfigError(key, "CMA-ES samples one objective only; use sampler=tpe")
        if self.recheck["top"]:
            raise ConfigError(key, "the re-check ranks trials on one objective; set recheck.top=0")

    def _check_evaluations(self, key: str, what: str, instead: str) -> None:
        """Evaluations during training (not only the final one), or a config error at ``key``
        (``instead``: the other way out, e.g. ``pruner=none``)."""
        assert self.config is not None
        total, every = int(self.config.total_frames), int(self.config.eval.interval_frames)
        if not self.config.eval.enabled or every >= total:
            raise ConfigError(
                key,
                f"{what}, and with eval.enabled={self.config.eval.enabled}, "
                f"eval.interval_frames={every} and total_frames={total} there are none; set "
                f"eval.interval_frames={max(total // 8, 1)} (or {instead})",
            )

    def _check_pruner(self) -> None:
        """An Optuna pruner that has steps to judge: two seeds or more for Wilcoxon, evaluations
        during the runs for the others."""
        from optuna.pruners import BasePruner

        assert self.config is not None
        if self.pruner is not None and not isinstance(self.pruner, BasePruner):
            raise ConfigError(
                "hydra.sweeper.pruner",
                f"{type(self.pruner).__name__} is not an Optuna pruner; pick "
                "hydra/sweeper/pruner=none|wilcoxon|wilcoxon_evals|median|halving|hyperband",
            )
        kind = self._prune_kind
        if kind == BETWEEN_SEEDS and self.seeds_per_trial < 2:
            raise ConfigError(
                "hydra.sweeper.pruner",
                "prunes between a trial's seeds; set seeds_per_trial >= 2 (or pruner=none)",
            )
        if self._per_instance and self.seeds_per_trial > SEED_STRIDE:
            raise ConfigError(
                "hydra.sweeper.pruner",
                f"numbers its instances for up to {SEED_STRIDE} seeds per trial and "
                f"seeds_per_trial is {self.seeds_per_trial}; lower it",
            )
        if kind == WITHIN_RUNS:
            name = type(self.pruner).__name__
            self._check_evaluations(
                "hydra.sweeper.pruner",
                f"{name} judges the evaluations a run writes while it trains",
                "pruner=none",
            )

    def _launch_seeded(
        self, jobs: list[tuple[Any, int]], fixed: list[str], folder: Callable[[Any, int], str]
    ) -> Sequence[JobReturn]:
        """One launch of ``(trial, seed)`` jobs, each in ``<sweep dir>/<folder(trial, seed)>``."""
        overrides = [
            [
                *_unseeded(fixed),
                *(f"{k}={_show(v)}" for k, v in trial.params.items()),
                f"seed={seed}",
                f"hydra.sweep.subdir={folder(trial, seed)}",
            ]
            for trial, seed in jobs
        ]
        first, seed = jobs[0]
        start = first.number * self.seeds_per_trial + max(seed - self._base_seed(), 0)
        return list(self.launcher.launch(overrides, initial_job_idx=start))

    def _recheck(self, study: Any, fixed: list[str], sweep_dir: Path) -> None:
        """Re-run the best trials on the test seeds; the winner becomes a preset file."""
        assert self.config is not None and self.hydra_context is not None
        loader, config = self.hydra_context.config_loader, self.config

        def compose(overrides: list[str]) -> DictConfig:
            return loader.load_sweep_config(config, overrides)

        rows = run_recheck(
            study,
            settings=self.recheck,
            aggregate_name=self.aggregate,
            fixed=_unseeded(fixed),
            launch=lambda jobs: self._launch_seeded(
                jobs, fixed, lambda t, s: f"{RECHECK_DIR}/{job_folder(t.number, s)}"
            ),
            compose=compose,
            sweep_dir=sweep_dir,
            interrupted=lambda: sweep_interrupted(sweep_dir),
        )
        if rows:
            _write_results(study, sweep_dir, recheck=rows)

    def _study(self, sweep_dir: Path) -> Any:
        import optuna

        # Optuna's own lines ("A new study created", "Trial 3 failed") join the sweep's log
        # (stdout and the sweep's log file) instead of its own handler on stderr.
        optuna.logging.disable_default_handler()
        optuna.logging.enable_propagation()
        assert self.config is not None
        storage = self.storage or f"sqlite:///{(sweep_dir / STUDY_FILE).resolve()}"
        name = self.study_name or str(self.config.hydra.job.name)
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            sampler=optuna.samplers.RandomSampler(),  # replaced below, once the length is known
            pruner=self.pruner if self._prunes else None,
            directions=self._directions(),  # type: ignore[arg-type]  # checked in sweep()
            load_if_exists=True,
        )
        study.sampler = self._sampler(len(study.get_trials(deepcopy=False)))
        finished = _finished(study)
        if finished:
            log.info("Study %s in %s: %d trials already finished", name, storage, finished)
        return study

    def _directions(self) -> list[str]:
        """The study's directions: the objective's, then ``minimize`` for frames to reach."""
        return [str(self.direction)] + (["minimize"] if self.frames_to_reach is not None else [])

    def _sampler(self, trials: int) -> Any:
        """The configured sampler; in a study that holds trials, a seeded one gets the seed
        :func:`continued_seed` derives, so it does not replay the draws of earlier commands."""
        from hydra.utils import instantiate

        assert self.config is not None
        node = self.config.hydra.sweeper.sampler
        if not isinstance(node, DictConfig):  # no sampler config: Optuna's default (TPE)
            return node
        if trials == 0 or "seed" not in node or node.seed is None:
            return instantiate(node)
        seed = continued_seed(int(node.seed), trials)
        log.info(
            "The sampler continues with seed %d (seed %d, %d trials in the study)",
            seed,
            node.seed,
            trials,
        )
        return instantiate(node, seed=seed)

    def _run(self, study: Any, space: dict[str, Any], fixed: list[str], sweep_dir: Path) -> None:
        """Trials left running by an earlier command first (their folders resume), then new ones
        in batches of ``n_jobs``, until ``n_trials`` are finished or the sweep is interrupted."""
        from optuna.trial import Trial, TrialState

        carried: list[Any] = []  # trials whose later seeds wait for a launch (:func:`pair_up`)
        stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        for frozen in stale:
            trial = Trial(study, frozen._trial_id)  # the running trial, to tell and annotate
            log.info("Trial %d was left running: running it again in its folder", trial.number)
            carried += self._launch(study, [trial], fixed, sweep_dir)
            if sweep_interrupted(sweep_dir):
                return
        while not sweep_interrupted(sweep_dir):
            room = self.n_trials - _finished(study) - len(carried)
            trials = _ask_unmeasured(study, space, min(self.n_jobs, room)) if room > 0 else []
            if not trials and not carried:
                _write_results(study, sweep_dir)
                return
            carried = judge_waiting(study, carried)
            now, later = pair_up(carried, self._missing) if trials else (carried, [])
            carried = later + self._launch(study, now + trials, fixed, sweep_dir)

    def _missing(self, trial: Any) -> int:
        """How many of its seeds ``trial`` has not run."""
        return self.seeds_per_trial - len(seed_values(trial))

    def _launch(
        self, study: Any, trials: list[Any], fixed: list[str], sweep_dir: Path
    ) -> list[Any]:
        """Run ``trials`` (one batch); the trials that still lack seeds, for the next batch
        (a pruner that judges each seed's evaluations: :func:`~.seeded.paired_jobs`)."""
        if self._seeded:
            seeds = tuning_seeds(self._base_seed(), self.seeds_per_trial)
            left = run_seeded(
                study,
                trials,
                seeds=seeds,
                aggregate_name=self.aggregate,
                prune=self._prune_kind == BETWEEN_SEEDS,
                launch=lambda jobs: self._launch_seeded(
                    jobs, fixed, lambda t, s: job_folder(t.number, s)
                ),
                interrupted=lambda: sweep_interrupted(sweep_dir),
                watch=self._watcher(study, seeds, sweep_dir)
                if self._prune_kind == WITHIN_RUNS
                else None,
                second=self._frames_to(sweep_dir) if self.frames_to_reach is not None else None,
                carry=self._per_instance,
            )
            _write_results(study, sweep_dir)
            return left
        for start, group in _consecutive(trials):
            jobs = [[*fixed, *(f"{k}={_show(v)}" for k, v in t.params.items())] for t in group]
            returns = self.launcher.launch(jobs, initial_job_idx=start)
            for trial, ret in zip(group, returns, strict=True):
                _tell(study, trial, ret)
        _write_results(study, sweep_dir)
        return []

    def _frames_to(self, sweep_dir: Path) -> Callable[[Any, int], float]:
        """A finished seed's frames to reach ``frames_to_reach``, from its evaluations."""
        assert self.config is not None and self.frames_to_reach is not None
        objective, threshold = str(self.config.objective), float(self.frames_to_reach)
        maximize = self.direction == "maximize"

        def frames(trial: Any, seed: int) -> float:
            folder = sweep_dir / job_folder(trial.number, seed)
            return frames_to_reach(folder, objective, threshold, maximize)

        return frames

    def _watcher(
        self, study: Any, seeds: list[int], sweep_dir: Path
    ) -> Callable[[list[Any]], EvaluationWatcher]:
        """What watches a launch's trials for a pruner within runs (:mod:`.pruning`)."""
        assert self.config is not None
        objective = str(self.config.objective)

        def watch(trials: list[Any]) -> EvaluationWatcher:
            return EvaluationWatcher(
                study,
                trials,
                seeds=seeds,
                folder=lambda t, s: sweep_dir / job_folder(t.number, s),
                objective=objective,
                aggregate_name=self.aggregate,
                poll_s=self.poll_s,
                per_instance=self._per_instance,
            )

        return watch


def _unseeded(fixed: list[str]) -> list[str]:
    """The command's overrides without ``seed=``: each seeded job sets its own."""
    return [f for f in fixed if f.split("=", 1)[0].lstrip("+~") != "seed"]


def _built(pruner: Any) -> Any:
    """The pruner, built here when its config says ``_partial_: true``: Optuna's
    ``ExperimentalWarning`` for ``WilcoxonPruner`` would otherwise print three lines on stderr
    at every start (the pruner's config file says it is experimental)."""
    if not isinstance(pruner, functools.partial):
        return pruner
    from optuna.exceptions import ExperimentalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return pruner()


def _ask_unmeasured(study: Any, space: dict[str, Any], size: int) -> list[Any]:
    """Up to ``size`` new trials whose parameters no complete or running trial holds.

    Optuna has no sampler-independent guard against repeats (its FAQ checks the study's trials
    in the objective). An ask that repeats one is told FAIL with ``duplicate_of`` (TPE ignores
    failed trials) and not counted toward ``n_trials``; the next ask draws on. None: every
    configuration of a finite space is measured, or the sampler repeated itself
    ``MAX_DUPLICATE_ASKS`` times in a row."""
    from optuna.trial import TrialState

    held = {
        _params_key(t.params): t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    }
    configurations = _space_size(space)
    trials: list[Any] = []
    repeats = 0
    while len(trials) < size and repeats < MAX_DUPLICATE_ASKS:
        measured = sum(_in_space(dict(k), space) for k in held) if configurations < math.inf else 0
        if measured >= configurations:
            log.warning("Every configuration of the search space was measured: sweep complete")
            return trials
        trial = study.ask(space)
        key = _params_key(trial.params)
        if key in held:
            trial.set_user_attr(DUPLICATE_ATTR, held[key])
            study.tell(trial.number, state=TrialState.FAIL)
            log.info("Trial %d repeats trial %d: not launched", trial.number, held[key])
            repeats += 1
            continue
        held[key] = trial.number
        trials.append(trial)
        repeats = 0
    if not trials:
        log.warning(
            "The sampler proposed measured configurations %d times in a row: stopping the sweep;"
            " widen the search space",
            repeats,
        )
    return trials


def _params_key(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


def _in_space(params: dict[str, Any], space: dict[str, Any]) -> bool:
    """Whether ``params`` is a point of ``space`` (a study continued with another space holds
    trials that are not)."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if params.keys() != space.keys():
        return False
    for key, dist in space.items():
        value = params[key]
        if isinstance(dist, CategoricalDistribution):
            inside = value in dist.choices
        else:
            inside = dist.low <= value <= dist.high
            if isinstance(dist, IntDistribution) and not dist.log:
                inside = inside and (value - dist.low) % dist.step == 0
        if not inside:
            return False
    return True


def _space_size(space: dict[str, Any]) -> float:
    """How many configurations the space holds (``inf`` with a float dimension)."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    size = 1.0
    for dist in space.values():
        if isinstance(dist, CategoricalDistribution):
            size *= len(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            size *= (dist.high - dist.low) // dist.step + 1
        elif isinstance(dist, IntDistribution):
            size *= dist.high - dist.low + 1
        else:
            return math.inf
    return size


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _consecutive(trials: Sequence[Any]) -> Iterator[tuple[int, list[Any]]]:
    """Trials in runs of consecutive numbers (a launch numbers its jobs from one index)."""
    group: list[Any] = []
    for trial in trials:
        if group and trial.number != group[-1].number + 1:
            yield group[0].number, group
            group = []
        group.append(trial)
    if group:
        yield group[0].number, group


def _tell(study: Any, trial: Any, ret: JobReturn) -> None:
    """Finish ``trial`` from its job: its value, or FAIL with a one-line reason. A trial whose
    run was interrupted (Ctrl-C, SIGTERM) stays running: the same command continues it."""
    kind, result = outcome(ret)
    if kind == "interrupted":
        log.info("Trial %d was %s: the same command continues it", trial.number, result)
        return
    if kind == "value":
        study.tell(trial.number, result)
        return
    fail_trial(study, trial, result)


def _finished(study: Any) -> int:
    """Trials that count toward ``n_trials``: measured or failed, repeats never launched aside."""
    from optuna.trial import TrialState

    done = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
    trials = study.get_trials(deepcopy=False, states=done)
    return sum(DUPLICATE_ATTR not in t.user_attrs for t in trials)


def _best(study: Any) -> Any:
    from optuna.trial import TrialState

    if len(study.directions) > 1 or not study.get_trials(states=(TrialState.COMPLETE,)):
        return None  # two objectives: a Pareto set (pareto_rows), no one best trial
    return study.best_trial


def _write_results(
    study: Any, sweep_dir: Path, recheck: list[dict[str, Any]] | None = None
) -> None:
    """``optimization_results.yaml``: the best trial so far and the trial counts (atomic); after
    a re-check, its table (search vs re-check value per trial, the recommended one first)."""
    from optuna.trial import TrialState

    best = _best(study)
    trials = study.get_trials(deepcopy=False)
    repeats = sum(DUPLICATE_ATTR in t.user_attrs for t in trials)
    counts = {
        state.name.lower(): sum(t.state == state for t in trials)
        for state in (TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING)
    }
    pruned = sum(t.state == TrialState.PRUNED for t in trials)
    if pruned:  # only a pruner prunes
        counts["pruned"] = pruned
    counts["fail"] -= repeats
    counts["duplicate"] = repeats  # asks that repeated a trial's configuration: not launched
    results = {
        "name": study.study_name,
        "best_trial": best.number if best is not None else None,
        "best_params": dict(best.params) if best is not None else None,
        "best_value": float(best.value) if best is not None else None,
        "trials": counts,
    }
    if best is not None and SEEDS_ATTR in best.user_attrs:
        results["best_seed_values"] = best.user_attrs.get(SEED_VALUES_ATTR)
        results["best_interval"] = best.user_attrs.get(INTERVAL_ATTR)
    if len(study.directions) > 1:
        results["pareto_set"] = pareto_rows(study)
    if recheck:
        results["recheck"] = recheck
        results["recommended"] = {k: recheck[0].get(k) for k in ("trial", "params", "preset")}
    path = sweep_dir / OPTUNA_RESULTS
    tmp = path.with_name(path.name + ".tmp")
    OmegaConf.save(OmegaConf.create(results), tmp)
    os.replace(tmp, path)
    write_study_report(study, sweep_dir)


def _log_best(study: Any) -> None:
    if len(study.directions) > 1:
        for row in pareto_rows(study):
            log.info("Pareto set: trial %d, values %s, %s", row["trial"], row["values"],
                     row["params"])  # fmt: skip
        return
    best = _best(study)
    if best is None:
        log.warning("No trial finished with a value; see the sweep table")
        return
    log.info("Best parameters: %s", dict(best.params))
    log.info("Best value: %s (trial %d)", best.value, best.number)
