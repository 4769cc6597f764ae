"""xdrl-eval on a deterministic multi-objective env (deep-sea-treasure, fixed start): it
reproduces the run's final deterministic evaluation, per objective too; bad input gets one
line, exit 2 and no file; checkpoint.keep_best keeps the best save through TorchRL's rotation.
On a DQN run evaluated with eval.deterministic=false: xdrl-eval follows the run's setting unless
a flag says otherwise, and a stochastic DQN evaluation is epsilon-greedy at the stated epsilon."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrl.checkpoint import Checkpoint

from tests.conftest import read_summary, run_cli, run_script
from xdrl.training.checkpointing import BEST_METRIC, CONFIG_FILE, BestRotation


def _trained(factory: pytest.TempPathFactory, name: str, *overrides: str) -> Path:
    """The run dir of one ``xdrl-train`` run with ``overrides`` (single thread)."""
    root = factory.mktemp(name)
    run_dir = root / "run"
    result = run_cli([*overrides, "num_threads=1", f"hydra.run.dir={run_dir}"], cwd=root)
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def dst_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _trained(
        tmp_path_factory,
        "dst",
        "env=deep_sea_treasure",
        "total_frames=1024",
        "frames_per_batch=256",
        "env.num_envs=4",
        "eval.interval_frames=512",
        "eval.episodes=3",
        "eval.max_steps=100",
        "checkpoint.interval_frames=512",
    )


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short DQN CartPole run whose evaluation is stochastic only (eval.deterministic=false)."""
    return _trained(
        tmp_path_factory,
        "dqn",
        "algorithm=dqn",
        "env=cartpole",
        "total_frames=512",
        "frames_per_batch=256",
        "env.num_envs=4",
        "algorithm.build.init_random_frames=256",
        "eval.interval_frames=512",
        "eval.episodes=2",
        "eval.max_steps=50",
        "eval.deterministic=false",
        "eval.stochastic=true",
        "checkpoint.interval_frames=512",
    )


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
        "env value": (
            [str(dst_run), "env.max_episode_steps=abc"],
            "env.max_episode_steps: got 'abc' (str), not an integer",
        ),
        "eval value": (
            [str(dst_run), "eval.max_steps=0"],
            "eval.max_steps: got 0 (int), too small",
        ),
        "value after an option": (
            [str(dst_run), "--episodes", "2", "env.reward_weights=[1,a]"],
            "env.reward_weights",
        ),
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


def test_help_says_what_video_records(capsys: pytest.CaptureFixture[str]) -> None:
    from xdrl.policy.eval_cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--video FILE.mp4 record every episode, one after another" in text
    assert "first episode" not in text.replace("only the first", "")


