"""A quiet, honest surface (issue 47, item 6): evaluation under ``env.frame_skip`` returns what
gymnasium returns, typo hints from the chosen algorithm, one speed figure, repeated seeds in a
report, warnings for settings that cannot help, refusals that name their key."""

from __future__ import annotations

import json
import logging
import re
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium
import pytest
import torch
from tensordict.nn import TensorDictModule

from tests.conftest import read_summary, run_cli, run_script
from xdrl.config.check import check_config
from xdrl.envs.factory import make_env
from xdrl.lean.collector import fast_rollouts
from xdrl.trainer_hooks.logging.evaluation_metrics import episodes, evaluation_rollout


# Evaluation with env.frame_skip
def _lean_right(observation: torch.Tensor) -> torch.Tensor:
    """Push the cart toward the pole's lean: CartPole falls after 20-40 frames."""
    return (observation[..., 2] > 0).long()


def _gymnasium_returns(num_envs: int, seed: int, frame_skip: int) -> list[float]:
    """Each sub-env's first-episode return, with plain gymnasium: the action is chosen every
    ``frame_skip`` frames and rewards are summed until ``terminated`` (or the time limit)."""
    returns = []
    for i in range(num_envs):
        env = gymnasium.make("CartPole-v1")
        env.reset(seed=seed + i)  # the env's set_seed
        observation, _ = env.reset()  # the evaluation's reset
        total, done = 0.0, False
        while not done:
            action = int(_lean_right(torch.as_tensor(observation)))
            for _ in range(frame_skip):
                observation, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
                if done:
                    break
        returns.append(total)
    return returns


@pytest.mark.parametrize("batching", ["vector", "serial"])
def test_frame_skip_evaluation_returns_what_gymnasium_returns(batching: str) -> None:
    """Every evaluation env steps each frame once and stops at ``terminated``: a return under
    ``frame_skip=2`` is gymnasium's sum of rewards up to termination, and gymnasium never warns
    of a step after ``terminated`` (TorchRL wrapped xdrl's vector env in a second frame skip, so
    each agent step took 4 frames and ran past the episode's end)."""
    n, seed, skip = 4, 3, 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gymnasium's warning and TorchRL's nested-env note
        env = make_env("CartPole-v1", num_envs=n, batching=batching, frame_skip=skip, seed=seed)
        if batching == "serial":  # SerialEnv seeds its sub-envs its own way; VectorGymEnv seed + i
            for i, sub in enumerate(env.base_env._envs):
                sub.set_seed(seed + i)
        env = fast_rollouts(env)
        policy = TensorDictModule(_lean_right, in_keys=["observation"], out_keys=["action"])
        rollout = evaluation_rollout(env, policy, 1000, deterministic=True)
    found = episodes(rollout)
    expected = _gymnasium_returns(n, seed, skip)
    assert found.returns.tolist() == expected
    assert bool(found.terminated.all())
    assert any(r % skip for r in expected)  # an episode ended inside an agent step's frames


def test_frame_skip_run_steps_two_frames_per_agent_step(tmp_path: Path) -> None:
    """``xdrl-train env.frame_skip=2``: no gymnasium warning of a step after ``terminated``, no
    TorchRL note of a nested env, and each evaluation episode's CartPole return (one per frame)
    is two frames per agent step, the last step possibly one (it was four: 76.2 over 19.4)."""
    run_dir = tmp_path / "run"
    args = ["env.frame_skip=2", "total_frames=1024", "frames_per_batch=256", "env.num_envs=4",
            "eval.episodes=4", "checkpoint=none", f"run_dir={run_dir}"]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "step()" not in result.stderr and "Nested TransformedEnvs" not in result.stderr
    final = read_summary(run_dir)["eval"]
    steps = final["eval/deterministic/episode_len_mean"]
    ret = final["eval/deterministic/reward/episode_reward_mean"]
    assert 2 * steps - 1 <= ret <= 2 * steps, (ret, steps)


