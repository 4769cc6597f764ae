"""After training: rebuild, evaluate and export a run's policy (``xdrl-eval``, ``xdrl-export``,
:func:`xdrl.load_policy`). Modules import torch only where they are used."""
