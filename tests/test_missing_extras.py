"""A missing extra is one line naming its ``pip install 'xdrl[...]'`` (exit 2, nothing written),
and the ``all`` extra and the table of what each feature imports agree with ``pyproject.toml``.

A module is made missing without uninstalling it: the command runs in a fresh interpreter whose
``sys.modules`` holds ``None`` under that name, Python's own "known missing" marker
(``importlib.util.find_spec`` returns None, ``import`` raises ``ModuleNotFoundError``, and Hydra's
plugin scan skips it).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO, WANDB_OFFLINE, compose_config
from xdrl.config.check import FEATURES

# (modules made missing, xdrl-train arguments, the key of the line, the extra it names)
MISSING = [
    (["hydra_plugins.hydra_joblib_launcher"], ["-m", "hydra/launcher=joblib", "seed=0,1"],
     "hydra/launcher", "sweep"),
    (["hydra_plugins.hydra_joblib_launcher"], ["hydra/launcher=joblib"], "hydra/launcher", "sweep"),
    (["hydra_plugins.hydra_submitit_launcher"], ["-m", "hydra/launcher=local", "seed=0"],
     "hydra/launcher", "slurm"),
    (["hydra_plugins.hydra_submitit_launcher"], ["-m", "hydra/launcher=slurm", "seed=0"],
     "hydra/launcher", "slurm"),
    (["optuna"], ["-m", "hparams_search=ppo_cartpole"], "hydra/sweeper", "sweep"),
    (["pymoo"], ["-m", "hydra/sweeper=pareto", "env=deep_sea_treasure"], "hydra/sweeper",
     "pareto"),
    (["tensorboard"], ["logging=tensorboard"], "logging", "tensorboard"),
    (["wandb"], ["logging=wandb"], "logging", "wandb"),
    (["moviepy"], ["eval=video"], "eval.render", "video"),
    (["onnxscript"], ["logging=wandb", "logging.log_model=true"], "logging.log_model", "export"),
    (["ray"], ["collector=ray"], "collector", "ray"),
]  # fmt: skip
# Extras that `dev` (and so make test) does not install: make test-extra does.
NOT_IN_DEV = {"ray"}

RUN_WITHOUT = (
    "import sys\n"
    "missing, args = sys.argv[1].split(','), sys.argv[2:]\n"
    "for name in missing:\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['xdrl-train', *args]\n"
    "from xdrl.cli import main\n"
    "main()\n"
)


def _run_without(missing: list[str], args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``xdrl-train args`` in a fresh interpreter that cannot import ``missing``."""
    return subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT, ",".join(missing), *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, **WANDB_OFFLINE},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("missing", "args", "key", "extra"), MISSING, ids=[" ".join(m[1]) for m in MISSING]
)
def test_a_missing_extra_is_one_line_naming_it_before_anything_is_written(
    tmp_path: Path, missing: list[str], args: list[str], key: str, extra: str
) -> None:
    result = _run_without(missing, args, tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"xdrl-train: config error: {key}: "), lines[0]
    assert lines[0].endswith(f"pip install 'xdrl[{extra}]'") or (
        f"pip install 'xdrl[{extra}]', or set" in lines[0]
    ), lines[0]
    assert missing[0] in lines[0]  # names what is not installed
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no outputs/, multirun/, .hydra


