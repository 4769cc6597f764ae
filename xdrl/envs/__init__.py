"""Where environments are made and checked.

- ``factory``: ``make_env``, the env factory every config's ``env`` names (gymnasium and
  MO-Gymnasium ids, transforms, reward scalarization, batching).
- ``vector_env``: ``VectorGymEnv``, one TorchRL env over N gymnasium envs batched in NumPy.
- ``atari``: ``make_atari_env`` (ALE ids, SB3-style preprocessing); ``atari_wrappers``: its
  gymnasium wrappers (episodic life, fire reset, reward clipping).
- ``observation_encoding``: one-hot encodings of discrete observations.
- ``masking``: ``env.mask_observations``, observation entries zeroed (partial observability).
"""
