"""An Optuna study as files a person reads: ``study.md``, ``study-params.png`` and, for two
objectives, ``study-pareto.png``.

The Optuna sweeper (``hydra_plugins/xdrl_optuna``) writes ``<sweep dir>/study.md`` after every
batch of trials; ``xdrl-report <sweep dir>`` writes it again from ``<sweep dir>/optuna.db``
together with ``study-params.png``, the objective against each parameter (and
``study-pareto.png``, the Pareto set of a two-objective study). ``study.md`` holds one
row per launched trial (state, value and interval, each seed's value, parameters, why it failed,
after which seeds or at how many frames it was pruned), best first; for a two-objective study
its Pareto set; then Optuna's parameter importances (fANOVA on the complete trials); after a
re-check, its table (search against re-check value per trial). The same
study opens in ``optuna-dashboard sqlite:///<sweep dir>/optuna.db``.

The names of the trial user attributes the sweeper writes live here, where they are read. Light:
Optuna and matplotlib are imported when a report is written.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path
from typing import Any

from xdrl.run.layout import write_atomically

log = logging.getLogger(__name__)

STUDY_FILE = "optuna.db"  # the study's SQLite storage in the sweep dir
STUDY_TABLE = "study.md"
STUDY_PLOT = "study-params.png"
PARETO_PLOT = "study-pareto.png"  # a two-objective study's trials and Pareto set
RECHECK_TABLE = "recheck.md"  # written by the sweeper's re-check (hydra_plugins/xdrl_optuna)
MIN_TRIALS_FOR_IMPORTANCE = 4  # fANOVA on fewer complete trials says nothing

# Trial user attributes written by the sweeper
SEEDS_ATTR = "seeds"  # the tuning seeds of the trial, in order
SEED_VALUES_ATTR = "seed_values"  # {seed: final objective} of its jobs
AGGREGATE_ATTR = "aggregate"  # the aggregate's name
INTERVAL_ATTR = "interval"  # 95% bootstrap interval of the aggregate
PRUNED_ATTR = "pruned_after"  # seeds run when the Wilcoxon pruner stopped it
PRUNED_AT_ATTR = "pruned_at_frames"  # the step (frames) a pruner within runs stopped it at
FRAMES_TO_ATTR = "seed_frames_to"  # {seed: frames to reach the threshold} (frames_to_reach)
DUPLICATE_ATTR = "duplicate_of"  # an ask that repeated a trial's configuration: never launched
FRAMES_TO_NAME = "frames to reach"  # the second objective's name in study.md


def pareto_rows(study: Any) -> list[dict[str, Any]]:
    """The study's Pareto set (complete trials no other trial beats on both objectives), best
    first objective first: ``{trial, values, params}`` each."""
    from optuna.study import StudyDirection

    sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
    front = sorted(study.best_trials, key=lambda t: (sign * t.values[0], t.values[1], t.number))
    return [
        {"trial": t.number, "values": [float(v) for v in t.values], "params": dict(t.params)}
        for t in front
    ]


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _first(trial: Any) -> float | None:
    """The trial's (first) objective value; None before it has one."""
    return None if trial.values is None else float(trial.values[0])


def _row(trial: Any) -> str:
    attrs = trial.user_attrs
    value = "-" if _first(trial) is None else _num(_first(trial))
    bounds = attrs.get(INTERVAL_ATTR)
    if bounds:
        value += f" [{_num(bounds[0])}, {_num(bounds[1])}]"
    if trial.values is not None and len(trial.values) > 1:
        value += f"; {FRAMES_TO_NAME} {_num(float(trial.values[1]))}"
    seeds = ", ".join(f"{s}: {_num(v)}" for s, v in attrs.get(SEED_VALUES_ATTR, {}).items())
    if FRAMES_TO_ATTR in attrs:
        frames = ", ".join(f"{s}: {_num(v)}" for s, v in attrs[FRAMES_TO_ATTR].items())
        seeds += f" ({FRAMES_TO_NAME}: {frames})"
    note = attrs.get("error") or (
        f"pruned after seeds {attrs[PRUNED_ATTR]}" if PRUNED_ATTR in attrs else ""
    )
    if attrs.get(PRUNED_AT_ATTR) is not None:
        note = f"pruned at {attrs[PRUNED_AT_ATTR]:,} frames"
    params = ", ".join(f"{k}={_num(v)}" for k, v in trial.params.items())
    state = trial.state.name.lower()
    return f"| {trial.number} | {state} | {value} | {seeds or '-'} | {params} | {note} |"