def test_with_the_extras_installed_the_same_configs_pass(tmp_path: Path) -> None:
    """The control: in this venv (``dev`` installs every extra) nothing is missing, and the
    configs refused above pass the same checks."""
    from hydra import compose, initialize_config_module

    from xdrl.config.check import check_extras, check_launch_plugins, missing_modules

    in_dev = [f for f in FEATURES if FEATURES[f][0] not in NOT_IN_DEV]
    assert {feature: missing_modules(feature) for feature in in_dev} == {f: [] for f in in_dev}
    for overrides in (["logging=wandb", "logging.log_model=true", "eval=video"],
                      ["logging=tensorboard"]):  # fmt: skip
        check_extras(compose_config(overrides, tmp_path))
    for overrides in (["hparams_search=ppo_cartpole", "hydra/launcher=joblib"],
                      ["hydra/sweeper=pareto", "hydra/launcher=slurm"]):  # fmt: skip
        with initialize_config_module("xdrl.conf", version_base="1.3"):
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
        check_launch_plugins(cfg.hydra)


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_all_means_every_user_extra() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    (everything,) = extras["all"]
    listed = Requirement(everything).extras
    assert Requirement(everything).name == "xdrl"
    # docs: the site's tools, not a feature; ray: large, installed by make test-extra only
    assert listed == set(extras) - {"all", "dev", "docs", *NOT_IN_DEV}
    assert "xdrl[all,docs]" in extras["dev"]


def _closure(requirements: list[str]) -> set[str]:
    """The canonical names of ``requirements`` and of everything they require (installed)."""
    seen: set[str] = set()
    stack = [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        stack += [r for r in map(Requirement, requires) if r.marker is None]
    return seen


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_each_feature_s_modules_come_with_its_extra(feature: str) -> None:
    """``FEATURES`` (what the check asks for) against ``pyproject.toml`` (what the extra
    installs): every module is provided by a distribution the extra brings."""
    extra, modules = FEATURES[feature]
    if extra in NOT_IN_DEV and importlib.util.find_spec(modules[0]) is None:
        pytest.skip(f"the {extra} extra is not installed here (make test-extra installs it)")
    brought = _closure(_pyproject()["project"]["optional-dependencies"][extra])
    providers = importlib.metadata.packages_distributions()
    for module in modules:
        top, _, sub = module.partition(".")
        names = {canonicalize_name(d) for d in providers.get(top, [])}
        if top == "hydra_plugins":  # a namespace many plugins share: the plugin's own
            names &= {canonicalize_name(sub.split(".")[0])}
        assert names & brought, (module, names, extra)


# A user install (README's first command): the extras it lacks, as a fresh interpreter sees them.
USER_INSTALL_MISSING = [
    "optuna", "cmaes", "pymoo", "hydra_plugins.hydra_joblib_launcher",
    "hydra_plugins.hydra_submitit_launcher", "submitit", "wandb", "tensorboard", "moviepy",
    "ray", "ale_py", "mujoco", "Box2D",
]  # fmt: skip
COMPOSE_DEFAULTS = (  # what xdrl-eval and xdrl-export do first: the default config, composed
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "from xdrl.config.spec import composed_defaults\n"
    "assert composed_defaults() is not None\n"
)


def test_optional_plugins_say_nothing_until_used(tmp_path: Path) -> None:
    """Without the sweep (and every other optional) extra, Hydra's plugin scan at every start
    of xdrl-train, xdrl-eval and xdrl-export is silent: hydra_plugins/xdrl_optuna imports Optuna
    only when a search runs (it printed Hydra's five-line "Error importing
    'hydra_plugins.xdrl_optuna.wilcoxon' ... No module named 'optuna'" on stderr each time)."""
    result = _run_without(USER_INSTALL_MISSING, ["--cfg", "job"], tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert "total_frames:" in result.stdout
    result = subprocess.run(
        [sys.executable, "-c", COMPOSE_DEFAULTS, ",".join(USER_INSTALL_MISSING)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    # and once used, one line naming the extra
    result = _run_without(
        USER_INSTALL_MISSING, ["-m", "hparams_search=ppo_cartpole_seeds",
                               "hydra/sweeper/pruner=wilcoxon_evals"], tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        "xdrl-train: config error: hydra/sweeper: hydra/sweeper=optuna needs the sweep extra "
        "(optuna not installed); pip install 'xdrl[sweep]'\n"
    )
    assert list(tmp_path.iterdir()) == []
