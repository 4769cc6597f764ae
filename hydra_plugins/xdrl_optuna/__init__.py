"""xdrl's Hydra sweeper plugin for Optuna searches (``hydra/sweeper=optuna``)."""
