"""The Pareto report of a weight sweep: ``pareto.json``, ``pareto.png`` and a Markdown section.

Input: run records with ``dir``, ``config`` (dict), ``summary`` (dict or None) and ``status``,
as :mod:`xdrl.pareto.runs` reads them or ``xdrl.report`` finds them; each config is read through
the run's typed spec (:meth:`~xdrl.config.spec.RunSpec.from_saved`, :func:`run_spec`). Each
weight vector's point is the mean over seeds of the final deterministic per-objective evaluation
returns.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from xdrl.config.errors import ConfigError
from xdrl.config.spec import RunSpec
from xdrl.pareto import metrics
from xdrl.pareto.plots import plot_front
from xdrl.pareto.weights import simplex_weights
from xdrl.run.layout import write_atomically

log = logging.getLogger(__name__)

OBJECTIVE_KEY = (
    "eval/deterministic/reward/objective_{}/episode_reward_mean"  # logged by the eval hook
)
ENDED_KEY = "eval/deterministic/episodes_ended"  # fraction of greedy episodes that terminated
GAP_KEY = "eval/deterministic/value_gap_mean"  # discounted return minus Q(start state)
RETRY_SEED_OFFSET = 1_000  # a re-run of a suspect weight trains with seed + this
EUM_WEIGHTS = 100  # evenly spread weight vectors the expected utility averages over
PARETO_JSON = "pareto.json"
PARETO_PNG = "pareto.png"


def objective_returns(summary: dict[str, Any] | None) -> list[float] | None:
    """The final deterministic per-objective returns of a run's ``summary.json`` (None: none)."""
    evals = (summary or {}).get("eval") or {}
    out, i = [], 0
    while OBJECTIVE_KEY.format(i) in evals:
        out.append(float(evals[OBJECTIVE_KEY.format(i)]))
        i += 1
    return out or None


def check_run(summary: dict[str, Any] | None, suspect_gap: float) -> dict[str, Any]:
    """The per-weight sanity check of one run's ``summary.json``: whether its greedy
    evaluation episodes all terminated (``ended``, None when not recorded), the gap between
    its discounted scalarized return and its Q-value of the start state (``value_gap``, None
    for a policy without Q-values), and ``suspect`` with the reasons when either fails."""
    evals = (summary or {}).get("eval") or {}
    ended, gap = evals.get(ENDED_KEY), evals.get(GAP_KEY)
    reasons = []
    if ended is not None and float(ended) < 1.0:
        reasons.append(f"{float(ended):.0%} of greedy episodes terminated")
    if gap is not None and abs(float(gap)) > suspect_gap:
        reasons.append(f"return - Q(start) = {float(gap):.3g}, beyond +-{suspect_gap:g}")
    return {
        "ended": None if ended is None else float(ended),
        "value_gap": None if gap is None else float(gap),
        "suspect": bool(reasons),
        "reasons": reasons,
    }


def run_spec(run: Any) -> RunSpec | None:
    """A run record's saved config as its typed spec (None: not a run config xdrl reads)."""
    try:
        return RunSpec.from_saved(run.config, str(run.dir))
    except ConfigError:
        return None


def base_seed(seed: int) -> int:
    """The seed a run stands in for: a re-run's seed less :data:`RETRY_SEED_OFFSET`."""
    return seed - RETRY_SEED_OFFSET if seed >= RETRY_SEED_OFFSET else seed


def _weights(spec: RunSpec | None, dim: int | None) -> tuple[float, ...] | None:
    """The run's weight vector, rounded (equal weights where it trained unweighted)."""
    if spec is None:
        return None
    if spec.reward_weights is None:
        return tuple([1.0 / dim] * dim) if dim else None
    return tuple(round(w, 6) for w in spec.reward_weights)


def _ref_point(specs: Sequence[RunSpec]) -> list[float] | None:
    return next((list(s.ref_point) for s in specs if s.ref_point is not None), None)


