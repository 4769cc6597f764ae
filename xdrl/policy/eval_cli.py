"""``xdrl-eval RUN_DIR [env.KEY=VALUE ...]``: evaluate a trained policy over N episodes.

Heavy imports (torch, torchrl) happen inside :func:`main` once the arguments parsed, so
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROG = "xdrl-eval"
DESCRIPTION = """Rebuild a run's env and policy from its own config, load a checkpoint and play
--episodes episodes (one per env, stepped together, with the evaluation code the training hooks
use), deterministic or stochastic as the run's eval.deterministic says unless --deterministic or
--stochastic is given. Value-based policies (DQN) play greedy when deterministic and
epsilon-greedy at algorithm.build.eval_epsilon when stochastic. Env and eval keys can be
overridden the Hydra way, anywhere on the line, e.g. env.max_episode_steps=1000 or
env.reward_weights=[0.2,0.8]."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run dir written by xdrl-train")
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="env.KEY=VALUE or eval.KEY=VALUE"
    )
    parser.add_argument(
        "--checkpoint", default="last", help="last (default), best, a frame count, or a path"
    )
    parser.add_argument("--episodes", default="20", help="episodes to play (default 20)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--deterministic",
        dest="mode",
        action="store_const",
        const="deterministic",
        help="play the policy's mode (greedy for DQN) whatever the run's eval.deterministic",
    )
    mode.add_argument(
        "--stochastic",
        dest="mode",
        action="store_const",
        const="stochastic",
        help="sample actions (DQN: epsilon-greedy at algorithm.build.eval_epsilon) whatever the "
        "run's eval.deterministic",
    )
    parser.add_argument(
        "--seed", default=None, help="seed of the first env (default: the run's eval seed)"
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results here")
    parser.add_argument(
        "--video",
        default=None,
        metavar="FILE.mp4",
        help="record every episode, one after another, into one mp4 (video extra; with "
        "env.batching=parallel only the first)",
    )
    return parser


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


class _Stopped(Exception):
    """SIGINT or SIGTERM arrived while the command ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM end the command at the next Python instruction (an env step of an
    episode that may run for minutes), as :class:`_Stopped`; the handlers are put back after."""

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _check_args(args: argparse.Namespace) -> str | None:
    """One line for the first bad argument, before anything heavy runs."""
    if not args.episodes.isdigit() or int(args.episodes) < 1:
        return f"config error: --episodes: must be a positive integer, got {args.episodes!r}"
    if args.seed is not None and not args.seed.lstrip("-").isdigit():
        return f"config error: --seed: must be an integer, got {args.seed!r}"
    for option in ("json", "video"):
        target = getattr(args, option)
        problem = unwritable(f"--{option}", target) if target is not None else None
        if problem is not None:
            return problem
    if args.video is not None and importlib.util.find_spec("imageio_ffmpeg") is None:
        return "config error: --video: needs the video extra; pip install 'xdrl[video]'"
    return None


def unwritable(option: str, target: str | Path) -> str | None:
    """Why ``target`` cannot be written (its folder missing, not a folder, or refusing a new
    file), as a config-error line; None if it can. Tried with a temporary file that is removed at
    once: permission bits alone do not tell (root ignores them; read-only mounts)."""
    path = Path(target).expanduser()
    folder = path.parent
    if path.is_dir():
        return f"config error: {option}: {target} is a folder; name a file"
    if folder.exists() and not folder.is_dir():
        return f"config error: {option}: {folder} is a file, not a folder; pick another file"
    if not folder.is_dir():
        return f"config error: {option}: the folder of {target} does not exist; create it"
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".xdrl-write-check-")
    except OSError as err:
        reason = err.strerror or type(err).__name__
        return f"config error: {option}: cannot write into {folder} ({reason}); pick another file"
    os.close(handle)
    os.unlink(probe)
    return None


def _table(record: dict[str, Any]) -> str:
    objectives = record.get("objective_returns")
    head = "episode  return      length"
    if objectives:
        head += "  " + "  ".join(f"objective_{i:<3d}" for i in range(len(objectives[0])))
    rows = [head]
    for i, (ret, length) in enumerate(zip(record["returns"], record["lengths"], strict=True)):
        row = f"{i:>7d}  {ret:<10.4g}  {length:>6d}"
        if objectives:
            row += "  " + "  ".join(f"{v:<13.4g}" for v in objectives[i])
        rows.append(row)
    return "\n".join(rows)


def _summary(record: dict[str, Any]) -> str:
    mode = "deterministic" if record["deterministic"] else "stochastic"
    if "epsilon" in record:
        mode += f" (epsilon {record['epsilon']:g})" if record["epsilon"] else " (greedy)"
    line = (
        f"{record['episodes']} {mode} episodes ({record['mode_from']}) at "
        f"{record['frames']:,} frames "
        f"({Path(record['checkpoint']).name}): return {record['return_mean']:.4g} "
        f"+/- {record['return_std']:.4g}, length {sum(record['lengths']) / record['episodes']:.1f}"
    )
    if "objective_return_means" in record:
        means = ", ".join(f"{v:.4g}" for v in record["objective_return_means"])
        line += f"; objectives [{means}]"
    return line


def _mode(flag: str | None, run_setting: bool) -> tuple[bool, str]:
    """Deterministic or not, and why: the flag, else the run's ``eval.deterministic``."""
    if flag is not None:
        return flag == "deterministic", f"--{flag}"
    return run_setting, f"the run's eval.deterministic={str(run_setting).lower()}"


def _play(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Load the run's policy and play its episodes: the record and where its mode came from."""
    import torch

    from xdrl.policy.evaluate import evaluate
    from xdrl.policy.loading import load_run
    from xdrl.run.threads import pick_threads

    torch.set_num_threads(1)  # building the policy splits no work (as xdrl-export)
    policy = load_run(
        args.run_dir,
        args.checkpoint,
        overrides=args.overrides,
        num_envs=int(args.episodes),
        seed=None if args.seed is None else int(args.seed),
        render=args.video is not None,
    )
    deterministic, mode_from = _mode(args.mode, policy.spec.eval.deterministic)
    # play on the threads the run's own num_threads rule picks here and now
    torch.set_num_threads(pick_threads(policy.spec.num_threads, policy.spec.hidden_sizes)[0])
    try:
        return evaluate(policy, deterministic=deterministic, video=args.video), mode_from
    finally:
        policy.close()


def main(argv: list[str] | None = None) -> int:
    """Run the command; exit 2 with one line on bad input (nothing written)."""
    args = _parser().parse_intermixed_args(argv)
    problem = _check_args(args)
    if problem is not None:
        return _fail(problem)

    from xdrl.config.errors import ConfigError
    from xdrl.policy.run_dir import check_run_dir
    from xdrl.run.process import quiet_known_warnings

    quiet_known_warnings()
    try:
        check_run_dir(args.run_dir)  # before torch's import: a wrong path is refused at once
        with _stop_on_signals():
            record, mode_from = _play(args)
    except ConfigError as err:
        return _fail(f"config error: {err}")
    except _Stopped as stop:
        print(f"{PROG}: stopped by {stop}; nothing written", file=sys.stderr)
        return 128 + stop.signum
    record["mode_from"] = mode_from
    print(_summary(record))
    print(_table(record))
    if args.json is not None:
        try:
            Path(args.json).expanduser().write_text(json.dumps(record, indent=2) + "\n")
        except OSError as err:  # writable when checked, not any more
            return _fail(f"config error: --json: cannot write {args.json} ({err.strerror})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
