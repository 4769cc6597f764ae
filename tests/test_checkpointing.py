"""Verified checkpoints, config comparison and the stop request, in process (no training)."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from torchrl.checkpoint import GlobalRNGState, StateDictCheckpointAdapter

import xdrl.config.resume as resume
from xdrl.config.errors import ConfigError
from xdrl.config.resume import ResumeCheck, config_changes
from xdrl.run.lifecycle import _StopRequest
from xdrl.training.checkpointing import (
    CHECKSUMS_FILE,
    CorruptCheckpoint,
    VerifiedCheckpoint,
    set_aside_previous_output,
    verify,
)
from xdrl.training.loggers import stable_run_id


def _save(tmp_path: Path) -> tuple[Path, torch.nn.Linear]:
    net = torch.nn.Linear(3, 2)
    ckpt = VerifiedCheckpoint(config={"seed": 0}, net=net, rng=GlobalRNGState())
    return ckpt.save(tmp_path / "checkpoint-000000000001"), net


def test_a_verified_checkpoint_restores_weights_and_every_rng(tmp_path: Path) -> None:
    path, net = _save(tmp_path)
    assert (path / CHECKSUMS_FILE).exists() and (path / "config.yaml").read_text() == "seed: 0\n"
    expected = (torch.rand(3), np.random.rand(), random.random())
    target = torch.nn.Linear(3, 2)
    VerifiedCheckpoint(net=target, rng=GlobalRNGState()).load(path)
    assert torch.equal(target.weight, net.weight)
    assert torch.equal(torch.rand(3), expected[0])
    assert (np.random.rand(), random.random()) == expected[1:]


def test_state_dicts_are_one_file_each_and_the_older_layout_still_loads(tmp_path: Path) -> None:
    """Saves write one ``state.pt`` per state-dict component; a checkpoint in TorchRL's
    directory layout (a memmap file per tensor, as xdrl wrote them before) loads the same."""
    path, net = _save(tmp_path / "new")
    assert {p.name for p in (path / "components").rglob("*") if p.is_file()} == {"state.pt"}
    old = VerifiedCheckpoint(config={"seed": 0})
    old.register("net", net, adapter=StateDictCheckpointAdapter())  # TorchRL's default payload
    old.register("rng", GlobalRNGState(), adapter=StateDictCheckpointAdapter())
    old_path = old.save(tmp_path / "old" / "checkpoint-000000000001")
    assert any(old_path.rglob("*.memmap")) and not any(old_path.rglob("state.pt"))
    for saved in (path, old_path):
        target = torch.nn.Linear(3, 2)
        VerifiedCheckpoint(net=target, rng=GlobalRNGState()).load(saved)
        assert torch.equal(target.weight, net.weight) and torch.equal(target.bias, net.bias)


@pytest.mark.parametrize("damage", ["truncate", "delete", "no_checksums"])
def test_verify_names_the_damaged_file(tmp_path: Path, damage: str) -> None:
    path, _ = _save(tmp_path)
    tensor = next(path.rglob("state.pt"))
    if damage == "truncate":
        os.truncate(tensor, 10)
    elif damage == "delete":
        tensor.unlink()
    else:
        (path / CHECKSUMS_FILE).unlink()
    named = path / CHECKSUMS_FILE if damage == "no_checksums" else tensor
    with pytest.raises(CorruptCheckpoint, match=str(named)):
        verify(path)
    with pytest.raises(CorruptCheckpoint):  # loading verifies too: nothing loads unchecked
        VerifiedCheckpoint(net=torch.nn.Linear(3, 2), rng=GlobalRNGState()).load(path)


def test_config_changes_lists_dotted_keys_and_ignores_the_run_dir() -> None:
    saved = {"run_dir": "a", "total_frames": 512, "algorithm": {"build": {"cells": [64, 64]}}}
    new = {"run_dir": "b", "total_frames": 1024, "algorithm": {"build": {"cells": [32]}}}
    assert config_changes(saved, new) == {
        "algorithm.build.cells": ([64, 64], [32]),
        "total_frames": (512, 1024),
    }


def test_a_key_added_since_the_checkpoint_with_an_empty_default_is_no_change() -> None:
    saved = {"env": {"id": "CartPole-v1"}}  # written before env.import_modules existed
    assert config_changes(saved, {"env": {"id": "CartPole-v1", "import_modules": []}}) == {}
    assert config_changes(saved, {"env": {"id": "CartPole-v1", "import_modules": ["my_envs"]}}) == {
        "env.import_modules": (None, ["my_envs"])
    }
    assert config_changes({"env": {"import_modules": ["a"]}}, {"env": {"import_modules": []}}) == {
        "env.import_modules": (["a"], [])
    }


def test_a_key_added_since_the_checkpoint_at_its_builders_default_is_no_change() -> None:
    target = "xdrl.algorithms.ppo.build"  # recurrent_hidden: PositiveInt = 64 in its signature
    saved = {"algorithm": {"build": {"_target_": target}}}  # written before recurrent cells
    at_default = {"_target_": target, "recurrent_hidden": 64, "recurrent_critic": False}
    assert config_changes(saved, {"algorithm": {"build": at_default}}) == {}
    other = {**at_default, "recurrent_hidden": 128}
    assert config_changes(saved, {"algorithm": {"build": other}}) == {
        "algorithm.build.recurrent_hidden": (None, 128)
    }
    untyped = {"algorithm": {"build": {"gamma": 0.99, "recurrent_hidden": 64}}}  # no _target_
    assert config_changes({"algorithm": {"build": {"gamma": 0.99}}}, untyped) == {
        "algorithm.build.recurrent_hidden": (None, 64)
    }


def _checkpoint_with_config(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def test_resume_check_compares_each_checkpoint_once(tmp_path: Path, monkeypatch) -> None:
    calls: list[int] = []
    counted = resume.config_changes
    monkeypatch.setattr(resume, "config_changes", lambda a, b: calls.append(1) or counted(a, b))
    saved = {"seed": 0, "total_frames": 512, "algorithm": {"build": {"cells": [64]}}}
    newest = _checkpoint_with_config(tmp_path / "checkpoint-000000000512", saved)
    older = _checkpoint_with_config(tmp_path / "checkpoint-000000000256", saved)
    (tmp_path / "checkpoint-000000000768").mkdir()  # no config.yaml: nothing to compare
    candidates = [tmp_path / "checkpoint-000000000768", newest, older]
    check = ResumeCheck({**saved, "total_frames": 1024})

    assert check.newest(candidates) == newest
    assert check.changes(newest) == {"total_frames": (512, 1024)}  # asked again: recorded
    assert check.changes(Path(os.path.relpath(newest))) == {"total_frames": (512, 1024)}
    assert calls == [1]
    assert check.changes(older) == {"total_frames": (512, 1024)}  # another checkpoint: compared
    assert calls == [1, 1]

    refused = ResumeCheck({**saved, "algorithm": {"build": {"cells": [32]}}})
    with pytest.raises(ConfigError, match=r"algorithm.build.cells \[64\] -> \[32\]"):
        refused.newest(candidates)


def test_ctrl_c_stops_after_the_iteration_and_a_second_one_aborts() -> None:
    stops: list[str | None] = []
    run = SimpleNamespace(trainer=SimpleNamespace(request_stop=stops.append))
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs in the background
    with _StopRequest(run) as stop:  # type: ignore[arg-type]
        signal.raise_signal(signal.SIGINT)
        assert stops == ["SIGINT"] and stop.interrupted
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # restored, whatever it was
    with pytest.raises(SystemExit) as exit_:
        stop.forward()
    assert exit_.value.code == 130


def test_resume_never_sets_earlier_output_aside_and_gets_a_new_wandb_id(tmp_path: Path) -> None:
    for name in ("checkpoints", "logs", "wandb"):
        (tmp_path / name).mkdir()
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / ".hydra").mkdir()
    before = stable_run_id(str(tmp_path))
    set_aside_previous_output(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["superseded"]  # the whole earlier run
    assert (tmp_path / "superseded" / "1" / "checkpoints").is_dir()
    assert (tmp_path / "superseded" / "1" / ".hydra").is_dir()
    assert stable_run_id(str(tmp_path)) != before  # W&B would otherwise drop the new steps
