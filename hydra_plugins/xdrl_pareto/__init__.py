"""xdrl's Hydra sweeper plugin for multi-objective weight sweeps (``hydra/sweeper=pareto``)."""
