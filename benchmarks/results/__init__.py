"""Results a researcher can cite: one command per result, and the results page built from data.

``python -m benchmarks --mode results --preset P --seeds 0 1 2`` trains each seed of preset
``P`` with ``xdrl-train`` into ``bench-results/runs/P/seed<s>`` (adopting a run dir already
there: a completed run is read, a stopped one resumed with xdrl's exact resume, one trained
under another config refused), evaluates each at the end over at least 10 deterministic
episodes, and writes ``benchmarks/results/P.json``: per seed the evaluation curve, the final
value, the frames, the wall time and the command; the preset's budget, the fraction of it run,
the code version and the machine. ``--contender sb3`` records Stable-Baselines3's side of a
comparison (``scripts/bench_sb3.py``) in the same format, as ``P.sb3.json``.

``python -m benchmarks.results page`` writes the table of every data file into
``docs/results.md`` (between markers) and one curve figure per preset into ``docs/results/``,
with IQM and 95% bootstrap intervals over seeds from ``xdrl-report``'s statistics and the named
reference of ``references.yaml``; ``tests/test_results_page.py`` fails when page and data
disagree.

Modules: :mod:`~benchmarks.results.data` (the data file, torch-free),
:mod:`~benchmarks.results.runs` (the seeds' run dirs: plan, train, read back),
:mod:`~benchmarks.results.sb3` (the SB3 contender), :mod:`~benchmarks.results.page` (table and
figures), :mod:`~benchmarks.results.cli` (the command line).
"""
