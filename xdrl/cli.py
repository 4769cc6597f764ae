"""The ``xdrl-train`` entry point: compose the config, build, train, always clean up.

Nothing heavy is imported at module level, so ``--help`` and ``--cfg job`` return at once.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

if TYPE_CHECKING:
    from xdrl.config.errors import ConfigError
    from xdrl.config.spec import RunSpec
    from xdrl.run.job_record import JobRecord

log = logging.getLogger("xdrl")

CONFIG_PACKAGE = "xdrl.conf"

# The spec :func:`_precheck` checked for a single run, which its Hydra job then trains (checked
# once per run; a sweep's jobs are checked each in its own job).
_prechecked: list[RunSpec] = []

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


# Options of Hydra's groups that are not files of the conf package: Hydra's own basic launcher
# and sweeper (the defaults) and the joblib launcher of hydra-joblib-launcher (the sweep extra).
HYDRA_OPTIONS = {"hydra/launcher": ["basic", "joblib"], "hydra/sweeper": ["basic"]}
# The extra each plugin option needs, as --help shows it (the config check's FEATURES and
# PLUGIN_OPTIONS say the same; a test compares them: importing the check costs --help 0.3 s).
HELP_EXTRAS = {
    "hydra/launcher": {"joblib": "sweep", "local": "slurm", "slurm": "slurm"},
    "hydra/sweeper": {"optuna": "sweep", "pareto": "pareto"},
}


def _groups() -> str:
    """Every config group and its options, read from the shipped conf package (and Hydra's
    launchers and sweepers), each plugin option with the extra it needs."""
    lines = []

    def walk(folder, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.is_dir() or entry.name.startswith("_"):
                continue
            group = f"{prefix}{entry.name}"
            options = sorted(
                [f.name[:-5] for f in entry.iterdir() if f.name.endswith(".yaml")]
                + HYDRA_OPTIONS.get(group, [])
            )
            if options:
                lines.append(f"  {group}: {', '.join(_with_extra(group, o) for o in options)}")
            walk(entry, f"{group}/")

    walk(files(CONFIG_PACKAGE), "")
    return "\n".join(lines)


def _with_extra(group: str, option: str) -> str:
    """``joblib (xdrl[sweep])``: a launcher or sweeper option with the extra it needs."""
    extra = HELP_EXTRAS.get(group, {}).get(option)
    return option if extra is None else f"{option} (xdrl[{extra}])"


def _fast_help(overrides: list[str]) -> str:
    """Hydra's app help, without the plugin scan that makes Hydra's own take seconds."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        cfg = compose("config", overrides=[o for o in overrides if not o.startswith("-")])
    return HELP.format(groups=_groups(), config=OmegaConf.to_yaml(cfg))


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="config")
def train(cfg: DictConfig) -> float | None:
    """Train one run; returns the configured objective for sweepers (e.g. Optuna)."""
    from xdrl.config.errors import ConfigError, RunError, trace_to_log_files
    from xdrl.run.job_record import JobRecord

    record = JobRecord.of_current_job(cfg)  # .hydra/: now into a new dir, else once accepted
    try:
        if record is not None:
            _write_record(record, only_if_absent=True)
        spec = _run_spec(cfg)  # every value, before torch is imported
        _check_resume(spec)  # a sweep job's here; a single run's was the pre-check's: kept
        accept = None if record is None else lambda: _write_record(record, only_if_absent=False)
        if _in_multirun():
            return _sweep_job(spec, accept)
        return _run(spec, accept)
    except RunError as err:  # the traceback is in the run's log
        print(f"xdrl-train: error: {err}", file=sys.stderr)
        if _in_multirun():
            raise
        raise SystemExit(1) from None
    except ConfigError as err:
        trace_to_log_files(err, f"config error: {err}", log)
        print(f"xdrl-train: config error: {err}", file=sys.stderr)
        if _in_multirun():  # fail this job only; the sweep goes on and reports it
            raise RuntimeError(f"config error: {err}") from None
        raise SystemExit(2) from None
    finally:  # resume=never moved the earlier run aside and this one failed before it trained
        if record is not None and not record.exists():
            with contextlib.suppress(OSError):  # the error reported above says why
                record.write()


def _run_spec(cfg: DictConfig) -> RunSpec:
    """The job's :class:`~xdrl.config.spec.RunSpec`: a single run's from :func:`_precheck` (its
    values were checked there, before Hydra made the run dir), else checked here (each job of a
    sweep, a run started with Hydra's flags)."""
    from xdrl.config.check import check_config

    if _prechecked and not _in_multirun():
        return _prechecked.pop().with_config(cfg)
    _prechecked.clear()
    return check_config(cfg)


