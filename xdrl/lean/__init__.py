"""What xdrl re-implements of TorchRL, and why.

Each module is a TorchRL piece redone for speed: a subclass of (or drop-in for) the TorchRL
original, whose docstring says why it exists with a measured figure, and whose parity test
compares it with the original on the same input (``tests/test_lean.py`` checks both). Losses
(PPO, DQN, SAC, TD3), replay buffers, GAE, the collector, the trainer's loss average, fused Adam,
the actors' tensor-level fast paths.

Arrows point down: ``lean`` imports only itself, ``xdrl.envs`` and the config leaves, never the
algorithm builders, the training wiring or the run above it.
"""
