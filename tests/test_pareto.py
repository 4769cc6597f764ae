"""Pareto fronts of weight sweeps: metrics worked out by hand, OLS corner weights on
deep-sea-treasure's convex coverage set, the report, and sweeps through the pareto sweeper."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from tests.conftest import run_cli
from xdrl.pareto import metrics
from xdrl.pareto.report import build_report, pareto_report
from xdrl.pareto.runs import read_sweep
from xdrl.pareto.weights import (
    corner_weights,
    ols_candidates,
    optimistic_linear_support,
    scalarized,
    simplex_weights,
)

# deep-sea-treasure-v0, undiscounted: the true front; (20.3, -14) is the one point no linear
# scalarization reaches, so the convex coverage set (CCS) is the other nine.
DST_FRONT = [
    (0.7, -1.0), (8.2, -3.0), (11.5, -5.0), (14.0, -7.0), (15.1, -8.0),
    (16.1, -9.0), (19.6, -13.0), (20.3, -14.0), (22.4, -17.0), (23.7, -19.0),
]  # fmt: skip
DST_CCS = [p for p in DST_FRONT if p != (20.3, -14.0)]
DST_REF = (0.0, -25.0)


# ---------------------------------------------------------------------------------------------
# Metrics, by hand
# ---------------------------------------------------------------------------------------------


def test_hypervolume_2d_is_the_union_of_boxes() -> None:
    # Above reference (0, 0): columns x in [0,1] of height 3, [1,2] of height 2, [2,3] of 1.
    assert metrics.hypervolume([(1, 3), (2, 2), (3, 1)], (0, 0)) == pytest.approx(3 + 2 + 1)
    # A dominated point and one below the reference add nothing.
    assert metrics.hypervolume([(1, 3), (2, 2), (3, 1), (1, 1), (-1, 5)], (0, 0)) == pytest.approx(
        6
    )
    # DST with reference (0, -25): columns between consecutive treasures, each as tall as the
    # time left above -25 of the next treasure on the right.
    xs = [0.0] + [p[0] for p in DST_FRONT]
    boxes = sum((xs[i + 1] - xs[i]) * (p[1] + 25) for i, p in enumerate(DST_FRONT))
    assert boxes == pytest.approx(401.8)
    assert metrics.hypervolume(DST_FRONT, DST_REF) == pytest.approx(401.8)
    assert metrics.hypervolume(DST_CCS, DST_REF) == pytest.approx(399.7)


def test_hypervolume_3d_by_inclusion_exclusion() -> None:
    # Three boxes of volume 2 from the origin; each pair and all three overlap in the unit cube.
    points = [(2, 1, 1), (1, 2, 1), (1, 1, 2)]
    assert metrics.hypervolume(points, (0, 0, 0)) == pytest.approx(3 * 2 - 3 * 1 + 1)
    # One box of 2 x 3 x 4 and one inside it.
    assert metrics.hypervolume([(2, 3, 4), (1, 1, 1)], (0, 0, 0)) == pytest.approx(24)


def test_expected_utility_and_max_utility_loss_by_hand() -> None:
    weights = [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]
    # Best w . p for each weight: 1, 0.5, 1.
    assert metrics.expected_utility([(1, 0), (0, 1)], weights) == pytest.approx((1 + 0.5 + 1) / 3)
    # Against a front that adds (0.8, 0.8): at [0.5, 0.5] it gives 0.8 instead of 0.5.
    loss = metrics.max_utility_loss([(1, 0), (0, 1)], [(1, 0), (0, 1), (0.8, 0.8)], weights)
    assert loss == pytest.approx(0.3)


def test_dominance_filter() -> None:
    points = [(1, 2), (2, 1), (1, 1), (2, 1), (0, 3), (0, 2)]
    assert metrics.non_dominated(points) == [[0, 3], [1, 2], [2, 1]]
    assert metrics.non_dominated([(1, 1, 1), (1, 1, 2), (2, 0, 0)]) == [[1, 1, 2], [2, 0, 0]]


def test_igd_is_zero_on_the_front_and_positive_off_it() -> None:
    assert metrics.igd(DST_FRONT, DST_FRONT) == pytest.approx(0.0)
    assert metrics.igd(DST_CCS, DST_FRONT) > 0


def test_ci95_of_the_mean() -> None:
    lo, hi = metrics.mean_ci95([1.0, 2.0, 3.0])  # type: ignore[misc]
    # mean 2, sd 1, t(0.975, 2 dof) = 4.303
    assert (lo, hi) == pytest.approx((2 - 4.3027 / math.sqrt(3), 2 + 4.3027 / math.sqrt(3)), 1e-4)
    assert metrics.mean_ci95([1.0]) is None


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------


def test_simplex_weights() -> None:
    assert simplex_weights(3, 2) == [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]
    w3 = np.asarray(simplex_weights(6, 3))
    assert w3.shape == (6, 3) and np.allclose(w3.sum(axis=1), 1) and (w3 >= 0).all()
    assert len({tuple(np.round(row, 6)) for row in w3}) == 6


def _exact_corner(a: tuple[float, float], b: tuple[float, float]) -> float:
    """w0 with w . a == w . b for w = [w0, 1 - w0]."""
    return (b[1] - a[1]) / ((a[0] - b[0]) - (a[1] - b[1]))


def test_dst_corner_weights() -> None:
    exact = [_exact_corner(a, b) for a, b in zip(DST_CCS, DST_CCS[1:], strict=False)]
    assert [round(w, 4) for w in exact] == [
        0.2105, 0.3774, 0.4444, 0.4762, 0.5, 0.5333, 0.5882, 0.6061,
    ]  # fmt: skip
    assert corner_weights(DST_CCS) == pytest.approx(exact)
    assert corner_weights(DST_FRONT) == pytest.approx(exact)  # (20.3, -14) has no corner


def _oracle(w0s: list[float]) -> list[tuple[float, float]]:
    """The best CCS point at each weight (ties: the first listed), as a perfect agent would
    find. (20.3, -14) lies on the segment from (19.6, -13) to (22.4, -17): it ties at their
    corner and is never best alone, hence not in the CCS."""
    return [max(DST_CCS, key=lambda p: scalarized(p, w)) for w in w0s]


def test_ols_finds_the_dst_ccs_within_15_evaluations_and_stops() -> None:
    calls: list[float] = []

    def evaluate(w0s: list[float]) -> list[tuple[float, float]]:
        calls.extend(w0s)
        return _oracle(w0s)

    tried = optimistic_linear_support(evaluate, tolerance=1e-6, max_evals=15)
    assert len(calls) <= 15 and len(calls) == len(tried)
    assert sorted(set(tried.values())) == DST_CCS  # type: ignore[type-var]
    assert metrics.hypervolume(list(tried.values()), DST_REF) == pytest.approx(399.7)  # type: ignore[arg-type]


def test_ols_without_a_budget_confirms_every_corner_then_stops() -> None:
    tried = optimistic_linear_support(_oracle, tolerance=1e-6, max_evals=100)
    assert sorted(set(tried.values())) == DST_CCS  # type: ignore[type-var]
    # Every corner of the CCS was tried (to confirm it), and no corner is left to try.
    assert all(any(abs(c - w) < 1e-9 for w in tried) for c in corner_weights(DST_CCS))
    assert ols_candidates(tried, 1e-6) == []
    assert len(tried) == 17  # 2 extremes + 7 new points + 8 confirmations


def test_even_weights_reach_only_part_of_the_ccs() -> None:
    for num, hv, found in ((11, 379.6, 6), (21, 398.6, 8)):
        points = _oracle([w[0] for w in simplex_weights(num, 2)])
        assert len(set(points)) == found
        assert metrics.hypervolume(points, DST_REF) == pytest.approx(hv)


# ---------------------------------------------------------------------------------------------
# The report, on duck-typed run records (xdrl.report's RunRecord shape)
# ---------------------------------------------------------------------------------------------


def _record(weights: list[float] | None, seed: int, returns: list[float] | None, env_id: str):
    evals = {
        f"eval/deterministic/reward/objective_{i}/episode_reward_mean": r
        for i, r in enumerate(returns or [])
    }
    config = {
        "seed": seed,
        "env": {"id": env_id, "reward_weights": weights, "pareto": {"ref_point": [0.0, -25.0]}},
    }
    summary = {"status": "completed", "eval": evals} if returns else None
    return SimpleNamespace(
        dir=Path(f"/x/{weights}_{seed}"),
        config=config,
        summary=summary,
        status="completed" if returns else "failed",
    )


def test_report_means_over_seeds_and_per_seed_hypervolume(tmp_path: Path) -> None:
    runs = [
        _record([1.0, 0.0], 0, [23.7, -19.0], "deep-sea-treasure-v0"),
        _record([1.0, 0.0], 1, [22.4, -17.0], "deep-sea-treasure-v0"),
        _record([0.0, 1.0], 0, [0.7, -1.0], "deep-sea-treasure-v0"),
        _record([0.0, 1.0], 1, [0.7, -1.0], "deep-sea-treasure-v0"),
        _record([0.5, 0.5], 0, None, "deep-sea-treasure-v0"),
    ]
    data = build_report(runs)
    assert data is not None
    assert [p["returns"] for p in data["points"]] == [[0.7, -1.0], pytest.approx([23.05, -18.0])]
    assert [p["seeds"] for p in data["points"]] == [2, 2]
    # Seed 0: (0.7,-1), (23.7,-19): 0.7 * 24 + 23 * 6; seed 1: 0.7 * 24 + 21.7 * 8.
    assert data["hypervolume_per_seed"] == pytest.approx([0.7 * 24 + 23 * 6, 0.7 * 24 + 21.7 * 8])
    assert data["hypervolume"] == pytest.approx(0.7 * 24 + 22.35 * 7)
    assert data["true_hypervolume"] == pytest.approx(401.8)
    assert len(data["known_front"]) == 10 and data["igd"] > 0
    assert data["failed"] == [{"dir": "/x/[0.5, 0.5]_0", "weights": [0.5, 0.5]}]
    text = pareto_report(runs, tmp_path)
    assert text is not None and "| hypervolume |" in text
    assert (tmp_path / "pareto.json").is_file() and (tmp_path / "pareto.png").is_file()


def test_report_is_none_for_runs_that_are_no_weight_sweep(tmp_path: Path) -> None:
    one_weight = [_record([0.5, 0.5], s, [15.1, -8.0], "deep-sea-treasure-v0") for s in (0, 1)]
    assert pareto_report(one_weight, tmp_path) is None
    scalar = SimpleNamespace(
        dir=Path("/x"), config={"env": {"id": "CartPole-v1"}}, summary={}, status="completed"
    )
    assert pareto_report([scalar], tmp_path) is None
    assert not (tmp_path / "pareto.json").exists()


def test_report_without_a_ref_point_leaves_hypervolumes_null() -> None:
    runs = [
        _record([1.0, 0.0], 0, [23.7, -19.0], "deep-sea-treasure-v0"),
        _record([0.0, 1.0], 0, [0.7, -1.0], "deep-sea-treasure-v0"),
    ]
    for run in runs:
        run.config["env"]["pareto"]["ref_point"] = None
    data = build_report(runs)
    assert data is not None
    assert data["hypervolume"] is None and data["true_hypervolume"] is None
    assert data["hypervolume_per_seed"] == [] and data["notes"] == [
        "no env.pareto.ref_point for deep-sea-treasure-v0: hypervolumes are null"
    ]
    assert data["eum"] is not None and data["igd"] is not None


def _job_folder(root: Path, name: str, weights: list[float], returns: list[float] | None) -> None:
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    env = {
        "id": "deep-sea-treasure-v0",
        "reward_weights": weights,
        "pareto": {"ref_point": [0, -25]},
    }
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "env": env}))
    if returns is not None:
        evals = {
            f"eval/deterministic/reward/objective_{i}/episode_reward_mean": r
            for i, r in enumerate(returns)
        }
        (job / "summary.json").write_text(json.dumps({"status": "completed", "eval": evals}))


def test_job_folders_are_read_back_without_torch(tmp_path: Path, capsys) -> None:
    from hydra_plugins.xdrl_pareto.pareto_sweeper import _completed_by_w0, _points_by_w0
    from xdrl.pareto.__main__ import main

    _job_folder(tmp_path / "a", "0_w", [0.0, 1.0], [0.7, -1.0])
    _job_folder(tmp_path / "a", "1_w", [0.62, 0.38], None)  # killed: no summary.json
    _job_folder(tmp_path / "b", "0_w", [0.62, 0.38], [23.7, -19.0])
    assert _completed_by_w0(tmp_path / "a") == {0.0: 1}
    assert _points_by_w0(tmp_path / "b") == {0.62: ([23.7, -19.0], False)}  # not suspect
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r")]) == 0
    data = json.loads((tmp_path / "r" / "pareto.json").read_text())
    assert data["front"] == [[0.7, -1.0], [23.7, -19.0]] and len(data["failed"]) == 1
    assert "## Pareto front" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Sweeps through the pareto sweeper (tiny budgets)
# ---------------------------------------------------------------------------------------------

TINY_DST = [
    "experiment=dst_dqn",
    "total_frames=256",
    "algorithm.build.init_random_frames=128",
    "eval.episodes=1",
    "eval.before_training=false",
    "logging=none",
    "checkpoint=none",
    "hydra/sweeper=pareto",
]
PARETO_KEYS = {
    "objectives", "ref_point", "points", "front", "hypervolume", "hypervolume_per_seed", "eum",
    "cardinality", "known_front", "true_hypervolume", "igd",
}  # fmt: skip


def _assert_report(sweep_dir: Path, num_points: int) -> dict:
    import imageio.v3 as iio

    data = json.loads((sweep_dir / "report" / "pareto.json").read_text())
    assert PARETO_KEYS <= set(data)
    assert data["objectives"] == 2 and data["ref_point"] == [0.0, -25.0]
    assert len(data["points"]) == num_points
    assert {"weights", "returns", "seeds"} <= set(data["points"][0])
    assert data["cardinality"] == len(data["front"]) >= 1
    assert data["true_hypervolume"] == pytest.approx(401.8)
    image = iio.imread(sweep_dir / "report" / "pareto.png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.std() > 10  # decodable, not blank
    return data


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_grid_sweep_writes_the_front(launcher: str, tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    extra = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"] if launcher == "joblib" else []
    result = run_cli(
        ["-m", *TINY_DST, *extra, "pareto.num_weights=3", f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = _assert_report(sweep_dir, num_points=3)
    # pareto.edge_margin (0.01) moves the simplex's edges inside
    assert [p["weights"] for p in data["points"]] == [[0.01, 0.99], [0.5, 0.5], [0.99, 0.01]]
    assert "## Pareto front: deep-sea-treasure-v0" in result.stdout


def test_a_weight_vector_of_the_wrong_length_fails_its_job_and_the_sweep_reports_it(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        [
            "-m",
            *TINY_DST,
            "env.reward_weights=[1.0,0.0,0.0],[0.0,1.0],[1.0,0.0]",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=tmp_path,
    )
    assert result.returncode != 0
    errors = [
        line for line in result.stderr.splitlines() if "config error: env.reward_weights" in line
    ]
    assert errors and "has 2 objectives but 3 weights were given" in errors[0]
    data = _assert_report(sweep_dir, num_points=2)
    assert [f["weights"] for f in data["failed"]] == [[1.0, 0.0, 0.0]]
    assert "failed job" in result.stdout and "1 of 3 jobs failed" in result.stderr
    table = json.loads((sweep_dir / "sweep_summary.json").read_text())
    (failed,) = [job for job in table["jobs"] if job["status"] == "failed"]
    assert "has 2 objectives but 3 weights were given" in failed["error"]  # the one-line reason


BAD_PARETO = [
    (["pareto.num_weights=0"], "pareto.num_weights: got 0 (int), too small; set an integer >= 2"),
    (["pareto.num_weights=1"], "pareto.num_weights: got 1 (int), too small; set an integer >= 2"),
    (["pareto.method=ols", "pareto.max_jobs=1"], "pareto.max_jobs: got 1 (int), too small"),
    (["pareto.w0_range=[0.2,1.5]"], "pareto.w0_range: got [0.2, 1.5] (list): item 1 (1.5) too"),
    (["pareto.method=ols", "pareto.w0_range=[0.8,0.2]"], "pareto.w0_range: [0.8, 0.2] is empty"),
    (["pareto.method=foo"], "pareto.method: got 'foo' (str), not one of the options; set one"),
    (
        ["env=four_room", "algorithm=dqn", "pareto.method=ols"],
        "pareto.method: ols sweeps two objectives, four-room-v0 has 3; use pareto.method=grid",
    ),
    (
        ["env=cartpole", "algorithm=dqn"],
        "env.id: CartPole-v1 has a scalar reward, so a Pareto sweep has no weights to sweep",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_PARETO)
def test_bad_pareto_settings_are_one_line_before_any_job(
    overrides: list[str], message: str, tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        ["-m", "hydra/sweeper=pareto", *overrides, "seed=0,1", f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr == f"xdrl-train: config error: {result.stderr.split(': ', 2)[2]}"
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert not sweep_dir.exists()  # no job, no folder


def test_the_pareto_schema_is_the_sweeper_signature() -> None:
    """conf/config.yaml's pareto node names the sweeper's typed function; the keys match it."""
    import inspect

    from hydra import compose, initialize_config_module

    from hydra_plugins.xdrl_pareto.settings import ParetoSettings, pareto_settings

    with initialize_config_module("xdrl.conf", version_base="1.3"):
        node = compose("config").pareto
    assert node._target_ == "hydra_plugins.xdrl_pareto.settings.pareto_settings"
    params = inspect.signature(pareto_settings).parameters
    assert [k for k in node if k != "_target_"] == list(params)
    defaults = {k: v.default for k, v in params.items()}
    assert {k: node[k] for k in params if k != "w0_range"} == {
        k: d for k, d in defaults.items() if k != "w0_range"
    }
    assert list(node.w0_range) == list(defaults["w0_range"])
    assert pareto_settings(method="ols", w0_range=[0.2, 0.8]) == ParetoSettings(
        "ols", 11, 1.0e-3, 15, (0.2, 0.8), None, 0.01, 0.05, True
    )


# ---------------------------------------------------------------------------------------------
# Per-weight sanity checks: suspect points, re-runs, the edges of the simplex
# ---------------------------------------------------------------------------------------------


def test_inside_simplex_moves_only_the_edges() -> None:
    from xdrl.pareto.weights import inside_simplex

    assert inside_simplex([1.0, 0.0], 0.01) == pytest.approx([0.99, 0.01])
    assert inside_simplex([0.0, 1.0], 0.01) == pytest.approx([0.01, 0.99])
    assert inside_simplex([0.3, 0.7], 0.01) == [0.3, 0.7]
    # [0.5, 0.5, 0] is short of 0.01 in one place; the other two give 0.005 each
    assert inside_simplex([0.5, 0.5, 0.0], 0.01) == pytest.approx([0.495, 0.495, 0.01])


def _checked(weights, seed, returns, ended=1.0, gap=0.0, suspect_gap=None):
    run = _record(weights, seed, returns, "deep-sea-treasure-v0")
    run.summary["eval"]["eval/deterministic/episodes_ended"] = ended
    run.summary["eval"]["eval/deterministic/value_gap_mean"] = gap
    if suspect_gap is not None:
        run.config["pareto"] = {"suspect_gap": suspect_gap}
    return run


def test_a_point_is_suspect_when_its_greedy_episodes_run_on_or_its_values_disagree(
    tmp_path: Path,
) -> None:
    from xdrl.pareto.report import check_run

    assert check_run({"eval": {}}, 0.05) == {
        "ended": None, "value_gap": None, "suspect": False, "reasons": [],
    }  # fmt: skip
    looped = check_run({"eval": {"eval/deterministic/episodes_ended": 0.0}}, 0.05)
    assert looped["suspect"] and looped["reasons"] == ["0% of greedy episodes terminated"]
    off = check_run({"eval": {"eval/deterministic/value_gap_mean": -0.3}}, 0.05)
    assert off["suspect"] and off["reasons"] == ["return - Q(start) = -0.3, beyond +-0.05"]
    assert not check_run({"eval": {"eval/deterministic/value_gap_mean": -0.3}}, 0.5)["suspect"]

    runs = [
        _checked([0.01, 0.99], 0, [0.7, -1.0]),
        _checked([0.99, 0.01], 0, [0.0, -100.0], ended=0.0, gap=-23.0),
        _checked([0.6, 0.4], 0, [19.6, -13.0], gap=0.5, suspect_gap=1.0),  # its own gap: fine
    ]
    data = build_report(runs)
    assert data is not None
    by_w0 = {p["weights"][0]: p for p in data["points"]}
    assert [by_w0[w]["suspect"] for w in (0.01, 0.6, 0.99)] == [False, False, True]
    assert by_w0[0.99]["per_seed"][0]["ended"] == 0.0 and data["suspect_points"] == 1
    text = pareto_report(runs, tmp_path)
    assert text is not None
    assert "| [0.99, 0.01] | [0, -100] | 1 | no | SUSPECT (seed 0: 0% of greedy episodes" in text
    assert "| [0.6, 0.4] | [19.6, -13] | 1 | yes | ok |" in text
    assert json.loads((tmp_path / "pareto.json").read_text())["points"][2]["suspect"] is True


def test_a_sound_re_run_stands_in_for_a_suspect_run_of_its_seed() -> None:
    runs = [
        _checked([0.01, 0.99], 0, [0.7, -1.0]),
        _checked([0.6, 0.4], 0, [0.0, -100.0], ended=0.0),
        _checked([0.6, 0.4], 1000, [22.4, -17.0]),  # the re-run: seed 0 + 1000
    ]
    data = build_report(runs)
    assert data is not None
    point = data["points"][1]
    assert point["returns"] == [22.4, -17.0] and point["seeds"] == 1 and not point["suspect"]
    assert point["per_seed"][0]["instead_of"] == 0 and data["hypervolume_per_seed"] == [
        pytest.approx(0.7 * 24 + 21.7 * 8)
    ]


class _OracleLauncher:
    """A Hydra launcher stand-in: each job folder gets the best CCS point of its weight, and
    the first run (seed < 1000) of the weights in ``bad`` a looping, suspect result."""

    def __init__(self, sweep_dir: Path, bad: set[float]) -> None:
        self.sweep_dir, self.bad, self.jobs = sweep_dir, bad, []

    def launch(self, batch: list[list[str]], initial_job_idx: int) -> list:
        from hydra.core.utils import JobReturn, JobStatus

        out = []
        for i, overrides in enumerate(batch):
            values = dict(o.split("=", 1) for o in overrides)
            w0 = float(values["env.reward_weights"].strip("[]").split(",")[0])
            seed = int(values.get("seed", 0))
            self.jobs.append((round(w0, 4), seed))
            loops = round(w0, 4) in self.bad and seed < 1000
            returns = [0.0, -100.0] if loops else list(_oracle([w0])[0])
            job = self.sweep_dir / f"{initial_job_idx + i}"
            (job / ".hydra").mkdir(parents=True)
            config = {
                "seed": seed,
                "env": {"id": "deep-sea-treasure-v0", "reward_weights": [w0, 1 - w0]},
            }
            (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
            evals = {
                "eval/deterministic/reward/objective_0/episode_reward_mean": returns[0],
                "eval/deterministic/reward/objective_1/episode_reward_mean": returns[1],
                "eval/deterministic/episodes_ended": 0.0 if loops else 1.0,
            }
            (job / "summary.json").write_text(json.dumps({"status": "completed", "eval": evals}))
            ret = JobReturn()
            ret.status = JobStatus.COMPLETED
            out.append(ret)
        return out


def _ols_sweeper(tmp_path: Path, bad: set[float], **settings):
    from omegaconf import OmegaConf

    from hydra_plugins.xdrl_pareto.pareto_sweeper import ParetoSweeper
    from hydra_plugins.xdrl_pareto.settings import pareto_settings

    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    sweeper = ParetoSweeper()
    sweeper.config = OmegaConf.create({"seed": 0, "hydra": {"sweep": {"dir": str(sweep_dir)}}})
    sweeper.launcher = _OracleLauncher(sweep_dir, bad)
    sweeper._run_ols([["seed=0"]], sweep_dir, pareto_settings(method="ols", **settings))
    return sweeper.launcher.jobs, sweep_dir


def test_ols_re_runs_a_suspect_weight_once_with_another_seed_and_recovers_the_ccs(
    tmp_path: Path,
) -> None:
    jobs, sweep_dir = _ols_sweeper(tmp_path, bad={0.99}, max_jobs=15, tolerance=1e-6)
    # the edges are moved inside by edge_margin 0.01; 0.99 looped on seed 0, then seed 1000
    assert jobs[:3] == [(0.01, 0), (0.99, 0), (0.99, 1000)]
    assert len(jobs) <= 15 and sum(1 for _w, s in jobs if s >= 1000) == 1
    data = build_report(read_sweep(sweep_dir))
    assert data is not None and data["suspect_points"] == 0
    assert sorted(map(tuple, data["front"])) == DST_CCS


def test_ols_re_runs_stay_within_max_jobs(tmp_path: Path) -> None:
    every = {round(w, 4) for w in (0.01, 0.99, *corner_weights(DST_CCS))}
    jobs, _ = _ols_sweeper(tmp_path, bad=every, max_jobs=6, tolerance=1e-6)
    assert len(jobs) <= 6
    retried = [w for w, s in jobs if s >= 1000]
    assert len(retried) == len(set(retried))  # once each at most


# ---------------------------------------------------------------------------------------------
# The dst_dqn recipe, trained for real (a few seconds per job)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # 12,000 one-frame updates (~24 s): make test-slow, which CI runs
def test_dst_dqn_finds_the_optimum_at_a_hard_weight_and_ends_episodes_at_the_edges(
    tmp_path: Path,
) -> None:
    """At w0 = 0.6 the best treasure (22.4, -17) is worth 6.64, its rivals (23.7, -19) 6.62 and
    (19.6, -13) 6.56: the greedy policy must take the right one. At the edges as the sweeper
    trains them (pareto.edge_margin: [0.01, 0.99], [0.99, 0.01]) each step still costs, so the
    greedy policies end their episodes, on the CCS's end points. Each job's Q-value of the start
    state is its return. One sweep: the basic launcher runs the 3 jobs in one process."""
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        [
            "-m",
            "experiment=dst_dqn",
            "logging=none",
            "eval.before_training=false",
            "hydra/sweeper=pareto",
            "env.reward_weights=[0.6,0.4],[0.01,0.99],[0.99,0.01]",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((sweep_dir / "report" / "pareto.json").read_text())
    points = {p["weights"][0]: p for p in data["points"]}
    expected = {0.6: (22.4, -17.0), 0.01: (0.7, -1.0), 0.99: (23.7, -19.0)}
    assert set(points) == set(expected)
    for w0, best in expected.items():
        assert points[w0]["returns"] == pytest.approx(best, abs=1e-4), w0
        (run,) = points[w0]["per_seed"]
        assert run["ended"] == 1.0 and abs(run["value_gap"]) < 1e-4 and not run["suspect"]


def test_evaluation_records_terminated_episodes_and_the_start_value_gap() -> None:
    """Two episodes of up to 4 steps: the first terminates after 3 (rewards 1, 1, 5), the second
    is cut by the time limit (truncated, rewards 1 each); Q(start) 6.0 and 2.0."""
    import torch
    from tensordict import TensorDict

    from xdrl.trainer_hooks.logging.evaluation_metrics import rollout_metrics

    reward = torch.tensor([[1.0, 1.0, 5.0, 0.0], [1.0, 1.0, 1.0, 1.0]]).unsqueeze(-1)
    terminated = torch.tensor([[0, 0, 1, 0], [0, 0, 0, 0]], dtype=torch.bool).unsqueeze(-1)
    truncated = torch.tensor([[0, 0, 0, 0], [0, 0, 0, 1]], dtype=torch.bool).unsqueeze(-1)
    q = torch.tensor([[6.0, 5.0, 5.0, 0.0], [2.0, 1.0, 1.0, 1.0]]).unsqueeze(-1)
    rollout = TensorDict(
        {
            "chosen_action_value": q,
            "next": {
                "reward": reward,
                "done": terminated | truncated,
                "terminated": terminated,
                "truncated": truncated,
            },
        },
        batch_size=[2, 4],
    )
    gamma = 0.5
    out = rollout_metrics(rollout, "deterministic", value_gamma=gamma)
    assert out["eval/deterministic/episodes_ended"] == 0.5  # the time limit is no ending
    assert out["eval/deterministic/start_q_mean"] == pytest.approx(4.0)
    first = 1 + gamma + 5 * gamma**2  # 2.75
    second = 1 + gamma + gamma**2 + gamma**3  # 1.875
    gap = ((first - 6.0) + (second - 2.0)) / 2
    assert out["eval/deterministic/value_gap_mean"] == pytest.approx(gap)
    plain = rollout_metrics(rollout, "deterministic")  # no discount given: no value check
    assert "eval/deterministic/value_gap_mean" not in plain
    assert plain["eval/deterministic/reward/episode_reward_mean"] == pytest.approx((7 + 4) / 2)
