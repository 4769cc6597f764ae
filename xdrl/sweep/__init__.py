"""Multirun sweeps: ``summary`` (the table of every job after a sweep, Hydra's callback),
``stop`` (ending a sweep cleanly on Ctrl-C) and ``settings`` (the sweeper's own settings,
checked before Hydra builds it)."""
