"""``lean=false``: the run built from TorchRL's originals instead of xdrl's lean pieces.

End to end: ``xdrl-train`` runs ``cartpole_ppo`` and ``cartpole_dqn`` (tiny budgets) with and
without it, same seed. Both write the same metrics at the same frames; the ``lean=false`` run
built TorchRL's classes (the pieces it names in its log, and what its checkpoint holds); the
numbers agree where the two paths compute the same thing; evaluation, export and resume work on
the ``lean=false`` run, and a resume may not switch ``lean``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import read_scalars, read_summary, run_cli, run_script

PPO = [
    "experiment=cartpole_ppo",
    "total_frames=512",  # two batches of 256
    "algorithm.build.epochs=1",  # one whole-batch step per batch: both trainers log that step
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=50",
]
DQN = [
    "experiment=cartpole_dqn",
    "total_frames=1024",
    "algorithm.build.init_random_frames=512",
    "eval.interval_frames=512",
    "eval.episodes=2",
    "eval.max_steps=50",
]
RUNS = {"ppo": PPO, "dqn": DQN}
# What each run must report building (the class names of the objects, as built)
PIECES = {
    ("ppo", True): {
        "collector": "VectorCollector",
        "loss": "LeanClipPPOLoss",
        "advantage": "StackedValueGAE",
        "replay": "WholeBatch",
        "trainer": "XdrlTrainer",
        "step": "FusedAdamStep",
    },
    ("ppo", False): {
        "collector": "Collector",
        "loss": "ClipPPOLoss",
        "advantage": "ValueEstimatorHook",
        "replay": "TensorDictReplayBuffer",
        "trainer": "ScheduledSaveTrainer",
        "step": "optimizer.step()",
    },
    ("dqn", True): {
        "collector": "VectorCollector",
        "policy": "EpsilonGreedyQPolicy",
        "loss": "LeanDQNLoss",
        "replay": "LeanReplayBuffer",
        "target": "LeanHardUpdate",
        "trainer": "XdrlTrainer",
        "step": "FusedAdamStep",
    },
    ("dqn", False): {
        "collector": "Collector",
        "policy": "TensorDictSequential",
        "loss": "DQNLoss",
        "replay": "TensorDictReplayBuffer",
        "target": "HardUpdate",
        "trainer": "ScheduledSaveTrainer",
        "step": "optimizer.step()",
    },
}


def _train(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    return run_cli([*overrides, "num_threads=1", f"hydra.run.dir={run_dir}"], cwd=run_dir.parent)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], tuple[Path, str]]:
    """``{(algorithm, lean): (run dir, output)}`` of the four runs, same seed."""
    out = {}
    for name, overrides in RUNS.items():
        for lean in (True, False):
            run_dir = tmp_path_factory.mktemp(f"{name}-{lean}") / "run"
            result = _train(run_dir, *overrides, f"lean={str(lean).lower()}")
            assert result.returncode == 0, result.stderr[-2000:]
            out[name, lean] = (run_dir, result.stdout + result.stderr)
    return out


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    return {k: v for k, v in read_scalars(run_dir / "logs").items() if not k.startswith("timers/")}


def _pieces(output: str) -> dict[str, str]:
    line = re.search(r"Pieces \(lean=\w+\): (.*)", output)
    assert line is not None, output[-2000:]
    return dict(piece.split(" ", 1) for piece in line.group(1).split(", "))


@pytest.mark.parametrize("name", list(RUNS))
def test_both_write_the_same_metrics_at_the_same_frames(runs, name: str) -> None:
    lean, torchrl = _scalars(runs[name, True][0]), _scalars(runs[name, False][0])
    assert sorted(lean) == sorted(torchrl)
    assert any(key.startswith("train/") for key in lean)
    for key in lean:
        assert [s for s, _ in lean[key]] == [s for s, _ in torchrl[key]], key
    for key in [k for k in lean if k.startswith("counters/")] + ["train/agents/optim_steps"]:
        assert lean[key] == torchrl[key], key


@pytest.mark.parametrize(("name", "lean"), list(PIECES))
def test_each_run_names_the_classes_it_built(runs, name: str, lean: bool) -> None:
    pieces = _pieces(runs[name, lean][1])
    assert {k: pieces.get(k) for k in PIECES[name, lean]} == PIECES[name, lean]


def _checkpoint(run_dir: Path) -> Path:
    return max((run_dir / "checkpoints").glob("checkpoint-*"))


def test_torchrl_buffers_hold_what_torchrl_stores(runs) -> None:
    """The checkpoints show the buffers' classes at work, whatever a log line says: TorchRL's
    replay buffer stores whole transitions (``step_count`` too), xdrl's only the loss's keys;
    TorchRL's minibatch sampler has a state, xdrl's whole-batch minibatch none."""
    storage = "components/*-replay_buffer/storage/step_count.memmap"
    assert not list(_checkpoint(runs["dqn", True][0]).glob(storage))
    assert list(_checkpoint(runs["dqn", False][0]).glob(storage))
    sampler = "components/*-trainer_module.minibatch_sampler"
    assert not list(_checkpoint(runs["ppo", True][0]).glob(sampler))
    assert list(_checkpoint(runs["ppo", False][0]).glob(sampler))


def test_ppo_first_batch_is_the_same(runs) -> None:
    """Same seed: TorchRL's ``Collector`` collects the first batch ``VectorCollector`` does,
    ``ClipPPOLoss`` on TorchRL's GAE gives the losses of ``LeanClipPPOLoss`` on xdrl's (float
    rounding: the whole batch comes permuted out of TorchRL's buffer), and the untrained policy
    evaluates the same. Later batches differ: that permutation draws from the torch RNG the
    next batch's actions are sampled from."""
    lean, torchrl = _scalars(runs["ppo", True][0]), _scalars(runs["ppo", False][0])
    first = 256
    for key in lean:
        a, b = dict(lean[key]), dict(torchrl[key])
        if key.startswith("collection/"):
            assert a[first] == b[first], key
        elif key.startswith("train/"):
            assert b[first] == pytest.approx(a[first], rel=1e-5, abs=1e-6), key
        elif key.startswith("eval/"):
            assert a[0] == b[0], key


def test_dqn_starts_from_the_same_networks(runs) -> None:
    """Same seed, same networks: the evaluation before training agrees. The runs part after it:
    TorchRL's ``Collector`` runs the exploration module once when built (a dry run that draws
    random numbers), so its random warm-up actions differ from ``VectorCollector``'s."""
    lean, torchrl = _scalars(runs["dqn", True][0]), _scalars(runs["dqn", False][0])
    evals = [k for k in lean if k.startswith("eval/")]
    assert evals
    for key in evals:
        assert lean[key][0] == torchrl[key][0], key
        assert lean[key][0][0] == 0


def test_eval_and_export_read_a_lean_false_run(runs, tmp_path: Path) -> None:
    run_dir = runs["ppo", False][0]
    out = tmp_path / "eval.json"
    result = run_script("xdrl-eval", [str(run_dir), "--episodes", "2", "--json", str(out)])
    assert result.returncode == 0, result.stderr[-2000:]
    final = read_summary(run_dir)["eval"]["eval/deterministic/reward/episode_reward_mean"]
    assert json.loads(out.read_text())["return_mean"] == pytest.approx(final, abs=1e-4)
    exported = tmp_path / "policy.pt2"
    result = run_script("xdrl-export", [str(run_dir), "--format", "pt2", "--out", str(exported)])
    assert result.returncode == 0, result.stderr[-2000:]
    assert exported.stat().st_size > 0


def _budget(overrides: list[str], frames: int) -> list[str]:
    return [o for o in overrides if not o.startswith("total_frames=")] + [f"total_frames={frames}"]


def test_a_lean_false_run_resumes(runs, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(runs["dqn", False][0], run_dir)  # the other tests read the original
    result = _train(run_dir, *_budget(DQN, 1280), "lean=false")
    assert result.returncode == 0, result.stderr[-2000:]
    assert read_summary(run_dir)["total_frames"] == 1280
    assert "Resume is exact" in result.stdout + result.stderr
    assert dict(_scalars(run_dir)["counters/total_frames"])[1280] == 1280


@pytest.mark.parametrize(("name", "lean"), [("ppo", True), ("ppo", False)])
def test_a_resume_may_not_switch_lean(runs, name: str, lean: bool) -> None:
    run_dir = runs[name, lean][0]
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    result = _train(run_dir, *_budget(PPO, 768), f"lean={str(not lean).lower()}")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(
        f"xdrl-train: config error: lean: {str(not lean).lower()} differs from "
        f"lean={str(lean).lower()} that "
    ), lines[0]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before


@pytest.mark.parametrize(
    ("saved", "new", "refused"),
    [(None, True, False), (None, False, True), (True, False, True), (False, True, True)],
)
def test_a_checkpoint_older_than_lean_was_trained_lean(saved, new, refused: bool) -> None:
    """A saved config without ``lean`` (written before the key) counts as ``lean: true``."""
    from xdrl.config.errors import ConfigError
    from xdrl.config.resume import config_changes, refuse_resume_changes

    old = {"seed": 0} if saved is None else {"seed": 0, "lean": saved}
    changes = config_changes(old, {"seed": 0, "lean": new})
    if refused:
        with pytest.raises(ConfigError, match=r"^lean: "):
            refuse_resume_changes(Path("checkpoint-1"), changes)
    else:
        refuse_resume_changes(Path("checkpoint-1"), changes)