def _importances(study: Any, complete: int) -> list[str]:
    if complete < MIN_TRIALS_FOR_IMPORTANCE:
        return [f"Parameter importances need {MIN_TRIALS_FOR_IMPORTANCE} complete trials."]
    import optuna

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importances = optuna.importance.get_param_importances(
                study,
                target=lambda t: t.values[0],  # the (first) objective
            )
    except (RuntimeError, ValueError) as err:  # e.g. every trial the same value
        return [f"Parameter importances: not computed ({err})."]
    lines = ["| parameter | importance (fANOVA) |", "| --- | --- |"]
    return lines + [f"| {k} | {v:.3f} |" for k, v in importances.items()]


def _pareto(study: Any) -> list[str]:
    """The Pareto set of a two-objective study: no other trial is better on both."""
    lines = [
        f"## Pareto set (objective, {FRAMES_TO_NAME} the threshold)",
        "",
        f"| trial | objective | {FRAMES_TO_NAME} | parameters |",
        "| --- | --- | --- | --- |",
    ]
    for row in pareto_rows(study):
        params = ", ".join(f"{k}={_num(v)}" for k, v in row["params"].items())
        first, frames = row["values"]
        lines.append(f"| {row['trial']} | {_num(first)} | {_num(frames)} | {params} |")
    return [*lines, ""]


def _recheck(sweep_dir: Path) -> list[str]:
    """The re-check table the sweeper wrote (``recheck.md``: search against re-check value per
    re-checked trial), as a section; nothing before a re-check."""
    path = sweep_dir / RECHECK_TABLE
    if not path.is_file():
        return []
    table = [line for line in path.read_text().splitlines() if not line.startswith("# ")]
    return ["", "## Re-check on test seeds", *table]


def write_study_report(study: Any, sweep_dir: Path) -> Path:
    """Write ``study.md`` (atomic); returns its path."""
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False) if DUPLICATE_ATTR not in t.user_attrs]
    sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
    trials.sort(key=lambda t: (_first(t) is None, sign * (_first(t) or 0.0), t.number))
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    directions = ", ".join(d.name.lower() for d in study.directions)
    lines = [
        f"# Optuna study {study.study_name} ({directions})",
        "",
        "| trial | state | value [95% CI] | seed: value | parameters | note |",
        "| --- | --- | --- | --- | --- | --- |",
        *(_row(t) for t in trials),
        "",
        *(_pareto(study) if len(study.directions) > 1 else []),
        *_importances(study, complete),
        *_recheck(sweep_dir),
    ]
    return write_atomically(sweep_dir / STUDY_TABLE, "\n".join(lines) + "\n")


def plot_params(study: Any, path: Path) -> Path | None:
    """``study-params.png``: :func:`params_figure` saved to ``path`` (None when no trial is
    complete)."""
    import matplotlib.pyplot as plt

    fig = params_figure(study)
    if fig is None:
        return None
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def log_ticks(low: float, high: float, most: int = 4) -> list[float]:
    """At most ``most`` labelled ticks for a log axis from ``low`` to ``high``: the values 1, 2
    and 5 times a power of ten inside it, else 1 and 5 times, else the powers of ten (every
    second, third... when still too many); the two ends (two significant digits) when fewer
    than two fall inside. Matplotlib's own labels every minor tick of an axis spanning about a
    decade or less, and at a panel's width ``3x10^-4`` and ``4x10^-4`` overlapped."""
    powers = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    inside: list[float] = []
    for mantissas in ((1, 2, 5), (1, 5), (1,)):
        inside = [m * 10.0**k for k in powers for m in mantissas if low <= m * 10.0**k <= high]
        if len(inside) <= most:
            break
    inside = inside[:: math.ceil(len(inside) / most)] if len(inside) > most else inside
    if len(inside) < 2:
        inside = sorted({float(f"{low:.2g}"), float(f"{high:.2g}")})
    return inside


