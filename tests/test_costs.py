"""Costs a user pays without being told: thread counts the Atari presets choose, and library
noise on stderr (VecNormV2's "experimental" note, audio-device lines from rendering).

The replay buffer's checkpoint size is tested in tests/test_replay.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import compose_config, run_cli
from xdrl.config.spec import RunSpec
from xdrl.run.threads import resolve_num_threads


@pytest.mark.parametrize("preset", ["atari_ppo", "atari_dqn"])
def test_atari_presets_leave_the_thread_count_to_auto_which_reads_the_free_cores(
    preset: str, tmp_path: Path
) -> None:
    """The Nature CNN counts as a wide network: 2 threads on 2 free cores, 1 where another job
    keeps one busy (2 threads beside a job ran Atari PPO at a tenth of its quiet speed)."""
    cfg = compose_config([f"experiment={preset}"], tmp_path / "run")
    assert cfg.num_threads == "auto"
    widths = RunSpec.of(cfg).hidden_sizes
    assert max(widths) == 512  # the CNN's feature layer; the MLP heads are 64 wide
    assert resolve_num_threads(cfg.num_threads, widths, cores=2) == 2
    assert resolve_num_threads(cfg.num_threads, widths, cores=1) == 1


def test_a_normalized_run_prints_no_vecnorm_note(tmp_path: Path) -> None:
    """Observation normalization builds VecNormV2 on batched envs (training, evaluation and its
    fast-rollout copy); TorchRL's "experimental" note is filtered there, not globally."""
    proc = run_cli(
        [
            "experiment=pendulum_sac",
            "env.normalize_observations=true",
            "total_frames=128",
            "algorithm.build.init_random_frames=64",
            "eval.interval_frames=128",
            "eval.episodes=1",
            "eval.max_steps=20",
            "hydra.run.dir=run",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "VecNorm" not in proc.stderr, proc.stderr


def test_the_filter_leaves_other_warnings_alone() -> None:
    import warnings

    from xdrl.envs.factory import quiet_vecnorm_note

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_vecnorm_note():
            warnings.warn(
                "Support of VecNormV2 for containers with non-empty batch-size is x", stacklevel=1
            )
            warnings.warn("something else", UserWarning, stacklevel=1)
        warnings.warn(
            "Support of VecNormV2 for containers with non-empty batch-size is x", stacklevel=1
        )
    assert [str(w.message)[:14] for w in seen] == ["something else", "Support of Vec"]


def test_an_evaluation_video_prints_no_audio_device_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deep-sea-treasure renders through pygame, whose audio probe printed eight ``ALSA lib``
    lines on a machine without a sound card; rendering envs now open no audio device."""
    pytest.importorskip("moviepy")
    monkeypatch.delenv("SDL_AUDIODRIVER", raising=False)  # what a user's shell has
    proc = run_cli(
        [
            "experiment=dst_dqn",
            "eval=video",
            "total_frames=64",
            "eval.interval_frames=64",
            "eval.episodes=1",
            "hydra.run.dir=run",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((tmp_path / "run").rglob("*.mp4"))  # the video was rendered
    assert "ALSA" not in proc.stderr and "audio" not in proc.stderr.lower(), proc.stderr
