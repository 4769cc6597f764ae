"""The results page agrees with its data: docs/results.md's generated table is what the committed
data files in benchmarks/results/ give, every preset with data has its figure, drawn from that
data (the data's hash in the SVG's metadata), and no figure is left without data. The table's
numbers are checked against values computed here by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmarks.results import data, page
from benchmarks.results.data import Reference, Result, SeedResult, Segment

REPO = Path(__file__).resolve().parents[1]


def test_the_page_table_is_the_one_the_committed_data_gives() -> None:
    committed = page.section_of(page.PAGE.read_text())
    generated = page.table(data.load_all(), data.load_references())
    assert committed == generated, (
        "docs/results.md's table differs from benchmarks/results/*.json: run "
        "`python -m benchmarks.results page` and commit the result"
    )


def test_readme_table_is_the_one_the_committed_data_gives() -> None:
    committed = page.section_of(page.README.read_text())
    generated = page.summary_table(data.load_all(), data.load_references())
    assert committed == generated, (
        "README's results table differs from benchmarks/results/*.json: run "
        "`python -m benchmarks.results page` and commit the result"
    )
    for preset, by_contender in data.load_all().items():  # independent of summary_table's code
        for result in by_contender.values():
            finals = " / ".join(f"{v:,.1f}" for v in result.finals)
            assert f"`{preset}`" in committed and finals in committed


def test_every_preset_with_data_has_its_figure_drawn_from_that_data() -> None:
    results, refs = data.load_all(), data.load_references()
    for preset, by_contender in results.items():
        figure = page.FIGURES / f"{preset}.svg"
        assert figure.is_file(), f"{figure} is missing: run `python -m benchmarks.results page`"
        assert page.figure_hash(figure) == page.data_hash(by_contender, refs.get(preset, [])), (
            f"{figure} was drawn from other data: run `python -m benchmarks.results page`"
        )
    figures = {p.stem for p in page.FIGURES.glob("*.svg")} if page.FIGURES.is_dir() else set()
    assert figures <= set(results), f"figures without data: {sorted(figures - set(results))}"


def test_every_data_file_reads_back_to_its_own_text() -> None:
    for path in sorted(data.DATA_DIR.glob("*.json")):
        result = data.load(path)
        assert data.dumps(result) == path.read_text(), path
        assert path == data.data_path(result.preset, result.contender)


def test_every_reference_names_its_source_budget_and_env() -> None:
    refs = data.load_references()
    for preset in ("hopper_ppo", "walker2d_ppo", "halfcheetah_ppo", "lunarlander_dqn"):
        assert refs[preset], preset
    assert [(r.source, r.value) for r in refs["hopper_ppo"]] == [
        ("RL-Zoo", 2410.435),
        ("CleanRL", 2382.86),
    ]
    assert refs["lunarlander_dqn"][0].budget_frames == 100_000
    for entries in refs.values():
        for ref in entries:
            assert ref.url.startswith("https://") and ref.env and ref.budget_frames > 0


def _result(finals: list[float], contender: str = "xdrl", preset: str = "hopper_ppo") -> Result:
    seeds = [
        SeedResult(
            seed=i,
            command=f"xdrl-train experiment={preset} seed={i} num_threads=1 logging=csv",
            frames=100_352,
            final=v,
            final_episodes=10,
            final_source="run",
            curve=[[0, 10.0 * i], [50_000, v / 2], [100_352, v]],
            wall_time_s=600.0 + i,
            segments=[Segment([0, 100_352], "2026-11-28T10:00:00Z", 600.0 + i, "completed")],
        )
        for i, v in enumerate(finals)
    ]
    return Result(
        preset=preset,
        contender=contender,
        env="Hopper-v5",
        algorithm="ppo",
        budget_frames=1_000_000,
        frames=100_000,
        command=f"python -m benchmarks --mode results --preset {preset} --frames 100000",
        code={"commit": "0123456789ab", "dirty": False},
        machine={"cpu": "AMD EPYC", "cores": 2},
        seeds=seeds,
    )


REF = Reference("CleanRL", "https://example.org/ppo.md", 2382.86, 1_000_000, "Hopper-v4", 271.74)


def _cells(section: str, contender: str) -> list[str]:
    row = next(line for line in section.splitlines() if f"| {contender} | Hopper-v5 |" in line)
    return [c.strip() for c in row.strip("|").split("|")]


def test_a_row_holds_the_seeds_the_iqm_its_interval_the_reference_and_the_budget() -> None:
    finals = [1000.0, 3000.0, 2000.0, 4000.0]
    section = page.table({"hopper_ppo": {"xdrl": _result(finals)}}, {"hopper_ppo": [REF]})
    cells = _cells(section, "xdrl")
    assert cells[3] == "100k / 1M (10%)"
    assert cells[4] == "0, 1, 2, 3"
    assert cells[5] == "1,000.0 / 3,000.0 / 2,000.0 / 4,000.0"
    # IQM of four values: the mean of the middle two (2000 and 3000)
    iqm, _, interval = cells[6].partition(" ")
    assert iqm == "2,500.0"
    low, high = (float(v.replace(",", "")) for v in interval.strip("[]").split(", "))
    assert 1000.0 <= low <= 2500.0 <= high <= 4000.0
    assert cells[7] == "[CleanRL](https://example.org/ppo.md) 2,383 ± 272 (Hopper-v4, 1M)"
    assert cells[8] == "600 / 601 / 602 / 603"
    assert "![hopper_ppo: evaluation curves](results/hopper_ppo.svg)" in section


def test_sb3_is_a_row_of_its_own_beside_xdrl() -> None:
    both = {"xdrl": _result([1.0, 2.0, 3.0]), "sb3": _result([4.0, 5.0, 6.0], "sb3")}
    section = page.table({"hopper_ppo": both}, {"hopper_ppo": [REF]})
    assert _cells(section, "sb3")[5] == "4.0 / 5.0 / 6.0"
    assert _cells(section, "sb3")[7] == "as above"
    assert section.index("| xdrl |") < section.index("| sb3 |")


def test_a_changed_value_changes_the_table_and_the_figure_hash(tmp_path: Path) -> None:
    """The check above can fail: one changed final value gives another table and hash."""
    result = _result([1000.0, 2000.0, 3000.0])
    before = page.table({"hopper_ppo": {"xdrl": result}}, {})
    hash_before = page.data_hash({"xdrl": result}, [REF])
    changed = dataclasses.replace(result, seeds=list(result.seeds))
    changed.seeds[1] = dataclasses.replace(changed.seeds[1], final=2001.0)
    assert page.table({"hopper_ppo": {"xdrl": changed}}, {}) != before
    assert page.data_hash({"xdrl": changed}, [REF]) != hash_before
    assert page.data_hash({"xdrl": result}, []) != hash_before  # the reference is drawn too


def test_generate_rewrites_only_the_section_draws_figures_and_removes_stale_ones(
    tmp_path: Path,
) -> None:
    pytest.importorskip("matplotlib")
    folder, figures = tmp_path / "data", tmp_path / "figures"
    data.write(_result([1000.0, 2000.0, 3000.0]), folder)
    data.write(_result([900.0, 1900.0, 2900.0], "sb3"), folder)
    refs = tmp_path / "references.yaml"
    refs.write_text(
        "hopper_ppo:\n  - {source: CleanRL, url: 'https://example.org', value: 2382.86,"
        " plus_minus: 271.74, budget_frames: 1000000, env: Hopper-v4}\n"
    )
    md = tmp_path / "results.md"
    md.write_text(
        f"# Results\n\nintro\n\n{page.BEGIN}\nold table\n{page.END}\n\n## History\nkept\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# xdrl\n\n{page.BEGIN}\nold\n{page.END}\n\n## Next\n")
    figures.mkdir()
    (figures / "gone_preset.svg").write_text("<svg/>")
    page.generate(folder, md, figures, refs, readme=readme)
    assert (
        "| `hopper_ppo` | " in readme.read_text()
        and "| `hopper_ppo` (sb3) | " in readme.read_text()
    )
    assert readme.read_text().endswith(f"{page.END}\n\n## Next\n")
    text = md.read_text()
    assert text.startswith("# Results\n\nintro\n\n") and text.endswith("\n## History\nkept\n")
    loaded = data.load_all(folder)
    assert page.section_of(text) == page.table(loaded, data.load_references(refs))
    assert sorted(p.name for p in figures.iterdir()) == ["hopper_ppo.svg"]
    svg = (figures / "hopper_ppo.svg").read_text()
    assert page.figure_hash(figures / "hopper_ppo.svg") == page.data_hash(
        loaded["hopper_ppo"], data.load_references(refs)["hopper_ppo"]
    )
    assert "CleanRL 2,383 ± 272 (Hopper-v4, 1M)" in svg and "sb3: IQM over 3 seeds" in svg


def test_a_page_without_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no generated section"):
        page.replace_section("# Results\n", "table\n")


def test_a_data_file_reads_back_equal_and_states_its_fraction(tmp_path: Path) -> None:
    result = _result([1.5, 2.5])
    path = data.write(result, tmp_path)
    assert path.name == "hopper_ppo.json"
    assert data.load(path) == result
    assert '"fraction": 0.1,' in path.read_text()
    assert "[50000, 0.75]" in path.read_text()  # one curve point per line
    assert data.data_path("hopper_ppo", "sb3", tmp_path).name == "hopper_ppo.sb3.json"
