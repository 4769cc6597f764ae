"""``xdrl-report`` on an Optuna search's sweep dir (issue 37): ``study.md`` (every trial best
first, its seeds, pruning notes, importances) and ``study-params.png`` (the objective against each
parameter) beside the study, read back from ``optuna.db``."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from xdrl.report.cli import _report_studies
from xdrl.report.study import plot_params, report_study

DISTS = {
    "lr": FloatDistribution(1e-4, 1e-2, log=True),
    "clip": FloatDistribution(0.1, 0.3),
    "epochs": CategoricalDistribution([1, 2, 4]),
}


def _study(folder: Path) -> optuna.Study:
    """Five complete trials (value = 100 * epochs + 1000 * clip), one pruned at 2,048 frames."""
    study = optuna.create_study(
        study_name="search", storage=f"sqlite:///{folder / 'optuna.db'}", direction="maximize"
    )
    for n, (lr, clip, epochs) in enumerate(
        [(1e-3, 0.1, 1), (3e-4, 0.2, 2), (5e-3, 0.3, 4), (2e-3, 0.15, 2), (1e-4, 0.25, 1)]
    ):
        study.add_trial(create_trial(
            params={"lr": lr, "clip": clip, "epochs": epochs}, distributions=DISTS,
            value=100 * epochs + 1000 * clip, user_attrs={"seed_values": {"0": float(n)}},
        ))  # fmt: skip
    study.add_trial(create_trial(
        state=TrialState.PRUNED, params={"lr": 1e-2, "clip": 0.1, "epochs": 1},
        distributions=DISTS, intermediate_values={2048: 5.0},
        user_attrs={"pruned_at_frames": 2048},
    ))  # fmt: skip
    return study


def test_report_study_writes_the_trials_best_first_and_the_parameter_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _study(tmp_path)
    recheck = "| trial | search value | re-check value |\n| --- | --- | --- |\n| 2 | 700 | 610 |\n"
    (tmp_path / "recheck.md").write_text("# Re-check of the best trials\n\n" + recheck)
    _report_studies([tmp_path])
    assert capsys.readouterr().out == (
        f"Optuna study: wrote {tmp_path / 'study.md'}, {tmp_path / 'study-params.png'}\n"
    )
    text = (tmp_path / "study.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "|" in line[2:]]
    trials = [r.split(" | ")[0] for r in rows if r.split(" | ")[1] in ("complete", "pruned")]
    # values by hand: 400+300, 200+200, 200+150, 100+250, 100+100; the pruned trial last
    assert trials == ["| 2", "| 1", "| 3", "| 4", "| 0", "| 5"]
    assert "pruned at 2,048 frames" in text
    assert "| parameter | importance (fANOVA) |" in text
    assert text.endswith("## Re-check on test seeds\n\n" + recheck)  # the sweeper's table
    png = (tmp_path / "study-params.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "study-pareto.png").exists()  # one objective: no Pareto picture


def test_a_folder_without_a_study_or_without_complete_trials_gets_no_study_files(
    tmp_path: Path,
) -> None:
    assert report_study(tmp_path) == []
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    study.add_trial(create_trial(state=TrialState.FAIL, params={}, distributions={}))
    assert plot_params(study, tmp_path / "study-params.png") is None
    assert report_study(tmp_path) == [tmp_path / "study.md"]
