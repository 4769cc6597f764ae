"""A run's lifecycle, and the run dir it writes.

- ``lifecycle``: one training run from a checked config to ``summary.json``.
- ``layout``: the names of the files a run dir holds, and how they are written.
- ``process``: process set-up (signals, warnings, multiprocessing); ``threads``: torch threads.
- ``lock``: ``RunDirLock``, one live run per run dir; ``job_record``: the run's ``.hydra/``.
- ``segments``: the segments of a run interrupted and resumed.
"""
