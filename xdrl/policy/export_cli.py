"""``xdrl-export RUN_DIR --format onnx|pt2|torchscript --out FILE``: the deterministic policy as
one self-contained file, checked against the torch policy right after writing it.

Heavy imports (torch, torchrl, onnx) happen inside :func:`main` once the arguments parsed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from xdrl.policy.eval_cli import unwritable

PROG = "xdrl-export"
FORMATS = ("onnx", "pt2", "torchscript")
EXPORT_EXTRA = ("onnx", "onnxruntime", "onnxscript")
DESCRIPTION = """Write a run's deterministic policy as one file: the observation gymnasium's
env.step returns in ([batch, *obs_shape] in its dtype; Atari: the preprocessed [4, 84, 84] uint8
frame stack), env action out (int64 [batch] for discrete actions, [batch, D] for MultiDiscrete and
MultiBinary, float32 [batch, *act_shape] within the action bounds for continuous ones), the
env.mask_observations mask, one-hot encoding, casts, observation normalization and action scaling
inside. The file is checked on 1,000 observations of the run's env before it is kept. A recurrent
run's file takes and returns its hidden state: inputs observation, is_init ([batch] bool, true at an
episode's first step) and actor_h (actor_c for an LSTM), outputs action and next_actor_h
(next_actor_c); it is checked on sequences with the state carried. The output line names the inputs
the file expects."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run dir written by xdrl-train")
    parser.add_argument("--format", default="onnx", help="onnx (default) | pt2 | torchscript")
    parser.add_argument("--out", default=None, help="file to write (default: RUN_DIR/policy.<fmt>)")
    parser.add_argument(
        "--checkpoint", default="last", help="last (default), best, a frame count, or a path"
    )
    return parser


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def _check_args(args: argparse.Namespace) -> str | None:
    if args.format not in FORMATS:
        return (
            f"config error: --format: unknown format {args.format!r}; pick one of "
            f"{', '.join(FORMATS)}"
        )
    missing = [name for name in EXPORT_EXTRA if importlib.util.find_spec(name) is None]
    if args.format == "onnx" and missing:
        return (
            f"config error: --format: onnx needs {', '.join(missing)} (onnxruntime checks the "
            "file); pip install 'xdrl[export]'"
        )
    if args.out is not None:
        return unwritable("--out", args.out)
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command; exit 2 with one line on bad input or a policy that does not export."""
    args = _parser().parse_args(argv)
    problem = _check_args(args)
    if problem is not None:
        return _fail(problem)

    from xdrl.config.errors import ConfigError
    from xdrl.policy.run_dir import check_run_dir

    try:
        check_run_dir(args.run_dir)  # before torch's import: a wrong path is refused at once
    except ConfigError as err:
        return _fail(f"config error: {err}")

    import torch

    from xdrl.policy.export import ExportError, export_policy
    from xdrl.policy.loading import load_run
    from xdrl.run.process import quiet_known_warnings

    quiet_known_warnings()

    # One thread: building the policy, tracing it and checking the file on single observations
    # have little work to split, and a second thread waits for any core another process holds
    # (the Nature CNN's construction, orthogonal init: 0.08 s at 1 thread, 0.2-1.1 s at 2 with
    # two other jobs on the 2-core machine).
    torch.set_num_threads(1)
    try:
        policy = load_run(args.run_dir, args.checkpoint)
    except ConfigError as err:
        return _fail(f"config error: {err}")
    out = Path(args.out).expanduser() if args.out else policy.run_dir / f"policy.{args.format}"
    problem = unwritable("--out", out) if args.out is None else None  # the default, in RUN_DIR
    if problem is not None:
        policy.close()
        return _fail(problem)
    try:
        checked = export_policy(policy, args.format, out)
    except ExportError as err:
        return _fail(f"cannot export: {err}")
    finally:
        policy.close()
    carried = (
        f" in {checked['sequences']} sequences with the hidden state carried, largest action "
        "or state difference"
        if "sequences" in checked
        else ", largest action difference"
    )
    print(
        f"wrote {checked['file']} ({args.format}, {policy.checkpoint.name}); inputs: "
        f"{checked['inputs']}; checked on "
        f"{checked['observations']} env observations{carried} {checked['max_abs_diff']:.3g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