def _write_record(record: JobRecord, *, only_if_absent: bool) -> None:
    """Write the job's ``.hydra/``; an I/O error is one line (``RunError``)."""
    from xdrl.config.errors import RunError

    try:
        record.write_if_absent() if only_if_absent else record.write()
    except OSError as err:
        where = err.filename or record.dir
        raise RunError(f"{err.strerror or type(err).__name__}: {where}") from err


def _sweep_job(spec: RunSpec, accept: Callable[[], None] | None) -> float | None:
    """One job of a sweep. Ctrl-C stops it as it stops a single run (the iteration finishes, a
    checkpoint and ``summary.json`` say ``interrupted``) but the job returns, so the sweep ends
    normally; a job that starts after the sweep was interrupted trains nothing."""
    import signal
    import threading

    from hydra.core.hydra_config import HydraConfig

    from xdrl.sweep.stop import mark_interrupted, note_job_status, sweep_interrupted

    sweep_dir = str(HydraConfig.get().sweep.dir)
    if sweep_interrupted(sweep_dir):
        note_job_status(spec.run_dir, "not_started", "the sweep was interrupted before this job")
        log.warning("Not started: the sweep was interrupted (Ctrl-C)")
        return None
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if main_thread else None
    try:
        return _run(spec, accept)
    except SystemExit as err:
        if err.code != 128 + signal.SIGINT:  # SIGTERM / USR2: requeue as before
            raise
        mark_interrupted(sweep_dir)  # the run checkpointed and wrote its summary
        return None
    except KeyboardInterrupt:  # while it was being built (or a second Ctrl-C)
        mark_interrupted(sweep_dir)
        note_job_status(spec.run_dir, "interrupted", "Ctrl-C before training started")
        return None
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _run(spec: RunSpec, accept: Callable[[], None] | None) -> float | None:
    """Set up the process for ``spec`` (threads from its networks' widths), then train it."""
    from xdrl.run.lifecycle import run
    from xdrl.run.process import setup_process

    return run(
        spec,
        setup_process(spec.num_threads, spec.hidden_sizes, spec.collector_workers),
        accept=accept,
    )


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _precheck(args: list[str]) -> str | None:
    """One line saying what is wrong with a single run's command line (None: nothing): a
    misspelt key or option, then every value, checked before Hydra makes the run dir, so a
    config error leaves nothing on disk. One compose (each costs ~0.3 s of start-up)."""
    from xdrl.config.check import check_config, check_writable_dir
    from xdrl.config.errors import ConfigError

    cfg = _compose(args)
    if not isinstance(cfg, DictConfig):
        return cfg
    try:
        run_dir, job_name = str(cfg.hydra.run.dir), str(cfg.hydra.job.name)
        if not OmegaConf.is_interpolation(cfg, "run_dir") and (
            os.path.abspath(str(cfg.run_dir)) != os.path.abspath(run_dir)
        ):
            raise ConfigError(
                "run_dir",
                f"{cfg.run_dir} is not hydra.run.dir={run_dir}; give one of the two (they name "
                "the same folder)",
            )
        check_writable_dir(run_dir, "hydra.run.dir")
        with open_dict(cfg):
            del cfg["hydra"]
            for key, value in (("run_dir", os.path.abspath(run_dir)), ("exp_name", job_name)):
                if OmegaConf.is_interpolation(cfg, key):  # ${hydra:...}: what the job resolves
                    cfg[key] = value
        spec = check_config(cfg)
        _check_resume(spec)
    except ConfigError as err:
        return str(err)
    _prechecked[:] = [spec]
    return None


