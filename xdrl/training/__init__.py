"""What ``build_trainer`` wires from a checked config.

- ``build``: ``build_trainer(spec)`` (a ``RunSpec``), the env, algorithm parts, collector,
  optimizer, logger and hooks of one run.
- ``checkpointing``: ``VerifiedCheckpoint`` (TorchRL's ``Checkpoint`` with checksums) and which
  checkpoint a run resumes from.
- ``env_state``: the train and evaluation envs saved mid-episode with each checkpoint.
- ``loggers``: xdrl's TorchRL loggers (CSV, W&B, TensorBoard).
- ``workers``: ``collector=multiprocess``, TorchRL's multi-process collectors with xdrl's worker
  collectors; ``worker_norm``: the run's observation statistics, which the workers read;
  ``ray_workers``: ``collector=ray``, TorchRL's ``RayCollector`` with the same worker collectors
  as Ray actors (imported only for ``collector=ray``: it imports Ray).
- ``precision``: fp32 or bf16 autocast; ``speedups``: process-wide fixes of per-call overheads.
"""
