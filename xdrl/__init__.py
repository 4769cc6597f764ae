"""xdrl: a Hydra launcher for reinforcement learning on TorchRL."""
