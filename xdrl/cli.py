"""The ``xdrl-train`` entry point: compose the config, build, train, always clean up.

Nothing heavy is imported at module level, so ``--help`` and ``--cfg job`` return at once.
"""

from __future__ import annotations

import logging
import sys
from importlib.resources import files

import hydra
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("xdrl")

CONFIG_PACKAGE = "xdrl.conf"

HELP = """xdrl-train: train a TorchRL agent from a composed Hydra config.

Usage:
  xdrl-train [group=option ...] [key=value ...]      one run under outputs/
  xdrl-train -m seed=0,1,2 algorithm=ppo,a2c         a sweep under multirun/
  xdrl-train --cfg job                               print the composed config and exit

Configuration groups (group=option):
{groups}

Hydra's own flags (--cfg, --info, --multirun, --hydra-help, ...): xdrl-train --hydra-help

Config (override any key with key=value):
{config}"""


def _groups() -> str:
    """Every config group and its options, read from the shipped conf package."""
    lines = []

    def walk(folder, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.is_dir() or entry.name.startswith("_"):
                continue
            options = sorted(f.name[:-5] for f in entry.iterdir() if f.name.endswith(".yaml"))
            if options:
                lines.append(f"  {prefix}{entry.name}: {', '.join(options)}")
            walk(entry, f"{prefix}{entry.name}/")

    walk(files(CONFIG_PACKAGE), "")
    return "\n".join(lines)


def _fast_help(overrides: list[str]) -> str:
    """Hydra's app help, without the plugin scan that makes Hydra's own take seconds."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        cfg = compose("config", overrides=[o for o in overrides if not o.startswith("-")])
    return HELP.format(groups=_groups(), config=OmegaConf.to_yaml(cfg))


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="config")
def train(cfg: DictConfig) -> float | None:
    """Train one run; returns the configured objective for sweepers (e.g. Optuna)."""
    from xdrl.errors import ConfigError

    try:
        from xdrl.run import run

        return run(cfg)
    except ConfigError as err:
        log.debug("configuration error", exc_info=True)
        log.error("%s", err)
        print(f"xdrl-train: config error: {err}", file=sys.stderr)
        if _in_multirun():  # fail this job only; the sweep goes on and reports it
            raise RuntimeError(f"config error: {err}") from None
        raise SystemExit(2) from None


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def main() -> None:
    """Console script: a fast ``--help``, everything else through Hydra."""
    args = sys.argv[1:]
    if "--help" in args or "-h" in args:
        print(_fast_help([a for a in args if a not in ("--help", "-h")]))
        return
    train()


if __name__ == "__main__":
    main()
