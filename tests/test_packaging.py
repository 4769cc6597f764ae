"""The wheel holds every module of xdrl and its Hydra plugins, and every config file as
``xdrl.conf``: packages are found (setup.py), so a new subpackage cannot silently leave it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO


def _sources(folder: str, pattern: str) -> set[str]:
    return {
        p.relative_to(REPO).as_posix()
        for p in (REPO / folder).rglob(pattern)
        if "__pycache__" not in p.parts
    }


def test_the_wheel_holds_every_module_and_config_file(tmp_path: Path) -> None:
    # Built from a copy of the tree: setuptools reuses a build/lib folder, so a module deleted
    # since an earlier build in the checkout stayed in the wheel (and the build wrote into it).
    source = tmp_path / "source"
    generated = ("build", "site", "dist", "*.egg-info", "__pycache__", ".*cache")
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv*", *generated))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path / "wheel"), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("xdrl-*.whl")
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    modules = _sources("xdrl", "*.py") | _sources("hydra_plugins", "*.py")
    configs = {f"xdrl/{name}" for name in _sources("conf", "*.yaml") | _sources("conf", "*.py")}
    assert names == modules | configs
    assert "xdrl/lean/ppo_loss.py" in names and "xdrl/conf/config.yaml" in names