def test_xdrl_load_policy_is_public_and_imported_on_first_use() -> None:
    """``import xdrl`` alone imports no torch (tests/test_imports.py); ``xdrl.load_policy`` does."""
    code = (
        "import sys\nimport xdrl\n"
        "assert callable(xdrl.load_policy) and 'torch' in sys.modules\nprint('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def test_checkpoint_metric_only_from_an_evaluation_at_the_save() -> None:
    from types import SimpleNamespace

    from xdrl.training.build import _objective_metadata

    evaluation = SimpleNamespace(last_eval_frames=512, last_metrics={"eval/x": 3.0})
    metadata = _objective_metadata("eval/x", evaluation)  # type: ignore[arg-type]
    assert metadata(SimpleNamespace(collected_frames=512)) == {BEST_METRIC: 3.0}
    assert metadata(SimpleNamespace(collected_frames=768)) == {}  # stale: the weights moved on
    other = _objective_metadata("eval/y", evaluation)  # type: ignore[arg-type]
    assert other(SimpleNamespace(collected_frames=512)) == {}


def _record(run_dir: Path, tmp_path: Path, *args: str) -> tuple[dict, str]:
    """The ``--json`` record and stdout of ``xdrl-eval run_dir --episodes 2 *args``."""
    out = tmp_path / f"eval{len(list(tmp_path.glob('eval*.json')))}.json"
    result = _eval(str(run_dir), "--episodes", "2", *args, "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text()), result.stdout


def test_mode_follows_the_run_unless_a_flag_says_otherwise(
    dqn_run: Path, dst_run: Path, tmp_path: Path
) -> None:
    record, stdout = _record(dqn_run, tmp_path)  # eval.deterministic=false in the run
    assert record["deterministic"] is False and record["epsilon"] == 0.05
    assert record["mode_from"] == "the run's eval.deterministic=false"
    assert "2 stochastic (epsilon 0.05) episodes (the run's eval.deterministic=false)" in stdout
    record, stdout = _record(dqn_run, tmp_path, "--deterministic")
    assert record["deterministic"] is True and record["epsilon"] == 0.0
    assert record["mode_from"] == "--deterministic"
    assert "2 deterministic (greedy) episodes (--deterministic)" in stdout
    record, _ = _record(dst_run, tmp_path)  # PPO, eval.deterministic=true: no epsilon to state
    assert record["deterministic"] is True and "epsilon" not in record
    assert record["mode_from"] == "the run's eval.deterministic=true"
    record, _ = _record(dst_run, tmp_path, "--stochastic")
    assert record["deterministic"] is False and record["mode_from"] == "--stochastic"


def test_stochastic_dqn_acts_epsilon_greedy_at_the_stated_rate(dqn_run: Path) -> None:
    """Against greedy actions on 40,000 observations, the stochastic policy differs at the rate
    epsilon * (1 - 1/n_actions) = 0.05 * 1/2 (a random action hits the greedy one half the time):
    0.025 with a standard error of 0.0008, so +/- 0.006 never fails by chance; greedy: never."""
    from xdrl import load_policy

    policy = load_policy(dqn_run)
    try:
        generator = np.random.default_rng(0)
        observations = generator.normal(0.0, [1.0, 2.0, 0.2, 2.0], (40_000, 4)).astype(np.float32)
        torch.manual_seed(0)
        greedy = policy(observations)
        stochastic = policy(observations, deterministic=False)
        assert np.array_equal(policy(observations), greedy)
    finally:
        policy.close()
    assert abs(float(np.mean(stochastic != greedy)) - 0.05 * (1 - 1 / 2)) < 0.006


def test_overrides_anywhere_on_the_line(dqn_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "cut.json"
    result = _eval(
        str(dqn_run), "--episodes", "2", "env.max_episode_steps=5", "--deterministic",
        "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # CartPole needs 8 steps or more to drop the pole: every episode is cut at 5
    assert json.loads(out.read_text())["lengths"] == [5, 5]


def _unwritable_folder(tmp_path: Path) -> Path:
    """A folder no file can be created in: read-only by its mode bits, or, for root (who
    ignores them), a kernel folder that refuses new files."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    for candidate in (folder, Path("/sys"), Path("/proc")):
        try:
            (candidate / "probe").touch()
        except OSError:
            return candidate
        (candidate / "probe").unlink()
    pytest.skip("no folder here refuses a new file")


@pytest.mark.parametrize(
    ("script", "option", "name"),
    [
        ("xdrl-eval", "--json", "eval.json"),
        ("xdrl-eval", "--video", "eval.mp4"),
        ("xdrl-export", "--out", "policy.pt2"),
    ],
)
def test_unwritable_output_one_line_exit_2(
    dst_run: Path, tmp_path: Path, script: str, option: str, name: str
) -> None:
    if option == "--video":
        pytest.importorskip("imageio_ffmpeg")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = {
        _unwritable_folder(tmp_path) / name: "cannot write into",
        blocker / name: "is a file, not a folder",
        tmp_path: "is a folder; name a file",
    }
    extra = ["--format", "pt2"] if script == "xdrl-export" else []
    for target, expected in cases.items():
        before = sorted(os.listdir(target.parent)) if target.parent.is_dir() else None
        result = run_script(script, [str(dst_run), *extra, option, str(target)], tmp_path)
        lines = [ln for ln in result.stderr.splitlines() if "Warning" not in ln]
        assert result.returncode == 2 and len(lines) == 1, (target, result.stderr)
        assert lines[0].startswith(f"{script}: config error: {option}: "), lines
        assert expected in lines[0], lines
        if before is not None:
            assert sorted(os.listdir(target.parent)) == before  # nothing written, probe removed


def test_a_run_saved_without_eval_epsilon_evaluates_at_the_default(
    dqn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old"
    shutil.copytree(dqn_run, old)
    configs = [old / ".hydra" / "config.yaml", *old.glob("checkpoints/*/" + CONFIG_FILE)]
    for config in configs:
        text = config.read_text()
        assert "eval_epsilon: 0.05" in text
        config.write_text("".join(ln for ln in text.splitlines(True) if "eval_epsilon" not in ln))
        sums = config.parent / "checksums.json"  # as the run would have saved it then
        if sums.is_file():
            recorded = json.loads(sums.read_text())
            data = config.read_bytes()
            recorded["files"][CONFIG_FILE] = [len(data), hashlib.sha256(data).hexdigest()]
            sums.write_text(json.dumps(recorded))
    out = tmp_path / "old.json"
    code, stderr = _eval_in_process(capsys, str(old), "--episodes", "2", "--json", str(out))
    assert code == 0, stderr
    assert json.loads(out.read_text())["epsilon"] == 0.05  # build's default


def test_another_env_is_refused_naming_the_observation_shapes(
    dqn_run: Path, tmp_path: Path
) -> None:
    """A CartPole policy evaluated on Acrobot: one line naming both observation shapes and the
    key that changed them, not a checkpoint that "does not load"; nothing written."""
    out = tmp_path / "acrobot.json"
    result = _eval(str(dqn_run), "env.id=Acrobot-v1", "--json", str(out), cwd=tmp_path)
    lines = [ln for ln in result.stderr.splitlines() if "Warning" not in ln]
    assert result.returncode == 2 and lines == [
        "xdrl-eval: config error: env.id: Acrobot-v1 gives observations of shape (6,), the "
        "policy was trained on (4,) (CartPole-v1); evaluate on the run's env"
    ], result.stderr
    assert not out.exists()


@pytest.mark.parametrize("script", ["xdrl-eval", "xdrl-export"])
def test_a_missing_path_is_refused_before_torch_is_imported(script: str, tmp_path: Path) -> None:
    """The console script in a fresh interpreter under ``-X importtime``: one line, exit 2, and
    torch never imported (it took 3.6 s of xdrl-eval's refusal)."""
    missing = tmp_path / "no-such-run"
    command = Path(sys.executable).with_name(script)
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(command), str(missing)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    imported = [
        ln.rsplit("|", 1)[1].strip()
        for ln in result.stderr.splitlines()
        if ln.startswith("import time:") and "|" in ln
    ]
    assert "json" in imported  # the import times were recorded: the check below can fail
    assert not [m for m in imported if m.split(".")[0] in ("torch", "torchrl", "tensordict")]
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("import time:")]
    assert result.returncode == 2 and lines == [
        f"{script}: config error: RUN_DIR: {missing} is not a folder; pass a run dir of xdrl-train"
    ]