def known_front(env_id: str) -> list[list[float]] | None:
    """The true front MO-Gymnasium knows for ``env_id`` (undiscounted), or None."""
    try:
        import warnings

        import mo_gymnasium

        with warnings.catch_warnings():  # float64 bounds cast to float32: nothing for the user
            warnings.filterwarnings("ignore", message=".*precision lowered by casting.*")
            env = mo_gymnasium.make(env_id)
        try:
            front = env.unwrapped.pareto_front(gamma=1.0)  # type: ignore[attr-defined]
        finally:
            env.close()
        return [[float(x) for x in p] for p in front]
    except Exception:  # noqa: BLE001 - most envs do not know their front
        return None


_Job = tuple[Any, RunSpec | None]  # a run record and its spec (None: unreadable config)


def _jobs(runs: Iterable[Any]) -> list[_Job]:
    return [(run, run_spec(run)) for run in runs]


def _group(jobs: Sequence[_Job]) -> tuple[dict, dict, list[dict]]:
    """Completed runs' returns by weight vector then seed, their sanity checks alike, and the
    failed runs. A re-run (seed + :data:`RETRY_SEED_OFFSET`) stands in for its seed's run
    when that one is suspect and the re-run is not."""
    by_weights: dict[tuple[float, ...], dict[int, list[float]]] = defaultdict(dict)
    checks: dict[tuple[float, ...], dict[int, dict[str, Any]]] = defaultdict(dict)
    failed = []
    for run, spec in sorted(jobs, key=lambda job: job[1].seed if job[1] else 0):  # originals 1st
        returns = objective_returns(run.summary) if run.status == "completed" else None
        weights = _weights(spec, len(returns) if returns else None)
        if spec is None or returns is None or weights is None:
            failed.append({"dir": str(run.dir), "weights": list(weights) if weights else None})
            continue
        seed = spec.seed
        check = {"seed": seed, **check_run(run.summary, spec.suspect_gap)}
        kept = checks[weights].get(base_seed(seed))
        if kept is not None:
            if not kept["suspect"] or check["suspect"]:
                continue  # the first sound run stays (the original when all are suspect)
            check["instead_of"] = kept["seed"]
        by_weights[weights][base_seed(seed)] = returns
        checks[weights][base_seed(seed)] = check
    return by_weights, checks, failed


def _is_weight_sweep(specs: Sequence[RunSpec]) -> bool:
    return len({s.reward_weights for s in specs if s.reward_weights is not None}) >= 2


