"""xdrl: a Hydra launcher for reinforcement learning on TorchRL."""

from typing import Any

__all__ = ["load_policy"]


def __getattr__(name: str) -> Any:
    """``xdrl.load_policy`` imported on first use, so ``import xdrl`` stays light (no torch)."""
    if name == "load_policy":
        from xdrl.policy.loading import load_policy

        return load_policy
    raise AttributeError(f"module 'xdrl' has no attribute {name!r}")