def _compose(args: list[str]) -> DictConfig | str | None:
    """The config ``args`` compose to (Hydra's node included), or the one line saying which key
    or option is misspelt (None: an error Hydra then reports itself)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import ConfigCompositionException, MissingConfigException

    from xdrl.config.errors import first_line

    try:
        with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
            return compose("config", overrides=args, return_hydra_config=True)
    except MissingConfigException as err:
        return _missing_option(str(err))
    except ConfigCompositionException as err:
        return _sweep_without_multirun(str(err)) or _unknown_key(str(err), args)
    except Exception as err:  # noqa: BLE001 - Hydra then reports anything else itself
        return first_line(err) if str(err).strip() else None


def _sweep_without_multirun(text: str) -> str | None:
    """``key: 'a,b' is a sweep; ...`` from Hydra's 'Ambiguous value' and 'requires --multirun'
    errors (None: another composition error)."""
    import re

    match = re.search(r"(?:Ambiguous value for argument|Sweep parameters) '([^'=]+)=(.*)'", text)
    if match is None:
        return None
    key, value = match[1], match[2]
    as_list = f" ({key}=[{value}] for a list)" if text.startswith("Ambiguous") else ""
    return (
        f"{key.lstrip('+~')}: {value!r} is a sweep; add -m to run one job per value, or give one "
        f"value{as_list}"
    )


def _precheck_hydra_mode(args: list[str]) -> str | None:
    """The one line of :func:`_precheck` for a command line with Hydra's flags (``-m``,
    ``--cfg``, ``--info``, ...): misspelt keys and options and, for a sweep, the launcher's and
    sweeper's extras. Values are left to each job (a bad one fails its own job, and ``--cfg``
    prints what it was given). None: nothing wrong, or flags xdrl leaves to Hydra."""
    parsed = _hydra_flags(args)
    if parsed is None:
        return None
    printing = [
        flag for flag, name in (("--cfg", "cfg"), ("--info", "info")) if getattr(parsed, name)
    ]
    if parsed.multirun and printing:
        return (
            f"-m: a sweep cannot be combined with {printing[0]} (Hydra runs one mode at a time); "
            f"drop -m to print the config a job gets, or {printing[0]} to sweep"
        )
    if not parsed.multirun:
        cfg = _compose(parsed.overrides)
        return cfg if not isinstance(cfg, DictConfig) else None
    return _precheck_sweep(parsed.overrides)


def _hydra_flags(args: list[str]) -> argparse.Namespace | None:
    """``args`` read by Hydra's own parser; None for a bad flag (Hydra says why) or a mode with
    nothing to compose (help, version, another config, shell completion)."""
    from hydra._internal.utils import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # Hydra prints its own usage
            parsed, unknown = get_args_parser().parse_known_args(args)
    except SystemExit:
        return None
    skip = ("help", "hydra_help", "version", "shell_completion", "experimental_rerun")
    other_config = (parsed.config_path, parsed.config_name, parsed.config_dir)
    if unknown or any(getattr(parsed, name, None) for name in skip) or any(other_config):
        return None
    return parsed


def _precheck_sweep(overrides: list[str]) -> str | None:
    """A sweep's command line composed with every swept value at its first (keys), every option
    of a swept group looked up, and the launcher's and sweeper's packages checked."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob, IntervalSweep
    from hydra.errors import HydraException

    from xdrl.config.check import check_launch_plugins
    from xdrl.config.errors import ConfigError
    from xdrl.sweep.settings import check_sweeper_settings

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return None  # Hydra says what does not parse
    first: list[str] = []
    last: list[str] = []  # every swept value at its last (:func:`_every_job_error`)
    swept: dict[str, list[str]] = {}
    for override in parsed:
        line, value = override.input_line or "", override.value()
        end = line
        if override.is_discrete_sweep() and not isinstance(value, Glob):
            values = list(override.sweep_string_iterator())
            swept[override.key_or_group] = values
            line = f"{override.get_key_element()}={values[0]}" if values else ""
            end = f"{override.get_key_element()}={values[-1]}" if values else ""
        elif isinstance(value, IntervalSweep):
            line = f"{override.get_key_element()}={value.start}"
            end = f"{override.get_key_element()}={value.end}"
        elif override.is_sweep_override():
            line = end = ""  # a glob picks existing options only
        first += [line] if line else []
        last += [end] if end else []
    cfg = _compose(first)
    if not isinstance(cfg, DictConfig):
        return cfg
    error = _missing_swept_option(swept)
    if error is not None:
        return error
    try:
        check_launch_plugins(cfg.hydra)
        check_sweeper_settings(cfg.hydra)
    except ConfigError as err:
        return str(err)
    varied = {o.key_or_group for o in parsed if o.is_sweep_override()}
    return _every_job_error(cfg, last if last != first else None, varied)


def _every_job_error(cfg: DictConfig, last: list[str] | None, varied: set[str]) -> str | None:
    """The config check's line for a value every job of a sweep would fail on, before any job
    starts (None: the first job passes, or what fails is a key the sweep varies, which fails its
    own job and the sweep reports it). ``cfg`` is the first job's (each swept value at its
    first); a failure at a key nothing sweeps is confirmed on ``last`` (each at its last) before
    it stops the sweep, so a value that fails only beside some swept ones leaves the rest run."""
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
    if isinstance(params, DictConfig):  # the Optuna sweeper's search space
        varied = varied | {str(key) for key in params}
    error = _job_error(cfg)
    if error is None or any(error.key == k or error.key.startswith(f"{k}.") for k in varied):
        return None
    if last is not None:
        other = _compose(last)
        if isinstance(other, DictConfig) and str(_job_error(other)) != str(error):
            return None
    return str(error)


