"""The benchmark harness: xdrl-train against Stable-Baselines3 and plain-loop floors.

What it holds:

- ``cli.py``: the command line (``python -m benchmarks --mode ppo-throughput --seeds 3``; the old
  ``python scripts/bench.py`` still works) and the report files it writes.
- ``runner.py``: the one alternate-and-median runner every mode uses (``--reps``), the options
  of a run (:class:`~benchmarks.runner.Options`), and :func:`~benchmarks.runner.run_modes`.
- ``contenders.py``: how each contender runs: ``xdrl-train`` found beside ``sys.executable``,
  SB3 in its own venv (``.venv-sb3``, made by ``make bench-venv``), the reference loops.
- ``modes/``: one module per mode, each with its workload, its run and its report rows.
- ``targets.yaml``: the project's targets, as data (``report.py`` checks the figures against it).

Nothing here ships in the wheel (``setup.py`` finds only ``xdrl`` and ``hydra_plugins``).
"""
