"""Multirun sweeps: ``summary`` (the table of every job after a sweep, Hydra's callback) and
``stop`` (ending a sweep cleanly on Ctrl-C)."""
