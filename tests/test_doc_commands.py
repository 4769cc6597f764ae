"""Every command in the docs runs (issue 47): each ``xdrl-train``, ``xdrl-eval``, ``xdrl-export``
and ``xdrl-report`` line of a code block in README.md and docs/*.md is read back and checked.

- ``xdrl-train``: :func:`xdrl.cli.check_command`, in process: what the console script checks
  before Hydra starts (a single run's every value; a sweep's first job, its plugins and its
  sweeper's, sampler's and pruner's settings). A line the docs show after the command
  (``xdrl-train: config error: ...``) is the line it must give; otherwise it must give none.
  ``--help`` is xdrl's help text; ``--cfg`` and ``--config-dir`` run the console script with
  ``--cfg job`` (Hydra composes them, which the pre-check leaves to it).
- ``xdrl-eval`` and ``xdrl-export``: their own argument parser and argument check, then the run
  dir and checkpoint it names; ``xdrl-eval`` on a plain run dir plays its episodes.
- ``xdrl-report``: runs.

Placeholders (``RUN``, ``outputs/<date>/<time>_ppo_cartpole``, ``<sweep dir>``) and paths
(``multirun/ppo-vs-a2c``) point into one folder made once: copies of the fixture run dir
``tests/fixtures/runs/cartpole_ppo_v1`` and a preset written by the Optuna sweeper's own
``write_preset``. A command that needs something outside xdrl says so in :data:`NEEDS`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REPO, run_cli

TOOLS = ("xdrl-train", "xdrl-eval", "xdrl-export", "xdrl-report")
FIXTURE_RUN = REPO / "tests" / "fixtures" / "runs" / "cartpole_ppo_v1"
RUN = "outputs/2026-11-24/10-00-00_ppo_cartpole"  # where the docs' run dir is, in the workspace
SWEEP = "sweep"  # <sweep dir>
PLACEHOLDERS = {
    "outputs/<date>/<time>_ppo_cartpole": RUN,
    "<an experiment=cartpole_novel_lstm run dir>": RUN,  # a dry check: any run dir
    "<sweep dir>": SWEEP,
    "RUN": RUN,
}
# What a command needs beyond xdrl, and how the test provides it or what it expects instead.
NEEDS = {
    "my_pkg.envs:MyEnv-v0": "a package of the user's that registers MyEnv-v0 (made here)",
    "minigrid": "the minigrid package (not an xdrl extra): without it, the line naming it",
    "collector=ray": "the ray extra (make test-extra): without it, the line naming it",
    "10.0.0.5:6379": "a running Ray head (a listening socket here)",
}


# Modules the docs' commands import by ``env.id=<module>:<id>``, and the id each registers.
REGISTERING = {"my_pkg": "MyEnv-v0", "xdrl.envs.testing": "SleepyCartPole-v1"}


@dataclass(frozen=True)
class DocCommand:
    """One command of a code block: where it is, its environment variables, the tool, its
    arguments and the one line the docs show it printing on stderr (None: none)."""

    where: str
    env: dict[str, str]
    tool: str
    args: list[str]
    expected: str | None


def doc_commands() -> list[DocCommand]:
    """Every command line of a fenced code block in README.md and docs/*.md (``\\`` joins
    lines; ``$`` prompts, comments and ``VAR=value`` prefixes are read as a shell would)."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        inside, pending = False, ""
        for number, line in enumerate(lines, start=1):
            if line.lstrip().startswith("```"):
                inside, pending = not inside, ""
                continue
            if not inside:
                continue
            line = f"{pending} {line.strip()}" if pending else line
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1]
                continue
            pending = ""
            command = _parse(line.strip().removeprefix("$ "))
            if command is None:
                continue
            env, tool, args = command
            following = lines[number].strip() if number < len(lines) else ""
            shown = following.startswith(f"{tool}: config error: ")
            expected = following.split(": config error: ", 1)[1] if shown else None
            found.append(DocCommand(f"{path.name}:{number}", env, tool, args, expected))
    return found


def _parse(text: str) -> tuple[dict[str, str], str, list[str]] | None:
    """``(env, tool, args)`` of a command line, None for anything else (output, other tools)."""
    for placeholder, path in PLACEHOLDERS.items():
        text = re.sub(rf"(?<![\w/]){re.escape(placeholder)}(?![\w>])", path, text)
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] not in TOOLS:
        return None
    return env, words[0], words[1:]


def _unique(commands: list[DocCommand]) -> list[DocCommand]:
    """Each command once (the first place the docs show it)."""
    seen: set[str] = set()
    kept = []
    for command in commands:
        key = repr((command.env, command.tool, command.args, command.expected))
        if key not in seen:
            seen.add(key)
            kept.append(command)
    return kept


COMMANDS = doc_commands()


def _ids(tool: str) -> list[DocCommand]:
    return _unique([c for c in COMMANDS if c.tool == tool])


def test_the_docs_hold_commands_of_every_tool() -> None:
    """The extraction finds what the docs show (a broken reader would check nothing)."""
    counts = {tool: len(_ids(tool)) for tool in TOOLS}
    assert all(counts.values()), counts
    assert len(COMMANDS) >= 90  # 95 on November 28
    shown = [c for c in COMMANDS if c.expected is not None]
    assert any(c.args == ["algorithm.build.gamma=1.5"] for c in shown)
    assert any(c.env == {"RL_LOGGING_LEVEL": "garbage"} for c in shown)


# The workspace the commands run in --------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding what the docs' commands name: the run dir (``RUN``), a sweep of it for
    ``xdrl-report`` (``multirun/ppo-vs-a2c``, two seeds), a sweep dir with the preset the Optuna
    sweeper writes after a re-check, and the user package ``my_pkg`` with ``MyEnv-v0``."""
    root = tmp_path_factory.mktemp("docs")
    shutil.copytree(FIXTURE_RUN, root / RUN)
    summary = json.loads((root / RUN / "summary.json").read_text())  # as checkpoint.keep_best
    summary["best_checkpoint"] = "checkpoint-000000001024"  # records it (--checkpoint best)
    (root / RUN / "summary.json").write_text(json.dumps(summary))
    for seed in (0, 1):
        shutil.copytree(FIXTURE_RUN, root / "multirun" / "ppo-vs-a2c" / f"{seed}_seed={seed}")
        config = root / "multirun" / "ppo-vs-a2c" / f"{seed}_seed={seed}" / ".hydra"
        text = (config / "config.yaml").read_text()
        (config / "config.yaml").write_text(re.sub(r"(?m)^seed: \d+", f"seed: {seed}", text))
    _write_preset(root / SWEEP)
    package = root / "user" / "my_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "envs.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('MyEnv-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n"
    )
    return root


def _write_preset(sweep_dir: Path) -> None:
    """``<sweep dir>/presets/experiment/ppo_cartpole_seeds_best.yaml`` as the sweeper writes it
    for a trial of ``experiment=cartpole_ppo hparams_search=ppo_cartpole_seeds``."""
    from hydra import compose, initialize_config_module

    from hydra_plugins.xdrl_optuna.recheck import write_preset

    def composed(overrides: list[str]):  # noqa: ANN202 - a DictConfig
        with initialize_config_module("xdrl.conf", version_base="1.3"):
            return compose("config", overrides=overrides, return_hydra_config=True)

    trial = SimpleNamespace(number=3, params={"algorithm.optimizer.lr": 0.00123})
    row = {"search_value": 480.0, "search_interval": None, "recheck_value": 470.0,
           "recheck_interval": None, "recheck_seeds": range(1000, 1010)}  # fmt: skip
    fixed = ["experiment=cartpole_ppo", "hparams_search=ppo_cartpole_seeds"]
    write_preset(trial, row, fixed, composed, sweep_dir, "ppo_cartpole_seeds")


@pytest.fixture
def in_workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The workspace as the working dir, ``my_pkg`` importable; gymnasium's registry and the
    env modules a command imported are put back after it, so each command meets the registry
    a fresh ``xdrl-train`` would (a suggestion for a misspelt id lists only what is there)."""
    import gymnasium

    monkeypatch.chdir(workspace)
    monkeypatch.syspath_prepend(str(workspace / "user"))

    def ours(name: str) -> bool:
        return any(name == m or name.startswith(f"{m}.") for m in REGISTERING)

    # What an earlier test of this process registered (xdrl.envs.testing) is hidden meanwhile.
    hidden_ids = {
        i: gymnasium.registry.pop(i) for i in REGISTERING.values() if i in gymnasium.registry
    }
    hidden_modules = {name: sys.modules.pop(name) for name in list(sys.modules) if ours(name)}
    yield workspace
    for env_id in REGISTERING.values():
        gymnasium.registry.pop(env_id, None)
    for name in [name for name in sys.modules if ours(name)]:
        del sys.modules[name]
    gymnasium.registry.update(hidden_ids)
    sys.modules.update(hidden_modules)


@contextlib.contextmanager
def _ray_head(args: list[str]) -> Iterator[list[str]]:
    """``args`` with the docs' Ray head address replaced by a socket listening here."""
    if not any(a.endswith("10.0.0.5:6379") for a in args):
        yield args
        return
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        yield [a.replace("10.0.0.5:6379", address) for a in args]


# xdrl-train -----------------------------------------------------------------------------------

CHECKED = [c for c in _ids("xdrl-train") if not {"--help", "--cfg", "--config-dir"} & set(c.args)]


@pytest.mark.parametrize("command", CHECKED, ids=[c.where for c in CHECKED])
def test_each_xdrl_train_command_passes_the_pre_check_or_says_what_the_docs_show(
    command: DocCommand, in_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-check of the console script, in process: a sweep's is its first job's."""
    from xdrl.cli import check_command

    for name, value in command.env.items():
        monkeypatch.setenv(name, value)
    expected = _expected(command, monkeypatch)
    with _ray_head(command.args) as args:
        line = check_command(args)
    if callable(expected):
        assert expected(line), (command.where, line)
    else:
        assert line == expected, command.where


def _expected(command: DocCommand, monkeypatch: pytest.MonkeyPatch) -> object:
    """The line ``command`` must give here: the docs', with what they assume about this machine
    (no CUDA, the sweep extra missing) made so, or a test for the line of a missing package."""
    import importlib.util

    line = command.expected
    if line is not None and "not installed); pip install" in line:  # "without the sweep extra"
        hidden = line.split("(", 1)[1].split(" not installed", 1)[0]
        real = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name, *a: None if name == hidden else real(name, *a)
        )
    if line is not None and line.startswith("device: 'cuda' is not available"):
        import torch

        if torch.cuda.is_available():
            return None
    joined = " ".join(command.args)
    if "minigrid" in joined and importlib.util.find_spec("minigrid") is None:
        return lambda got: (
            got is not None and got.startswith("env.") and "pip install minigrid" in got
        )
    if "collector=ray" in joined and importlib.util.find_spec("ray") is None:
        return lambda got: got is not None and got.endswith("pip install 'xdrl[ray]'")
    return line


def test_help_and_cfg_job_commands_run(in_workspace: Path) -> None:
    """``--help`` prints xdrl's groups; ``--cfg job`` and ``--config-dir <sweep dir>/presets``
    (the preset a search writes) compose through Hydra, one console script each."""
    from xdrl.cli import _fast_help

    others = [c for c in _ids("xdrl-train") if {"--help", "--cfg", "--config-dir"} & set(c.args)]
    assert len(others) >= 3
    for command in others:
        if "--help" in command.args:
            text = _fast_help([a for a in command.args if a != "--help"])
            assert "hydra/launcher: basic" in text, command.where
            continue
        args = command.args if "--cfg" in command.args else [*command.args, "--cfg", "job"]
        result = run_cli(args, cwd=in_workspace, timeout=120)
        assert (result.returncode, result.stderr) == (0, ""), (command.where, result.stderr)
        assert "total_frames:" in result.stdout
        if "--config-dir" in command.args:  # the preset's measured value, not the default
            assert "lr: 0.00123" in result.stdout, command.where


# xdrl-eval and xdrl-export --------------------------------------------------------------------

POLICY = [*_ids("xdrl-eval"), *_ids("xdrl-export")]


@pytest.mark.parametrize("command", POLICY, ids=[c.where for c in POLICY])
def test_each_eval_and_export_command_names_a_run_and_arguments_they_take(
    command: DocCommand, in_workspace: Path
) -> None:
    """Their own parser and argument check, then the run dir and the checkpoint it names."""
    from xdrl.policy import eval_cli, export_cli
    from xdrl.policy.run_dir import check_run_dir, resolve_checkpoint

    cli = eval_cli if command.tool == "xdrl-eval" else export_cli
    parser = cli._parser()
    with contextlib.redirect_stderr(io.StringIO()) as errors:
        try:
            args = (
                parser.parse_intermixed_args(command.args)
                if cli is eval_cli
                else parser.parse_args(command.args)
            )
        except SystemExit:
            pytest.fail(f"{command.where}: {errors.getvalue()}")
    assert cli._check_args(args) is None, command.where
    run_dir = check_run_dir(args.run_dir)
    assert resolve_checkpoint(run_dir, args.checkpoint).is_dir()


def test_the_first_xdrl_eval_command_plays_the_run(
    in_workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README's ``xdrl-eval outputs/<date>/<time>_ppo_cartpole``, run: 20 episodes."""
    from xdrl.policy import eval_cli

    first = _ids("xdrl-eval")[0]
    assert first.where.startswith("README.md") and first.args == [RUN]
    assert eval_cli.main(first.args) == 0
    out = capsys.readouterr().out
    assert out.startswith("20 deterministic episodes")
    assert len(out.splitlines()) == 2 + 20  # the summary, the table's head, one row an episode


# xdrl-report ---------------------------------------------------------------------------------

REPORTS = _ids("xdrl-report")


@pytest.mark.parametrize("command", REPORTS, ids=[c.where for c in REPORTS])
def test_each_xdrl_report_command_writes_its_report(
    command: DocCommand, in_workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from xdrl.report.cli import main

    assert main(command.args) == 0, capsys.readouterr().err
    out = Path(command.args[command.args.index("--out") + 1]) if "--out" in command.args else (
        Path(command.args[0]) / "report"
    )  # fmt: skip
    assert (in_workspace / out / "report.md").is_file()


# What README says ships ------------------------------------------------------------------------


def _readme_row(first_cell: str) -> str:
    (row,) = [
        line
        for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{first_cell}` |")
    ]
    return row


@pytest.mark.parametrize("group", ["hydra/launcher", "hydra/sweeper"])
def test_readme_and_help_list_the_same_launchers_and_sweepers(group: str) -> None:
    """README's configuration table and ``xdrl-train --help`` name the same options, and each
    is one Hydra finds (``basic`` is Hydra's own, ``joblib`` hydra-joblib-launcher's)."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from xdrl.cli import _groups

    readme = set(re.findall(r"`(\w+)`", _readme_row(group).split("|")[2]))
    (line,) = [line for line in _groups().splitlines() if line.startswith(f"  {group}: ")]
    listed = {option.split(" (")[0] for option in line.split(": ", 1)[1].split(", ")}
    assert readme == listed
    with initialize_config_module("xdrl.conf", version_base="1.3"):
        found = set(GlobalHydra.instance().config_loader().get_group_options(group))
    assert listed <= found


def test_the_extras_help_names_are_the_ones_the_check_asks_for() -> None:
    from xdrl.cli import HELP_EXTRAS
    from xdrl.config.check import FEATURES, PLUGIN_OPTIONS

    for group, options in HELP_EXTRAS.items():
        for option, extra in options.items():
            feature = PLUGIN_OPTIONS.get(group, {}).get(option, f"{group}={option}")
            assert FEATURES[feature][0] == extra, (group, option)


def test_readme_lists_every_extra_and_what_all_holds() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from packaging.requirements import Requirement

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = set(re.findall(r"(?m)^\| `(\w+)` \| ", text.split("| extra |", 1)[1].split("\n\n")[0]))
    assert table == set(extras) - {"dev", "docs"}
    (everything,) = extras["all"]
    left_out = set(extras) - {"all", "dev", "docs"} - Requirement(everything).extras
    row = _readme_row("all")
    assert all(f"`{extra}`" in row for extra in left_out), (left_out, row)
