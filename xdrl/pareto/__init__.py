"""Pareto fronts of multi-objective weight sweeps: weights, metrics, the report and its plot.

Torch-free, so the Hydra sweeper (``hydra_plugins.xdrl_pareto``) can import it at start-up.
"""
