"""Which packages the wheel holds, found rather than listed (the rest is in pyproject.toml).

Every folder under ``xdrl/`` and ``hydra_plugins/`` that holds Python code is a package, so a new
subpackage cannot silently leave the wheel (tests/test_packaging.py checks it); ``conf/`` stays
at the top of the repository and ships as the package ``xdrl.conf``, each of its folders with its
YAML files.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).resolve().parent


def code_packages() -> list[str]:
    """xdrl and its subpackages, and xdrl's Hydra plugins (a namespace package)."""
    return find_namespace_packages(
        where=str(HERE),
        include=["xdrl", "xdrl.*", "hydra_plugins.*"],
        exclude=["*.__pycache__", "*.__pycache__.*"],
    )


def conf_packages() -> dict[str, str]:
    """``{package: folder}`` for ``conf/`` and each folder below it, as ``xdrl.conf.*``."""
    folders = [HERE / "conf", *sorted(p for p in (HERE / "conf").rglob("*") if p.is_dir())]
    return {
        ".".join(("xdrl", *folder.relative_to(HERE).parts)): folder.relative_to(HERE).as_posix()
        for folder in folders
        if folder.name != "__pycache__"
    }


if __name__ == "__main__":
    conf = conf_packages()
    setup(
        packages=[*code_packages(), *conf],
        package_dir={"xdrl.conf": "conf"},
        package_data={package: ["*.yaml"] for package in conf},
    )