# Typo hints from the chosen algorithm
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["algorithm=dqn", "algorithm.build.recurrent=gru"],
            "algorithm.build.recurrent: dqn does not support recurrent policies yet (ppo and a2c "
            "do); use algorithm=ppo or a2c, or remove the key",
        ),
        (
            ["algorithm=dqn", "+algorithm.build.recurrent=gru"],
            "algorithm.build.recurrent: dqn does not support recurrent policies yet (ppo and a2c "
            "do); use algorithm=ppo or a2c, or remove the key",
        ),
        (
            ["algorithm=dqn", "algorithm.build.q_cels=[8]"],
            "algorithm.build.q_cels: not a config key; did you mean algorithm.build.q_cells?",
        ),
        (
            ["algorithm.build.q_cells=[8]"],  # PPO has no Q-network
            "algorithm.build.q_cells: not a config key; did you mean algorithm.build.actor_cells?",
        ),
    ],
)
def test_a_typo_hint_comes_from_the_chosen_algorithm(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """Hints name the chosen builder's own parameters (they came from PPO's keys under
    ``algorithm=dqn``: ``q_cels`` got ``actor_cells``, ``recurrent`` got itself back)."""
    result = run_cli(args, cwd=tmp_path, timeout=120)
    assert (result.returncode, result.stderr.strip()) == (2, f"xdrl-train: config error: {line}")


# One speed figure
def test_progress_line_and_summary_agree_on_speed_with_workers(tmp_path: Path) -> None:
    """The progress line's fps and summary.json's ``frames_per_second`` come from one clock
    (start of training to the end of the last batch): with workers summary.json also counted
    the final checkpoint and stopping the workers (1,162 fps against the line's 4,606)."""
    run_dir = tmp_path / "run"
    args = ["collector=multiprocess", "collector.workers=2", "total_frames=4096", "eval=none",
            f"run_dir={run_dir}"]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    last = [line for line in result.stdout.splitlines() if line.startswith("progress:")][-1]
    fps = int(re.search(r"\| ([\d,]+) fps \|", last).group(1).replace(",", ""))
    summary = read_summary(run_dir)
    assert abs(summary["frames_per_second"] - fps) <= 1, (last, summary["frames_per_second"])
    assert summary["frames_per_second"] == pytest.approx(4096 / summary["train_time_s"], rel=1e-3)


# Repeated seeds in a report
def test_a_repeated_seed_is_averaged_once_and_flagged(tmp_path: Path, capsys) -> None:
    """Two completed runs of one seed are one sample: the report averages the first (by folder
    name, whatever its value), lists the other as not averaged and warns on stderr (it averaged
    both as independent, narrowing the interval)."""
    from tests.test_report import fake_run
    from xdrl.report.cli import main as report_main

    fake_run(tmp_path, "0_seed0", seed=0, overrides=[], history=[(0, 1.0), (1000, 30.0)])
    fake_run(tmp_path, "1_seed1", seed=1, overrides=[], history=[(0, 1.0), (1000, 50.0)])
    history = [(0, 1.0), (1000, 90.0)]
    again = fake_run(tmp_path, "2_seed0_again", seed=0, overrides=[], history=history)
    assert report_main([str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (group,) = report["groups"]
    assert (group["runs"], group["seeds"]) == (2, [0, 1])
    assert group["final"]["mean"] == pytest.approx(statistics.mean([30.0, 50.0]))
    row = next(line for line in (tmp_path / "report" / "report.md").read_text().splitlines()
               if "`2_seed0_again`" in line)  # fmt: skip
    assert "repeated seed 0 (as 0_seed0): not averaged" in row
    err = capsys.readouterr().err
    assert f"xdrl-report: warning: all runs: {again}: repeated seed 0" in err


# Settings that cannot help: one warning line each, the run goes on
@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["num_threads=64"],
            "num_threads=64 is more than the 2 cores this process may use: torch's threads wait "
            "for each other's cores (64 on 2 cores ran 14x slower); set num_threads=auto, or at "
            "most 2",
        ),
        (
            ["env.num_envs=4", "collector.env_threads=100"],
            "collector.env_threads=100 is more than the 4 envs the run steps: the extra threads "
            "idle; set collector.env_threads=4 at most",
        ),
        (
            ["collector=multiprocess", "collector.workers=2", "collector.env_threads=8"],
            "collector.env_threads=8 is more than the 4 envs each worker steps: the extra "
            "threads idle; set collector.env_threads=4 at most",
        ),
        (
            ["collector=multiprocess", "collector.workers=2", "env.batching=parallel"],
            "env.batching=parallel inside collector.backend=process starts a process per env in "
            "every worker (2 worker processes, each with 4 env processes; 11 processes on 2 cores "
            "took 66 s to start): set env.batching=vector or serial, the workers already run in "
            "parallel",
        ),
    ],
)
def test_settings_that_cannot_help_warn_and_the_run_goes_on(
    make_cfg, monkeypatch, caplog, overrides: list[str], line: str
) -> None:
    """Accepted silently before: ``num_threads=64`` on 2 cores (14x slower), more env threads
    than envs, a process per env inside each worker process (11 processes on 2 cores)."""
    import xdrl.config.check

    monkeypatch.setattr(xdrl.config.check, "_usable_cores", lambda: 2)
    caplog.set_level(logging.WARNING, logger="xdrl")
    spec = check_config(make_cfg(*overrides))
    assert spec is not None
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [line]