def _job_error(cfg: DictConfig) -> ConfigError | None:
    """The config check's error for a sweep job's config (``cfg`` less Hydra's node; the job's
    folder and name are Hydra's, so they are not checked here)."""
    from xdrl.config.check import check_config
    from xdrl.config.errors import ConfigError

    job = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
    try:
        check_config(job)
    except ConfigError as err:
        return err
    return None


def _missing_swept_option(swept: dict[str, list[str]]) -> str | None:
    """The line of :func:`_missing_option` for the first swept option its group lacks."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for group, values in swept.items():
            options = loader.get_group_options(group)
            for value in values:
                if options and value not in options:
                    return _option_line(group, value, options)
    return None


def _check_resume(spec: RunSpec) -> None:
    """Refuse a resume that changed what shapes the model, or the seed, before anything is
    written: a single run's in the pre-check (before Hydra makes or touches the run dir), a sweep
    job's at its start. The answer stays on ``spec.resume_check``, which the run reads instead
    of comparing again; a config that does not resolve here is left to the run's own check."""
    from xdrl.config.resume import NEVER, checkpoints_by_name

    if spec.resume == NEVER or not (spec.resume or Path(spec.run_dir).is_dir()):
        return
    try:
        spec.resolved  # noqa: B018 - resolved once, here; kept on the spec
    except Exception:  # noqa: BLE001 - a value needing Hydra: the run's own check decides
        return
    spec.resume_check.newest(checkpoints_by_name(spec.resume, spec.run_dir))


def _missing_option(text: str) -> str:
    """``group: no option 'x'; did you mean group=y?`` from Hydra's MissingConfigException (its
    'Could not find' or 'Could not load' line, then the group's options, one per tab-led line)."""
    import re

    match = re.search(r"Could not (?:find|load) '([^']+)'", text)
    missing = match[1] if match else text.split("'")[1] if "'" in text else text
    group, _, option = missing.rpartition("/")
    chosen = re.search(r"In '([^']+)'", text)  # an option of the group whose default is missing
    if chosen and chosen[1].rpartition("/")[0] == group:
        option = chosen[1].rpartition("/")[2]
    listed = text.split("Available options", 1)[1] if "Available options" in text else ""
    listed = listed.split("Config search path", 1)[0]
    options = sorted(line.strip() for line in listed.split("\n") if line.startswith("\t"))
    return _option_line(group, option, options)


def _option_line(group: str, option: str, options: list[str]) -> str:
    """``group: no option 'x'; <the extra to install, a close match or the options>``."""
    import difflib

    from xdrl.config.check import plugin_option_hint

    hint = plugin_option_hint(group, option)
    if hint is not None:
        return f"{group}: {group}={option} {hint}"
    close = difflib.get_close_matches(option, options, n=1)
    hint = f"did you mean {group}={close[0]}?" if close else f"options: {', '.join(options)}"
    return f"{group}: no option {option!r}; {hint}"


def _unknown_key(text: str, args: list[str]) -> str:
    """``key: not a config key; did you mean ...?`` from Hydra's ConfigCompositionException,
    with hints from the config the other overrides choose (``algorithm=dqn``: DQN's keys)."""
    from xdrl.config.check import unknown_key_line

    key = text.split("'")[1] if "'" in text else text
    return unknown_key_line(key, args, CONFIG_PACKAGE)


