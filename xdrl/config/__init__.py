"""What a run's config may say, and the check of it (torch-free).

- ``settings``: the typed signature of each config group (the schema the check reads).
- ``types``: the ranged types the schema and the builders' signatures use.
- ``check``: ``check_config``, the one check of a composed config before anything is built
  (env ids, keys, ranges, the algorithm's and env factory's signatures).
- ``spec``: ``RunSpec``, what ``check_config`` returns: the run's typed values and the values
  derived from them (frames per batch, rounded budget, eval seed, resolved config), built once.
- ``resume``: what a resume may change of a run's saved config (and what it may not).
- ``errors``: ``ConfigError``, the one-line error every check raises.
- ``nested``: nested configs as flat ``{"a.b": value}`` dicts.
- ``renames``: module paths that moved, so configs and checkpoints of earlier runs still load.

The leaves (settings, spec, types, errors, nested, renames) import no xdrl module outside them; the
check reads the env factory and the algorithm builders' signatures from above.
"""
