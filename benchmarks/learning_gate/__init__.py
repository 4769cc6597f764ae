"""The learning gate: what each preset learns, guarded run to run.

Short bit-for-bit tests guard each speed change against its parent, but nothing guarded what a
preset *learns*: ``lunarlander_ppo`` fell from 208 to 60 on seed 0 and nobody saw it for days.
The gate runs every preset on a short same-seed budget through the real ``xdrl-train``, reads
its evaluation curve and a few train-loss values back from the CSVs, and compares them with a
reference committed beside this file (``references/<preset>.json``): exactly where the run is
deterministic (same machine fingerprint and library versions), within a stated band otherwise
(:mod:`benchmarks.learning_gate.compare`). On a mismatch it names the preset and the first
evaluation that moved.

Usage:
    python -m benchmarks.learning_gate check                       # every gated preset
    python -m benchmarks.learning_gate check --preset cartpole_ppo
    python -m benchmarks.learning_gate update --preset lunarlander_ppo   # rewrite a reference
    make test-learning / make learning-gate-update PRESETS="lunarlander_ppo cartpole_ppo"
"""