def _label_log_axis(ax: Any) -> None:
    """A few readable labels on a log x axis (:func:`log_ticks`); minor ticks stay unlabelled."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    low, high = ax.get_xlim()
    ax.xaxis.set_major_locator(FixedLocator(log_ticks(low, high)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:.2g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def params_figure(study: Any) -> Any | None:
    """The figure of ``study-params.png``: the (first) objective of each complete trial against
    each searched parameter, one panel per parameter (log axis for a log-scaled one, labelled
    at a few round values; the choices in order for a categorical one), coloured by trial
    number so the search's drift shows; pruned trials as grey crosses at their last reported
    value. None when no trial is complete."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        return None
    names = sorted({name for t in complete for name in t.params})
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False, layout="constrained"
    )
    last = max(t.number for t in trials)
    for ax, name in zip(axes.flat, names, strict=False):
        dist = complete[-1].distributions.get(name) or complete[0].distributions[name]
        choices = list(dist.choices) if isinstance(dist, CategoricalDistribution) else None

        def x_of(trial: Any, choices: list[Any] | None = choices, name: str = name) -> float:
            value = trial.params[name]
            return float(choices.index(value)) if choices is not None else float(value)

        shown = [t for t in complete if name in t.params]
        points = ax.scatter([x_of(t) for t in shown], [_first(t) for t in shown],
                            c=[t.number for t in shown], cmap="viridis", vmin=0, vmax=last,
                            s=22)  # fmt: skip
        pruned = [t for t in trials if t.state == TrialState.PRUNED and t.intermediate_values]
        pruned = [t for t in pruned if name in t.params]
        ax.scatter([x_of(t) for t in pruned],
                   [t.intermediate_values[max(t.intermediate_values)] for t in pruned],
                   marker="x", color="grey", s=18)  # fmt: skip
        if choices is not None:
            ax.set_xticks(range(len(choices)), [str(c) for c in choices])
        elif getattr(dist, "log", False):
            ax.set_xscale("log")
            _label_log_axis(ax)
        ax.set_xlabel(name, fontsize=8)
        ax.set_ylabel("objective", fontsize=8)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.colorbar(points, ax=axes, label="trial", fraction=0.03)
    fig.suptitle(f"Optuna study {study.study_name}: objective against each parameter", fontsize=9)
    return fig


def plot_pareto(study: Any, path: Path) -> Path | None:
    """``study-pareto.png`` of a two-objective study: each complete trial's objective against
    its frames to reach the threshold (trials that never reached it at the right edge), the
    Pareto set joined by a step line and numbered. None for one objective or no complete trial."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.trial import TrialState

    if len(study.directions) < 2:
        return None
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not trials:
        return None
    finite = [t.values[1] for t in trials if math.isfinite(t.values[1])]
    never = 1.1 * max(finite) if finite and max(finite) > 0 else 1.0  # "never reached" drawn here

    def frames(trial: Any) -> float:
        return float(trial.values[1]) if math.isfinite(trial.values[1]) else never

    fig, ax = plt.subplots(figsize=(5.5, 4.2), layout="constrained")
    ax.scatter([frames(t) for t in trials], [t.values[0] for t in trials], color="lightgrey",
               label="trials")  # fmt: skip
    front = sorted(pareto_rows(study), key=lambda row: row["values"][1])
    by_number = {t.number: t for t in trials}
    xs = [frames(by_number[row["trial"]]) for row in front]
    ys = [row["values"][0] for row in front]
    ax.step(xs, ys, where="post", color="tab:blue", label="Pareto set")
    ax.scatter(xs, ys, color="tab:blue")
    for x, y, row in zip(xs, ys, front, strict=True):
        ax.annotate(str(row["trial"]), (x, y), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)  # fmt: skip
    if len(finite) < len(trials):
        ax.axvline(never, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel(f"{FRAMES_TO_NAME} the threshold (dotted line: never)")
    ax.set_ylabel("objective")
    ax.set_title(f"Optuna study {study.study_name}: Pareto set", fontsize=9)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def report_study(folder: str | Path) -> list[Path]:
    """``study.md`` and ``study-params.png`` of the study in ``<folder>/optuna.db`` (the sweep
    dir of an Optuna search), written into ``folder``; the paths written ([] when the folder
    holds no study)."""
    import optuna

    db = Path(folder) / STUDY_FILE
    if not db.is_file():
        return []
    storage = f"sqlite:///{db.resolve()}"
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    if len(names) != 1:  # the sweeper keeps one study per sweep dir
        log.warning("%s holds %d studies; reporting none (one expected)", db, len(names))
        return []
    study = optuna.load_study(study_name=names[0], storage=storage)
    written = [write_study_report(study, Path(folder))]
    plots = (plot_params(study, Path(folder) / STUDY_PLOT),
             plot_pareto(study, Path(folder) / PARETO_PLOT))  # fmt: skip
    return [*written, *(p for p in plots if p is not None)]
