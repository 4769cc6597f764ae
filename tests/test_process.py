"""The entry point's process set-up (house note 1): threads, TorchRL's log routing, terminal."""

from __future__ import annotations

import logging

import torch

from xdrl.process import setup_process


def test_setup_process_sets_threads_and_routes_torchrl_logs(make_cfg, monkeypatch) -> None:
    monkeypatch.delenv("RL_LOGGING_LEVEL", raising=False)
    before = torch.get_num_threads()
    torchrl_log = logging.getLogger("torchrl")
    saved = (list(torchrl_log.handlers), torchrl_log.propagate, torchrl_log.level)
    try:
        settings = setup_process(make_cfg("num_threads=1"))
        assert settings.num_threads == 1 and torch.get_num_threads() == 1
        assert settings.interactive is False  # pytest captures stdout: not a terminal
        assert torchrl_log.handlers == [] and torchrl_log.propagate
        assert torchrl_log.level == logging.WARNING  # TorchRL's INFO chatter stays out
    finally:
        torch.set_num_threads(before)
        torchrl_log.handlers[:], torchrl_log.propagate = saved[0], saved[1]
        torchrl_log.setLevel(saved[2])
