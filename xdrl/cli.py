"""The ``xdrl-train`` entry point: compose the config, build, train, always clean up.

Nothing heavy is imported at module level, so ``--help`` and ``--cfg job`` return at once.
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

log = logging.getLogger("xdrl")


@hydra.main(version_base="1.3", config_path="pkg://xdrl.conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    """Train one run; returns the configured objective for sweepers (e.g. Optuna)."""
    from xdrl.errors import ConfigError

    try:
        from xdrl.run import run

        return run(cfg)
    except ConfigError as err:
        log.debug("configuration error", exc_info=True)
        log.error("%s", err)
        print(f"xdrl-train: config error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