def build_points(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """One point per weight vector of ``runs``' completed jobs: the mean returns over seeds,
    each seed's sanity check, and ``suspect`` when any kept run failed it."""
    return _points(*_group(_jobs(runs))[:2])


def _points(by_weights: dict, checks: dict) -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = []
    for weights, per_seed in sorted(by_weights.items()):
        seeds = sorted(per_seed)
        returns = [sum(per_seed[s][i] for s in seeds) / len(seeds) for i in range(len(weights))]
        per = [{"returns": per_seed[s], **checks[weights][s]} for s in seeds]
        points.append(
            {
                "weights": list(weights),
                "returns": returns,
                "seeds": len(seeds),
                "suspect": any(p["suspect"] for p in per),
                "per_seed": per,
            }
        )
    return points


def build_report(runs: Sequence[Any]) -> dict[str, Any] | None:
    """Every field of ``pareto.json`` (None when ``runs`` are not a multi-objective weight
    sweep, or no run finished with per-objective returns)."""
    jobs = _jobs(runs)
    specs = [spec for _run, spec in jobs if spec is not None]
    if not _is_weight_sweep(specs):
        return None
    by_weights, checks, failed = _group(jobs)
    if not by_weights:
        return None
    points = _points(by_weights, checks)
    dim = len(points[0]["weights"])
    env_id = specs[0].env_id
    ref = _ref_point(specs)
    front = metrics.non_dominated([list(p["returns"]) for p in points])
    true = known_front(env_id)
    eum_weights = simplex_weights(EUM_WEIGHTS, dim)
    notes = []
    if ref is None:
        notes.append(f"no env.pareto.ref_point for {env_id}: hypervolumes are null")
    per_seed_hv = _per_seed_hypervolumes(by_weights, ref)
    return {
        "env": env_id,
        "objectives": dim,
        "ref_point": ref,
        "points": points,
        "front": front,
        "hypervolume": metrics.hypervolume(front, ref) if ref else None,
        "hypervolume_per_seed": per_seed_hv,
        "hypervolume_ci": metrics.mean_ci95(per_seed_hv),
        "eum": metrics.expected_utility(front, eum_weights),
        "cardinality": len(front),
        "known_front": true,
        "true_hypervolume": metrics.hypervolume(true, ref) if true and ref else None,
        "igd": metrics.igd(front, true) if true else None,
        "max_utility_loss": metrics.max_utility_loss(front, true, eum_weights) if true else None,
        "jobs": sum(1 for _ in runs),
        "suspect_points": sum(1 for p in points if p["suspect"]),
        "failed": failed,
        "notes": notes,
    }


def _per_seed_hypervolumes(by_weights: dict, ref: list[float] | None) -> list[float]:
    if ref is None:
        return []
    seeds = sorted({s for per_seed in by_weights.values() for s in per_seed})
    out = []
    for seed in seeds:
        pts = [per_seed[seed] for per_seed in by_weights.values() if seed in per_seed]
        out.append(metrics.hypervolume(metrics.non_dominated(pts), ref))
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def format_markdown(data: dict[str, Any], png: str = PARETO_PNG) -> str:
    """The report as a Markdown section: metrics, then one row per weight vector."""
    lines = [
        f"## Pareto front: {data['env']} ({data['objectives']} objectives)",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key in (
        "cardinality", "hypervolume", "hypervolume_ci", "true_hypervolume", "eum", "igd",
        "max_utility_loss", "ref_point", "jobs", "suspect_points",
    ):  # fmt: skip
        lines.append(f"| {key} | {_fmt(data[key])} |")
    lines += [
        "",
        "| weights | returns (mean over seeds) | seeds | on front | check |",
        "|---|---|---|---|---|",
    ]
    front = {tuple(p) for p in data["front"]}
    for p in data["points"]:
        on = "yes" if tuple(p["returns"]) in front else "no"
        check = _check_text(p)
        lines.append(
            f"| {_fmt(p['weights'])} | {_fmt(p['returns'])} | {p['seeds']} | {on} | {check} |"
        )
    lines += [f"- failed job: {f['dir']} (weights {_fmt(f['weights'])})" for f in data["failed"]]
    lines += [f"- {note}" for note in data["notes"]]
    lines += ["", f"![Pareto front]({png})", ""]
    return "\n".join(lines)


def _check_text(point: dict[str, Any]) -> str:
    """``ok``, or ``SUSPECT`` with the reasons per seed; a re-run that replaced a suspect run
    is named."""
    parts = []
    for run in point["per_seed"]:
        if run["suspect"]:
            parts.append(f"SUSPECT (seed {run['seed']}: {'; '.join(run['reasons'])})")
        elif "instead_of" in run:
            parts.append(f"re-run seed {run['seed']} replaced suspect seed {run['instead_of']}")
    return ", ".join(parts) or "ok"


def write_report(data: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``pareto.json`` and ``pareto.png`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / PARETO_JSON
    write_atomically(path, json.dumps(data, indent=2) + "\n")
    png = plot_front(
        data["points"],
        data["front"],
        data["known_front"],
        out / PARETO_PNG,
        title=f"{data['env']}: {data['cardinality']} non-dominated of {len(data['points'])} "
        f"weights, HV {_fmt(data['hypervolume'])}"
        + (f" (true {_fmt(data['true_hypervolume'])})" if data["true_hypervolume"] else ""),
    )
    return path, png


def pareto_report(runs: Iterable[Any], out_dir: str | Path) -> str | None:
    """``xdrl-report``'s hook: write ``pareto.json``/``pareto.png`` into ``out_dir`` and return
    a Markdown section, or None when ``runs`` are not a multi-objective weight sweep."""
    data = build_report(list(runs))
    if data is None:
        return None
    write_report(data, out_dir)
    return format_markdown(data)


def report_sweep(sweep_dir: str | Path, out_dir: str | Path | None = None) -> str | None:
    """Read a sweep folder's jobs and write its Pareto report (default ``<sweep>/report/``)."""
    from xdrl.pareto.runs import read_sweep

    return pareto_report(read_sweep(sweep_dir), out_dir or Path(sweep_dir) / "report")