def test_evaluation_cut_by_max_steps_warns_once(tmp_path: Path) -> None:
    """``eval.max_steps=1`` reported CartPole's return as 1.0 and said nothing: the evaluation
    now says its episodes were cut (once per run, though it evaluates twice)."""
    run_dir = tmp_path / "run"
    args = ["total_frames=512", "frames_per_batch=256", "env.num_envs=4", "eval.episodes=3",
            "eval.max_steps=1", "checkpoint=none", f"run_dir={run_dir}"]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stdout.splitlines() if "had not ended" in line]
    assert len(warned) == 1, result.stdout
    assert warned[0].endswith(
        "eval/deterministic: 3 of 3 episodes had not ended after eval.max_steps=1 steps: their "
        "returns are partial; raise eval.max_steps to the env's time limit"
    )
    assert read_summary(run_dir)["eval"]["eval/deterministic/reward/episode_reward_mean"] == 1.0


# Library noise
def test_known_library_notes_stay_off_stderr(tmp_path: Path) -> None:
    """TorchRL's VecNormV2 "experimental" note (twice per ``cartpole_novel_lstm`` run, again in
    xdrl-eval and xdrl-export) is filtered by its message where the process is set up; the
    evaluation and export still run and write what they write."""
    run_dir = tmp_path / "run"
    train = run_cli(["experiment=cartpole_novel_lstm", "total_frames=256", "eval.episodes=2",
                     f"run_dir={run_dir}"], cwd=tmp_path)  # fmt: skip
    assert train.returncode == 0, train.stderr
    evaluated = run_script("xdrl-eval", [str(run_dir), "--episodes", "2"], cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    out = tmp_path / "policy.pt"
    exported = run_script("xdrl-export", [str(run_dir), "--format", "torchscript", "--out",
                                          str(out)], cwd=tmp_path)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert out.is_file()
    for result in (train, evaluated, exported):
        assert "VecNormV2" not in result.stderr, result.stderr


def test_the_ale_banner_stays_off_stderr() -> None:
    """ale-py printed "A.L.E: Arcade Learning Environment ... [Powered by Stella]" on stderr
    once per worker process; xdrl's registration sets its logger to warnings."""
    pytest.importorskip("ale_py")
    code = ("from xdrl.envs.factory import register_ale; register_ale(); import gymnasium; "
            "gymnasium.make('ALE/Pong-v5', frameskip=1).close()")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "A.L.E" not in result.stderr and "Stella" not in result.stderr, result.stderr


# Refusals that say what they are about
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["experiment=cartpole_novel_lstm", "algorithm=a2c"],
            "algorithm.build.clip_schedule: not a parameter of xdrl.algorithms.a2c.build; the "
            "config sets clip_schedule: a parameter of ppo, not of a2c (a preset written for "
            "another algorithm?); remove it (~algorithm.build.clip_schedule) or use algorithm=ppo",
        ),
        (
            ["experiment=cartpole_ppo", "algorithm=sac"],
            "algorithm.build.lmbda: not a parameter of xdrl.algorithms.sac.build; the config sets "
            "lmbda, epochs, minibatch_size: parameters of a2c and ppo, not of sac (a preset "
            "written for another algorithm?); remove them (~algorithm.build.lmbda "
            "~algorithm.build.epochs ~algorithm.build.minibatch_size) or use algorithm=a2c or ppo",
        ),
        (  # warm-up 1,024 frames in batches of 256: 10,240 = 40 batches; 1,024 trains one batch
            ["experiment=cartpole_dqn", "total_frames=100"],
            "total_frames: 100 frames end inside the random warm-up "
            "(algorithm.build.init_random_frames=1024), so no optimizer step would run; set e.g. "
            "total_frames=10240 (the warm-up 10% of the run; 1024 would train on its last batch "
            "only), or algorithm.build.init_random_frames=256 or less",
        ),
    ],
)
def test_a_refusal_names_its_key_and_a_fix_that_trains(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """A preset's keys that the chosen algorithm lacks are named as the preset's (A2C's
    parameter list said nothing of PPO's ``clip_schedule``); the warm-up refusal suggests a
    budget that trains, not the warm-up itself (one round of updates)."""
    result = run_cli(args, cwd=tmp_path, timeout=120)
    assert (result.returncode, result.stderr.strip()) == (2, f"xdrl-train: config error: {line}")


# Definitions
def test_every_evaluation_metric_is_defined_in_the_metrics_page() -> None:
    """``episodes_ended`` (and the value-based keys) were defined only on the Pareto page."""
    from xdrl.trainer_hooks.logging import _common

    names = [_common.EPISODE_LEN_NAME, _common.EPISODES_ENDED_NAME, _common.START_Q_NAME,
             _common.VALUE_GAP_NAME]  # fmt: skip
    page = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    (row,) = [line for line in page.splitlines() if line.startswith("| `eval/")]
    assert [name for name in names if f"`{name}`" not in row] == []
    assert f"`{_common.EPISODES_ENDED_NAME}` is the fraction" in page


@pytest.mark.parametrize(
    ("low", "high"), [(1e-4, 1.5e-4), (2e-4, 3e-3), (1e-4, 8e-4), (1e-5, 1e-1)]
)
def test_the_study_plot_labels_a_log_axis_without_overlap(low: float, high: float) -> None:
    """A log-scaled parameter spanning about a decade or less got matplotlib's minor-tick labels
    (``3x10^-4`` over ``4x10^-4``); now two to four labels that do not touch."""
    pytest.importorskip("optuna")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.trial import create_trial

    from xdrl.report.study import params_figure

    dists = {"lr": FloatDistribution(low, high, log=True), "clip": FloatDistribution(0.1, 0.3)}
    study = optuna.create_study(direction="maximize")
    for i in range(7):
        lr = low * (high / low) ** (i / 6)
        study.add_trial(create_trial(params={"lr": lr, "clip": 0.1 + 0.03 * i},
                                     distributions=dists, value=float(i)))  # fmt: skip
    fig = params_figure(study)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = [a for a in fig.axes if a.get_xlabel() == "lr"]
    labels = [t for t in ax.get_xticklabels(which="both") if t.get_visible() and t.get_text()]
    left, right = ax.get_window_extent(renderer).x0, ax.get_window_extent(renderer).x1
    boxes = sorted(
        (box.x0, box.x1)
        for box in (t.get_window_extent(renderer) for t in labels)
        if left - 1 <= (box.x0 + box.x1) / 2 <= right + 1
    )
    plt.close(fig)
    assert 2 <= len(boxes) <= 4, [t.get_text() for t in labels]
    assert all(b[0] > a[1] for a, b in zip(boxes, boxes[1:], strict=False)), boxes


@pytest.mark.slow  # worker processes, a stop and a resume (43 s of make test on 2 cores)
def test_workers_do_not_each_print_the_approximate_resume_note(tmp_path: Path) -> None:
    """With ``env.batching=parallel`` inside worker processes each worker printed "A resume
    from this run's checkpoints will be approximate" bare on stderr (twice with two workers);
    the combination now gets one warning line naming the settings, prefixed as the command's
    errors are."""
    run_dir = tmp_path / "run"
    args = ["collector=multiprocess", "collector.workers=2", "env.batching=parallel",
            "env.num_envs=4", "total_frames=512", "frames_per_batch=256", "eval=none",
            f"run_dir={run_dir}"]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "will be approximate" not in result.stderr, result.stderr
    line = "xdrl-train: warning: env.batching=parallel inside collector.backend=process"
    assert result.stderr.count(line) == 1, result.stderr
