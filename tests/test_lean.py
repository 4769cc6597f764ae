"""xdrl/lean/ is a contract: every module there redoes a TorchRL (or torch) piece for speed, says
why in its docstring with a measured figure, and has a parity test that compares it with the
original on the same input. This walks the folder, so a new module without either fails here."""

from __future__ import annotations

import ast
import re

import pytest

from tests.conftest import REPO

LEAN = REPO / "xdrl" / "lean"
# module -> (test file, the test comparing it with the original on the same input)
PARITY = {
    "categorical_actor": ("test_collector.py", "test_same_batches_as_torchrl_collector"),
    "collector": ("test_collector.py", "test_same_batches_as_torchrl_collector"),
    "dqn_loss": ("test_dqn_loss.py", "test_same_values_and_gradients_as_dqn_loss"),
    "egreedy": ("test_egreedy.py", "test_same_epsilon_as_torchrl_after_every_step"),
    "ensemble": ("test_sac_loss.py", "test_ensemble_is_the_separate_networks"),
    "frame_replay": ("test_atari.py", "test_frame_replay_rebuilds_the_stored_stacks_exactly"),
    "fused_adam": ("test_fused_adam.py", "test_same_update_as_torch_bit_for_bit"),
    "gae": ("test_stacked_gae.py", "test_numpy_recursion_is_torchrls_bit_for_bit"),
    "mlp_forward": ("test_ppo_loss.py", "test_same_values_and_gradients_as_clip_ppo_loss"),
    "ppo_loss": ("test_ppo_loss.py", "test_same_values_and_gradients_as_clip_ppo_loss"),
    "q_policy": ("test_collector.py", "test_same_batches_as_torchrl_collector"),
    "replay": ("test_replay.py", "test_same_batches_as_torchrl_sampling"),
    "recurrent_ppo_loss": (
        "test_recurrent.py",
        "test_lean_recurrent_loss_equals_torchrl_recurrent_mode",
    ),
    "normal_actor": (
        "test_gaussian_actor.py",
        "test_lean_and_torchrl_losses_agree_on_one_batch",
    ),
    "sac_loss": ("test_sac_loss.py", "test_same_values_and_gradients_as_sac_loss"),
    "tanh_normal_actor": ("test_collector.py", "test_same_batches_as_torchrl_collector"),
    "td3_actor": ("test_collector.py", "test_same_batches_as_torchrl_collector"),
    "td3_loss": ("test_td3_loss.py", "test_same_values_and_gradients_as_td3_loss"),
    "trainer": ("test_trainer.py", "test_same_optimization_as_torchrl_trainer"),
    "vecnorm": ("test_lean_vecnorm.py", "test_same_statistics_and_outputs_as_vecnormv2"),
}
# not a re-implementation: what the collector needs to know of a policy (an interface)
NOT_LEAN = {"policy_types"}
# a number with a unit of time, speed, size or ratio: "0.91 ms", "2.0x", "14%", "5.6 GB"
FIGURE = re.compile(r"\d[\d,.]*\s?(?:ms|µs|us|s\b|x\b|%|[KMG]B\b|frames/s|steps/s)")
MODULES = sorted(p.stem for p in LEAN.glob("*.py") if p.stem != "__init__")


def _docstring(module: str) -> str:
    return ast.get_docstring(ast.parse((LEAN / f"{module}.py").read_text())) or ""


@pytest.mark.parametrize("module", sorted(set(MODULES) - NOT_LEAN))
def test_each_lean_module_says_why_with_a_figure(module: str) -> None:
    doc = _docstring(module)
    assert re.search(r"^Why\b", doc, re.M), f"xdrl/lean/{module}.py: no 'Why' paragraph"
    assert FIGURE.search(doc), f"xdrl/lean/{module}.py: no measured figure in its 'why'"


@pytest.mark.parametrize("module", sorted(set(MODULES) - NOT_LEAN))
def test_each_lean_module_has_a_parity_test(module: str) -> None:
    assert module in PARITY, f"xdrl/lean/{module}.py has no parity test in PARITY"
    file, name = PARITY[module]
    tree = ast.parse((REPO / "tests" / file).read_text())
    tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert name in tests, f"tests/{file} has no {name}"
    imported = {
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    originals = {m for m in imported if m.split(".")[0] in {"torchrl", "torch"}}
    assert originals, f"tests/{file} imports no TorchRL or torch original to compare with"


def test_the_tables_name_only_modules_that_exist() -> None:
    assert set(PARITY) | NOT_LEAN <= set(MODULES)
