"""The benchmark modes, one module each (its workload, its run, its report rows), in the order
``--mode all`` runs them."""

from __future__ import annotations

from functools import partial

from benchmarks.modes import (
    atari,
    collectors,
    eval_speed,
    hook_overhead,
    off_policy,
    ppo_throughput,
    recurrent,
    scale,
    startup,
    time_to_475,
)
from benchmarks.runner import Mode


def _off_policy(name: str) -> Mode:
    return Mode(run=partial(off_policy.run, name), rows=partial(off_policy.rows, name))


MODES: dict[str, Mode] = {
    "ppo-throughput": Mode(ppo_throughput.run, ppo_throughput.rows),
    "scale": Mode(scale.run, scale.rows, scale.lines),
    "time-to-475": Mode(time_to_475.run, time_to_475.rows),
    "eval": Mode(eval_speed.run, eval_speed.rows),
    "hook-overhead": Mode(hook_overhead.run, hook_overhead.rows, needs_sb3=False),
    "sac": _off_policy("sac"),
    "td3": _off_policy("td3"),
    "dqn": _off_policy("dqn"),
    "halfcheetah": _off_policy("halfcheetah"),
    "startup": Mode(startup.run, startup.rows, needs_sb3=False),
    "atari": Mode(atari.run, atari.rows),
    "collectors": Mode(collectors.run, collectors.rows, needs_sb3=False),
    "recurrent": Mode(recurrent.run, recurrent.rows),
}
