"""xdrl-eval on a deterministic multi-objective env (deep-sea-treasure, fixed start): it
reproduces the run's final deterministic evaluation, per objective too; bad input gets one
line, exit 2 and no file; checkpoint.keep_best keeps the best save through TorchRL's rotation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torchrl.checkpoint import Checkpoint

from tests.conftest import read_summary, run_cli, run_script
from xdrl.checkpointing import BEST_METRIC, BestRotation


@pytest.fixture(scope="module")
def dst_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dst")
    run_dir = root / "run"
    result = run_cli(
        [
            "env=deep_sea_treasure",
            "total_frames=1024",
            "frames_per_batch=256",
            "env.num_envs=4",
            "eval.interval_frames=512",
            "eval.episodes=3",
            "eval.max_steps=100",
            "checkpoint.interval_frames=512",
            "num_threads=1",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=root,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


def _eval(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_script("xdrl-eval", list(args), cwd)


def test_eval_reproduces_final_evaluation_per_objective(dst_run: Path, tmp_path: Path) -> None:
    final = read_summary(dst_run)["eval"]
    out = tmp_path / "eval.json"
    result = _eval(str(dst_run), "--episodes", "3", "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text())
    base = "eval/deterministic/reward"
    assert record["return_mean"] == pytest.approx(final[f"{base}/episode_reward_mean"], abs=1e-4)
    assert record["scalarized_return_mean"] == record["return_mean"]
    assert len(record["objective_returns"]) == 3 and len(record["objective_returns"][0]) == 2
    for i, mean in enumerate(record["objective_return_means"]):
        assert mean == pytest.approx(final[f"{base}/objective_{i}/episode_reward_mean"], abs=1e-4)
    # time objective: -1 per step, so minus the episode length
    assert [row[1] for row in record["objective_returns"]] == [-n for n in record["lengths"]]
    weighted = [0.5 * a + 0.5 * b for a, b in record["objective_returns"]]
    assert record["returns"] == pytest.approx(weighted, abs=1e-4)


def test_eval_on_another_weight_vector(dst_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    result = _eval(
        str(dst_run), "env.reward_weights=[1.0,0.0]", "--episodes", "2", "--json", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text())
    assert record["returns"] == pytest.approx([row[0] for row in record["objective_returns"]])


def _damaged_copy(dst_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(dst_run, copy)
    newest = sorted((copy / "checkpoints").glob("checkpoint-*"))[-1]
    tensor = next((newest / "components").glob("*-policy/state.pt"))
    tensor.write_bytes(tensor.read_bytes()[:10])
    return copy


def _eval_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``xdrl-eval`` run by its ``main`` (the table of bad inputs; one case stays end to end)."""
    from xdrl.policy.eval_cli import main

    try:
        code = main(list(args))
    except SystemExit as err:  # argparse's own errors
        code = int(err.code or 0)
    return code, capsys.readouterr().err


def test_bad_input_one_line_exit_2_nothing_written(
    dst_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    (empty / ".hydra").mkdir(parents=True)
    (empty / ".hydra" / "config.yaml").write_text("seed: 0\n")
    frames = sorted(int(p.name.split("-")[1]) for p in (dst_run / "checkpoints").iterdir())
    cases = {
        "not a run dir": ([str(tmp_path)], "is not a run dir"),
        "no checkpoints": ([str(empty)], "has no checkpoints"),
        "damaged": ([str(_damaged_copy(dst_run, tmp_path))], "try --checkpoint"),
        "unknown frames": ([str(dst_run), "--checkpoint", "7"], f"there are {frames[0]}"),
        "unknown key": ([str(dst_run), "env.nope=1"], "env.nope"),
        "episodes": ([str(dst_run), "--episodes", "0"], "--episodes"),
    }
    for name, (args, expected) in cases.items():
        out = tmp_path / f"{name}.json"
        if name == "not a run dir":  # the console script itself, as a user runs it
            result = _eval(*args, "--json", str(out), cwd=tmp_path)
            code, stderr = result.returncode, result.stderr
        else:
            code, stderr = _eval_in_process(capsys, *args, "--json", str(out))
        assert code == 2, (name, stderr)
        lines = [ln for ln in stderr.splitlines() if not ln.lstrip().startswith("warn")]
        lines = [ln for ln in lines if "Warning" not in ln]
        assert len(lines) == 1 and lines[0].startswith("xdrl-eval: config error:"), (name, lines)
        assert expected in lines[0], (name, lines[0])
        assert not out.exists()
    _, stderr = _eval_in_process(capsys, str(_damaged_copy(dst_run, tmp_path / "again")))
    assert "policy/state.pt" in stderr  # names the damaged file


def test_keep_best_keeps_the_best_save_beside_the_last(tmp_path: Path) -> None:
    rotation = BestRotation(tmp_path, keep_last=1, keep_best=(BEST_METRIC, "max"))
    state = {"value": 0}
    checkpoint = Checkpoint(value=_State(state))
    rotation.save(checkpoint, step=1, metadata={})  # before the first evaluation: no metric
    for step, metric in [(2, 1.0), (3, 5.0), (4, 2.0)]:
        rotation.save(checkpoint, step=step, metadata={BEST_METRIC: metric})
    kept = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert kept == ["checkpoint-000000000003", "checkpoint-000000000004"]
    assert rotation.best() == tmp_path / "checkpoint-000000000003"
    assert rotation.latest() == tmp_path / "checkpoint-000000000004"


class _State:
    def __init__(self, state: dict) -> None:
        self.state = state

    def state_dict(self) -> dict:
        return dict(self.state)

    def load_state_dict(self, state: dict) -> None:
        self.state.update(state)


def test_video_records_every_episode(dst_run: Path, tmp_path: Path) -> None:
    import imageio.v2 as imageio

    video = tmp_path / "eval.mp4"
    out = tmp_path / "eval.json"
    result = _eval(
        str(dst_run), "--episodes", "2", "--video", str(video), "--json", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text())
    frames = imageio.get_reader(str(video)).count_frames()
    # every episode from its reset frame to the step that ends it, one after another
    assert record["video"] == str(video)
    assert frames == sum(length + 1 for length in record["lengths"])


@pytest.mark.parametrize("module", ["xdrl.policy.eval_cli", "xdrl.policy.export_cli"])
def test_help_imports_no_torch(module: str) -> None:
    code = (
        f"import sys\nfrom {module} import main\ntry:\n    main(['--help'])\n"
        "except SystemExit as e:\n    assert e.code == 0\n"
        "assert 'torch' not in sys.modules, 'torch imported'\nprint('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def test_import_xdrl_stays_light_until_load_policy() -> None:
    code = (
        "import sys\nimport xdrl\nassert 'torch' not in sys.modules\n"
        "assert callable(xdrl.load_policy) and 'torch' in sys.modules\nprint('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def test_checkpoint_metric_only_from_an_evaluation_at_the_save() -> None:
    from types import SimpleNamespace

    from xdrl.build import _objective_metadata

    evaluation = SimpleNamespace(last_eval_frames=512, last_metrics={"eval/x": 3.0})
    metadata = _objective_metadata("eval/x", evaluation)  # type: ignore[arg-type]
    assert metadata(SimpleNamespace(collected_frames=512)) == {BEST_METRIC: 3.0}
    assert metadata(SimpleNamespace(collected_frames=768)) == {}  # stale: the weights moved on
    other = _objective_metadata("eval/y", evaluation)  # type: ignore[arg-type]
    assert other(SimpleNamespace(collected_frames=512)) == {}