def _register_plugins() -> None:
    """Register xdrl's Hydra sweepers (``hydra/sweeper=pareto``, ``optuna``) by class: an
    editable install hides the ``hydra_plugins`` namespace from Hydra's package scan (a wheel
    needs no help)."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.xdrl_optuna.optuna_sweeper import OptunaSweeper
    from hydra_plugins.xdrl_pareto.pareto_sweeper import ParetoSweeper

    Plugins.instance().register(ParetoSweeper)
    Plugins.instance().register(OptunaSweeper)


def main() -> None:
    """Console script: :func:`run_command`, then :func:`exit_without_teardown` once torch is
    loaded (an uncaught exception still ends the usual way, with its traceback)."""
    try:
        run_command(sys.argv[1:])
    except SystemExit as err:
        code = err.code
    else:
        code = 0
    if "torch" not in sys.modules or sys.getprofile() or sys.gettrace():  # profilers write at exit
        raise SystemExit(code)
    exit_without_teardown(code)


def exit_without_teardown(code: int | str | None) -> NoReturn:
    """End the process as ``sys.exit(code)`` would, minus the interpreter's module teardown.

    With torch, TorchRL and torch._dynamo loaded, Python's finalization (freeing every module
    and object one by one) took 1-2.5 s after the run had written everything (measured here:
    `import xdrl.training.build` then exit, 2.1 s from the last atexit handler to the process's end
    on 2
    busy cores; ~1 s quiet), a tenth of a CartPole run. Everything a normal exit does that
    matters is done first, in the interpreter's order: ``threading._shutdown`` (the callbacks
    thread pools register with ``threading._register_atexit``, which wake their manager threads,
    then the join of every non-daemon thread; joining first hung a sweep process that had
    imported torch on joblib's idle loky manager thread), atexit handlers (sweep summaries,
    logging's flush and close), stdout and stderr flushed; then ``os._exit``.
    """
    import atexit
    import os
    import threading

    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or a full disk: nothing left to save
            pass
    os._exit(code or 0)


def run_command(args: list[str]) -> None:
    """A fast ``--help``; single runs get their overrides and every value checked first, so a
    typo or a bad value is one line on stderr (exit 2) and no run dir is made; sweeps (``-m``)
    and Hydra's printing modes (``--cfg``, ``--info``) get the same line for a typo (a sweep
    also for a missing launcher or sweeper extra); then Hydra runs the command."""
    if "--help" in args or "-h" in args:
        print(_fast_help([a for a in args if a not in ("--help", "-h")]))
        return
    args = sys.argv[1:] = _run_dir_is_hydra_dir(args)  # Hydra's main reads sys.argv
    from xdrl.run.process import warning_lines

    with warning_lines("xdrl-train"):  # the check's warnings: "xdrl-train: warning: ..."
        error = check_command(args)
    if error is not None:
        print(f"xdrl-train: config error: {error}", file=sys.stderr)
        raise SystemExit(2)
    _register_plugins()
    try:
        from xdrl.run.lock import lock_named_run_dir

        with lock_named_run_dir(args):
            train()
    except KeyboardInterrupt as err:  # a second Ctrl-C, or one before training started
        lifecycle = sys.modules.get("xdrl.run.lifecycle")  # its run printed what it left
        if lifecycle is None or not isinstance(err, lifecycle.InterruptReported):
            print("xdrl-train: aborted by Ctrl-C (no checkpoint written at that point)",
                  file=sys.stderr)  # fmt: skip
        raise SystemExit(130) from None
    _exit_if_sweep_interrupted()


def check_command(args: list[str]) -> str | None:
    """The one line ``xdrl-train args`` stops on before Hydra starts (None: Hydra runs it): a
    single run's every value (:func:`_precheck`); with Hydra's flags, misspelt keys and options,
    and for a sweep its plugins, its sweeper's settings and the values every job gets
    (:func:`_precheck_hydra_mode`). In process and without side effects, so a test can check a
    command line (the docs' commands) without running it."""
    args = _run_dir_is_hydra_dir(args)
    flags = any(a.startswith("-") for a in args)
    return _precheck_hydra_mode(args) if flags else _precheck(args)


def _run_dir_is_hydra_dir(args: list[str]) -> list[str]:
    """A single run's ``run_dir=X`` also names Hydra's run dir (``hydra.run.dir=X``), so the
    run's config record (``.hydra/``), its log, lock, checkpoints and summary share one folder.
    Without it Hydra made a time-stamped ``outputs/`` folder beside, and two runs started in the
    same second wrote their configs into the same one. When both are given, :func:`_precheck`
    refuses two different folders."""
    if any(a in ("-m", "--multirun") for a in args) or any(
        a.startswith("hydra.run.dir=") for a in args
    ):
        return args
    named = [a.split("=", 1)[1] for a in args if a.startswith("run_dir=")]
    return [*args, f"hydra.run.dir={named[-1]}"] if named else args


def _exit_if_sweep_interrupted() -> None:
    """Exit 130 with one line after a sweep that Ctrl-C stopped (its table says which jobs)."""
    sweep = sys.modules.get("xdrl.sweep.stop")
    sweep_dir = sweep.interrupted_sweep() if sweep is not None else None
    if sweep_dir is not None:
        print(
            f"xdrl-train: sweep interrupted in {sweep_dir}; checkpoints written; run the same "
            f"command with hydra.sweep.dir={sweep_dir} to continue",
            file=sys.stderr,
        )
        raise SystemExit(130)


if __name__ == "__main__":
    main()
