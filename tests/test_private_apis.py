"""A tripwire: every private name of torch, TorchRL, tensordict, Hydra, OmegaConf, Optuna,
gymnasium, W&B and CPython that xdrl relies on still exists, and each private function or method
xdrl overrides or calls still has the signature it was written against.

xdrl reaches past the public APIs in a few measured places (each module says why). An upgrade
that renames one of these names would otherwise make a lean path fall back silently (only speed
drops) or fail deep inside a run; here it turns into a red test naming the xdrl module to fix.
``test_every_private_name_xdrl_uses_is_listed`` reads xdrl's source, so a new private name
cannot be used without being listed here.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

# (module, dotted attribute, the xdrl module relying on it)
ATTRIBUTES = [
    # XdrlTrainer.optim_steps replays Trainer.optim_steps through its private hook runners
    *(
        ("torchrl.trainers", f"Trainer.{name}", "xdrl/lean/trainer.py")
        for name in (
            "_pre_optim_hook",
            "_pre_epoch_log_hook",
            "_pre_epoch_hook",
            "_process_optim_batch_hook",
            "_post_optim_hook",
            "_post_optim_log",
            "_post_epoch_log_hook",
            "_post_epoch_hook",
            "_post_optim_complete_log_hook",
        )
    ),
    (
        "torchrl.trainers",
        "DefaultOptimizationStepper._compute_and_clip_grad_norm",
        "algorithms/stepper.py",
    ),
    ("torchrl.objectives", "ClipPPOLoss._clip_bounds", "xdrl/lean/ppo_loss.py"),
    ("tensordict", "TensorDict._new_unsafe", "xdrl/envs/vector_env.py"),
    ("torchrl.envs.libs.gym", "_gym_to_torchrl_spec_transform", "xdrl/envs/vector_env.py"),
    ("torchrl.envs", "EnvBase._step", "xdrl/envs/vector_env.py"),
    ("torchrl.envs", "EnvBase._reset", "xdrl/envs/vector_env.py"),
    ("torchrl.envs", "EnvBase._set_seed", "xdrl/envs/vector_env.py"),
    # LeanWorkerCollector is built by this runner with its Collector's arguments and sets the
    # _use_buffers it reads
    ("torchrl.collectors._runner", "_main_async_collector_impl", "xdrl/training/workers.py"),
    # AsyncWorkerCollector.iterator drives MultiAsyncCollector's workers itself
    *(
        ("torchrl.collectors", f"MultiAsyncCollector.{name}", "xdrl/training/workers.py")
        for name in ("_get_from_queue", "_should_use_random_frames")
    ),
    # WorkerCollector._run_processes spawns the workers with the stop signals blocked
    ("torchrl.collectors", "MultiCollector._run_processes", "xdrl/training/workers.py"),
    # RunObservationNorm.merge updates the run's statistics from the workers' raw observations
    ("torchrl.envs.transforms", "VecNormV2._stateful_update", "xdrl/training/worker_norm.py"),
    ("torchrl.checkpoint", "Checkpoint._local_path", "xdrl/training/checkpointing.py"),
    ("torchrl.checkpoint", "Checkpoint._resolve_adapter", "xdrl/training/checkpointing.py"),
    ("torch", "_foreach_lerp_", "xdrl/algorithms/off_policy.py (LeanSoftUpdate)"),
    ("torch", "_foreach_copy_", "xdrl/algorithms/off_policy.py (LeanHardUpdate)"),
    ("torchrl.modules", "AdditiveGaussianModule._add_noise", "xdrl/lean/td3_actor.py"),
    ("torchrl.data", "LazyTensorStorage._rand_given_ndim", "xdrl/lean/replay.py"),
    # GrowingRoundRobinWriter moves the cursor after the rows of a storage loaded into more room
    ("torchrl.data", "RoundRobinWriter._cursor", "xdrl/lean/replay.py"),
    ("torchrl.objectives", "SACLoss._alpha", "xdrl/lean/sac_loss.py"),
    ("torchrl.record.loggers.wandb", "WandbLogger._create_experiment", "xdrl/training/loggers.py"),
    *(
        ("torchrl.record.loggers", f"CSVLogger.{name}", "xdrl/training/loggers.py")
        for name in ("_checkpoint_state", "_load_checkpoint_state")
    ),
    ("omegaconf", "DictConfig._get_node", "xdrl/config/check.py"),
    ("hydra._internal.utils", "get_args_parser", "xdrl/cli.py (_hydra_flags)"),
    ("hydra._internal.core_plugins.basic_sweeper", "BasicSweeper", "pareto_sweeper.py"),
    ("hydra._internal.core_plugins.basic_sweeper", "BasicSweeper.split_arguments", "pareto"),
    ("hydra.core.utils", "JobReturn._return_value", "pareto_sweeper.py, optuna_sweeper.py"),
    ("torch", "_foreach_norm", "xdrl/algorithms/stepper.py"),
    ("torch", "_foreach_mul_", "xdrl/algorithms/stepper.py"),
    ("atexit", "_run_exitfuncs", "xdrl/cli.py (exit_without_teardown)"),
    ("threading", "_shutdown", "xdrl/cli.py (exit_without_teardown)"),
    ("torchrl.envs.batched_envs", "BatchedEnvBase", "xdrl/training/env_state.py"),
    *(
        ("torch", name, "xdrl/lean/fused_adam.py")
        for name in ("_fused_adam_", "_fused_adamw_", "_foreach_add_")
    ),
    *(
        ("torch.optim.optimizer", name, "xdrl/lean/fused_adam.py")
        for name in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")
    ),
]

# Attributes only an instance holds, found in the source of the class that sets them.
SET_IN_SOURCE = [
    ("torchrl.trainers", "Trainer", "self._log_dict", "xdrl/trainer_hooks/logging/progress.py"),
    ("torchrl.trainers", "Trainer", "self._stop_training", "trainer_hooks/logging/evaluation.py"),
    ("torchrl.trainers", "Trainer", "_optim_count", "xdrl/lean/trainer.py"),
    ("torchrl.trainers", "Trainer", "self._last_save", "xdrl/lean/trainer.py"),
    ("optuna.trial", "FrozenTrial", "self._trial_id", "xdrl_optuna/optuna_sweeper.py"),
    *(
        ("torchrl.envs.transforms", "VecNormV2", f"self.{name}", "loading.py, lean/vecnorm.py")
        for name in ("_loc", "_var")
    ),
    ("torchrl.envs.transforms", "VecNormV2", "self._count", "worker_norm.py, lean/vecnorm.py"),
    ("torchrl.envs.transforms", "VecNormV2", "self._cast_int_to_float", "xdrl/lean/vecnorm.py"),
    *(
        ("gymnasium.utils", "EzPickle", f"self.{name}", "xdrl/training/env_state.py")
        for name in ("_ezpickle_args", "_ezpickle_kwargs")
    ),
    (
        "torchrl.record.loggers.wandb",
        "WandbLogger",
        "self._wandb_kwargs",
        "xdrl/training/loggers.py",
    ),
    ("torchrl.record.loggers.csv", "CSVExperiment", "self.files", "xdrl/training/loggers.py"),
    ("torchrl.record.loggers.wandb", "WandbLogger", "self._step_registry", "wandb_hooks.py"),
    ("wandb.sdk.wandb_run", "Run", "self._local_step", "wandb_hooks.py"),
    ("torchrl.envs", "SerialEnv", "self._envs", "render.py, xdrl/training/env_state.py"),
    ("torchrl.envs.libs.gym", "GymWrapper", "self._env", "render.py, xdrl/training/env_state.py"),
    ("torchrl.collectors", "Collector", "self._carrier", "xdrl/training/env_state.py"),
    ("torchrl.collectors", "MultiCollector", "self._frames", "xdrl/training/workers.py"),
    # WorkerCollector.procs watches TorchRL's list of workers as _run_processes spawns them
    ("torchrl.collectors", "MultiCollector", "self.procs.append", "xdrl/training/workers.py"),
    # RayWorkerCollector.shutdown: stop the actors only if they started, release Ray's lease
    *(
        ("torchrl.collectors.distributed", "RayCollector", f"self.{name}", "ray_workers.py")
        for name in ("_remote_collectors", "_runtime_lease")
    ),
    *(
        ("torchrl.objectives.utils", "TargetNetUpdater", f"self.{name}", "off_policy.py")
        for name in ("_sources", "_targets")
    ),
    *(
        ("torchrl.objectives", "SACLoss", f"self.{name}", "xdrl/lean/sac_loss.py")
        for name in ("_version", "min_log_alpha", "max_log_alpha", "skip_done_states")
    ),
    ("torchrl.objectives.common", "LossModule", "self._value_estimator", "sac/td3/dqn_loss.py"),
    *(
        ("torch.optim", "Optimizer", f"self.{name}", "xdrl/lean/fused_adam.py")
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
    ),
]


# The signature of each private function or method xdrl overrides or calls, as
# ``inspect.signature`` prints it for the versions pinned in constraints-cpu.txt. A change means the
# override or the call in the xdrl module named must be read again against the new library.
SIGNATURES = {
    # overridden
    ("torchrl.trainers", "DefaultOptimizationStepper._compute_and_clip_grad_norm"): (
        "(optimizer: 'optim.Optimizer', clip_grad_norm: 'bool', clip_norm: 'float | None')"
        " -> 'float'",
        "xdrl/algorithms/stepper.py",
    ),
    ("torchrl.envs", "EnvBase._step"): (
        "(self, tensordict: 'TensorDictBase') -> 'TensorDictBase'",
        "xdrl/envs/vector_env.py",
    ),
    ("torchrl.envs", "EnvBase._reset"): (
        "(self, tensordict: 'TensorDictBase', **kwargs) -> 'TensorDictBase'",
        "xdrl/envs/vector_env.py",
    ),
    ("torchrl.envs", "EnvBase._set_seed"): (
        "(self, seed: 'int | None') -> 'None'",
        "xdrl/envs/vector_env.py",
    ),
    ("torchrl.checkpoint", "Checkpoint._resolve_adapter"): (
        "(self, component: '_Component') -> 'CheckpointAdapter'",
        "xdrl/training/checkpointing.py",
    ),
    ("torchrl.record.loggers", "CSVLogger._checkpoint_state"): (
        "(self) -> 'dict[str, object]'",
        "xdrl/training/loggers.py",
    ),
    ("torchrl.record.loggers", "CSVLogger._load_checkpoint_state"): (
        "(self, state_dict: 'Mapping[str, object]') -> 'None'",
        "xdrl/training/loggers.py",
    ),
    ("torchrl.record.loggers.wandb", "WandbLogger._create_experiment"): (
        "(self)",
        "xdrl/training/loggers.py",
    ),
    ("torchrl.collectors", "MultiCollector._run_processes"): (
        "(self) -> 'None'",
        "xdrl/training/workers.py",
    ),
    # called
    **{
        ("torchrl.trainers", f"Trainer.{name}"): (signature, "xdrl/lean/trainer.py")
        for name, signature in (
            ("_pre_optim_hook", "(self)"),
            ("_pre_epoch_log_hook", "(self, batch: 'TensorDictBase') -> 'None'"),
            ("_pre_epoch_hook", "(self, batch: 'TensorDictBase', **kwargs) -> 'None'"),
            ("_process_optim_batch_hook", "(self, batch)"),
            ("_post_optim_hook", "(self)"),
            ("_post_optim_log", "(self, batch: 'TensorDictBase') -> 'None'"),
            ("_post_epoch_log_hook", "(self, batch: 'TensorDictBase') -> 'None'"),
            ("_post_epoch_hook", "(self) -> 'None'"),
            (
                "_post_optim_complete_log_hook",
                "(self, optim_steps: 'int', average_losses: 'TensorDictBase | None') -> 'None'",
            ),
        )
    },
    ("torchrl.envs.transforms", "VecNormV2._stateful_update"): (
        "(self, data)",
        "xdrl/training/worker_norm.py",
    ),
    ("torchrl.checkpoint", "Checkpoint._local_path"): (
        "(path: 'str | Path') -> 'Path'",
        "xdrl/training/checkpointing.py",
    ),
    ("tensordict", "TensorDict._new_unsafe"): (
        "(cls, source: 'T | dict[NestedKey, CompatibleType] | None' = None, batch_size: "
        "'Sequence[int] | torch.Size | int | None' = None, device: 'DeviceType | None' = None, "
        "names: 'Sequence[str] | None' = None, non_blocking: 'bool | None' = None, lock: 'bool' "
        "= False, nested: 'bool' = True, is_shared: 'bool' = False, is_memmap: 'bool' = False, "
        "**kwargs: 'Any') -> 'TensorDict'",
        "xdrl/envs/vector_env.py",
    ),
    ("torchrl.envs.libs.gym", "_gym_to_torchrl_spec_transform"): (
        "(spec, dtype=None, device=None, categorical_action_encoding=False, "
        "remap_state_to_observation: 'bool' = True, batch_size: 'tuple' = ()) -> 'TensorSpec'",
        "xdrl/envs/vector_env.py",
    ),
    ("torchrl.modules", "AdditiveGaussianModule._add_noise"): (
        "(self, action: 'torch.Tensor') -> 'torch.Tensor'",
        "xdrl/lean/td3_actor.py",
    ),
    ("torchrl.data", "LazyTensorStorage._rand_given_ndim"): (
        "(self, batch_size)",
        "xdrl/lean/replay.py",
    ),
    ("hydra._internal.core_plugins.basic_sweeper", "BasicSweeper.split_arguments"): (
        "(overrides: List[hydra.core.override_parser.types.Override], max_batch_size: "
        "Optional[int]) -> List[List[List[str]]]",
        "hydra_plugins/xdrl_pareto/pareto_sweeper.py",
    ),
    ("hydra._internal.utils", "get_args_parser"): (
        "() -> argparse.ArgumentParser",
        "xdrl/cli.py (_hydra_flags)",
    ),
    ("omegaconf", "DictConfig._get_node"): (
        "(self, key: Union[str, bytes, int, enum.Enum, float, bool], validate_access: bool = True, "
        "validate_key: bool = True, throw_on_missing_value: bool = False, throw_on_missing_key: "
        "bool = False) -> Optional[omegaconf.base.Node]",
        "xdrl/config/check.py",
    ),
    ("threading", "_shutdown"): ("()", "xdrl/cli.py (exit_without_teardown)"),
    ("torchrl.collectors", "MultiAsyncCollector._get_from_queue"): (
        "(self, timeout=None) -> 'tuple[int, int, TensorDictBase]'",
        "xdrl/training/workers.py",
    ),
    ("torchrl.collectors", "MultiAsyncCollector._should_use_random_frames"): (
        "(self) -> 'bool'",
        "xdrl/training/workers.py",
    ),
}

# The schemas of the private torch operators xdrl calls, every overload (torch.ops.aten).
TORCH_OPS = {
    "_foreach_norm": (
        "xdrl/algorithms/stepper.py",
        "aten::_foreach_norm.Scalar(Tensor[] self, Scalar ord=2, ScalarType? dtype=None)"
        " -> Tensor[]",
    ),
    "_foreach_mul_": (
        "xdrl/algorithms/stepper.py",
        "aten::_foreach_mul_.Tensor(Tensor(a!)[] self, Tensor other) -> ()",
    ),
    "_foreach_lerp_": (
        "xdrl/algorithms/off_policy.py",
        "aten::_foreach_lerp_.Scalar(Tensor(a!)[] self, Tensor[] tensors1, Scalar weight) -> ()",
    ),
    "_foreach_copy_": (
        "xdrl/algorithms/off_policy.py",
        "aten::_foreach_copy_(Tensor(a!)[] self, Tensor[] src, bool non_blocking=False) -> ()",
    ),
    "_foreach_add_": (
        "xdrl/lean/fused_adam.py",
        "aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()",
    ),
    **{
        name: (
            "xdrl/lean/fused_adam.py",
            f"aten::{name}(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] exp_avgs, "
            "Tensor(d!)[] exp_avg_sqs, Tensor(e!)[] max_exp_avg_sqs, Tensor[] state_steps, *, "
            "float lr, float beta1, float beta2, float weight_decay, float eps, bool amsgrad, "
            "bool maximize, Tensor? grad_scale=None, Tensor? found_inf=None) -> ()",
        )
        for name in ("_fused_adam_", "_fused_adamw_")
    },
}


def _resolve(module: str, dotted: str):
    obj = importlib.import_module(module)
    for part in dotted.split("."):
        obj = inspect.getattr_static(obj, part)
    return obj


@pytest.mark.parametrize(("module", "dotted", "user"), ATTRIBUTES, ids=lambda v: str(v))
def test_private_attribute_exists(module: str, dotted: str, user: str) -> None:
    try:
        _resolve(module, dotted)
    except AttributeError:
        pytest.fail(f"{module}.{dotted} is gone: {user} relies on it")


@pytest.mark.parametrize(("module", "cls", "text", "user"), SET_IN_SOURCE, ids=lambda v: str(v))
def test_private_instance_attribute_is_still_set(module: str, cls: str, text: str, user: str):
    if module.startswith("wandb"):
        pytest.importorskip("wandb")
    source = inspect.getsource(getattr(importlib.import_module(module), cls))
    assert text in source, f"{module}.{cls} no longer sets {text}: {user} relies on it"


def test_a_built_trainer_and_ppo_loss_hold_the_private_state_xdrl_reads(make_cfg) -> None:
    from xdrl.training.build import build_trainer

    cfg = make_cfg("total_frames=64", "frames_per_batch=64", "env.num_envs=2", "eval=none")
    run = build_trainer(cfg)
    try:
        trainer = run.trainer
        assert isinstance(trainer._optim_count, int)  # XdrlTrainer counts optimizer steps on it
        assert isinstance(trainer._log_dict, dict)  # ProgressLineHook's last reward
        loss = trainer.loss_module
        for name in ("_entropy_coeff_map", "_has_critic", "_asymmetric_clip"):  # ppo_loss.py
            assert hasattr(loss, name), f"ClipPPOLoss.{name} is gone: ppo_loss.py reads it"
        (low, high) = loss._clip_bounds
        assert float(low) < 0 < float(high)  # log-ratio bounds, as ppo_loss.py expects
    finally:
        run.close()


def test_tensors_have_a_version_counter() -> None:
    tensor = torch.zeros(2)
    before = tensor._version  # ppo_loss.py caches on it
    tensor.add_(1)
    assert tensor._version > before


def test_a_replay_buffer_holds_the_private_state_replay_py_reads() -> None:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage

    from xdrl.lean.replay import LeanReplayBuffer

    buffer = LeanReplayBuffer(storage=LazyTensorStorage(8))
    buffer.extend(TensorDict({"x": torch.arange(4.0)}, batch_size=[4]))
    for name in ("_storage", "_sampler", "_writer", "_transform", "_prefetch_cap", "_pin_memory",
                 "_sample_unit", "_replay_lock", "_write_lock", "_batch_size"):  # fmt: skip
        assert hasattr(buffer, name), f"ReplayBuffer.{name} is gone: replay.py reads it"
    assert isinstance(buffer._storage._storage, TensorDict)  # LazyTensorStorage's data
    assert buffer._writer._storage is buffer._storage  # GrowingRoundRobinWriter.loads reads it
    assert buffer._lean()  # every condition of the direct gather still reads


@pytest.mark.parametrize(("module", "dotted"), SIGNATURES, ids=lambda v: str(v))
def test_private_signature_is_unchanged(module: str, dotted: str) -> None:
    expected, user = SIGNATURES[(module, dotted)]
    obj = _resolve(module, dotted)
    function = obj.__func__ if isinstance(obj, staticmethod | classmethod) else obj
    actual = str(inspect.signature(function))
    assert actual == expected, f"{module}.{dotted} changed signature: read {user} again"


@pytest.mark.parametrize("name", TORCH_OPS)
def test_private_torch_op_keeps_the_overload_xdrl_calls(name: str) -> None:
    user, expected = TORCH_OPS[name]
    packet = getattr(torch.ops.aten, name)
    schemas = [str(getattr(packet, overload)._schema) for overload in packet.overloads()]
    assert expected in schemas, f"torch.{name} changed ({schemas}): read {user} again"


# Private-looking names in xdrl's source that are not a library's private API: the config key
# of hydra.utils.instantiate and os._exit (public).
NOT_A_LIBRARY_NAME = {"_target_", "_exit"}
# Names the runtime tests above check on built objects.
CHECKED_AT_RUNTIME = {"_version", "_entropy_coeff_map", "_has_critic", "_asymmetric_clip",
                      "_storage", "_optim_count", "_log_dict"}  # fmt: skip


def _listed_names() -> set[str]:
    """The last part of every name the tripwire lists."""
    names = {dotted.rsplit(".", 1)[-1] for _, dotted, _ in ATTRIBUTES}
    names |= {text.rsplit(".", 1)[-1] for _, _, text, _ in SET_IN_SOURCE}
    names |= {dotted.rsplit(".", 1)[-1] for _, dotted in SIGNATURES}
    return names | set(TORCH_OPS) | CHECKED_AT_RUNTIME | NOT_A_LIBRARY_NAME


def _private_names_at(node: ast.AST) -> list[str]:
    """The private names ``node`` reads off a library object or imports from a library."""
    if isinstance(node, ast.Attribute) and re.match(r"_[a-z]", node.attr):
        owner = node.value
        return [] if isinstance(owner, ast.Name) and owner.id in ("self", "cls") else [node.attr]
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr"):
        owner, name, *_ = node.args
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            return []
        return (
            [name.value]
            if isinstance(name, ast.Constant) and re.match(r"_[a-z]", name.value)
            else []
        )
    if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):  # getattr(x, name) in a loop
        return [e.value for e in node.iter.elts
                if isinstance(e, ast.Constant) and re.match(r"_[a-z]", str(e.value))]  # fmt: skip
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        parts = node.module.split(".")
        if parts[0] in ("xdrl", "hydra_plugins"):
            return []
        private_module = any(re.match(r"_[a-z]", part) for part in parts)
        return [a.name for a in node.names if private_module or a.name.startswith("_")]
    return []


def _private_names_in_source() -> dict[str, str]:
    """Each private name xdrl's code reads off an object that is not ``self``/``cls`` (``x._y``,
    ``getattr(x, "_y")``) or imports from a library (``from a._b import c``, ``from a import _c``),
    with the first file using it. Comments and docstrings are not code: they do not count."""
    found: dict[str, str] = {}
    files = sorted([*(REPO / "xdrl").rglob("*.py"), *(REPO / "hydra_plugins").rglob("*.py")])
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            for name in _private_names_at(node):
                found.setdefault(name, str(path.relative_to(REPO)))
    return found


def test_every_private_name_xdrl_uses_is_listed() -> None:
    listed = _listed_names()
    missing = {n: where for n, where in _private_names_in_source().items() if n not in listed}
    assert not missing, f"private names used but not in the tripwire: {missing}"


@functools.cache
def _source(cls: type) -> str:
    """The source of ``cls``; empty where it has none (a class built at run time)."""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


def _library_bases(cls: type) -> list[type]:
    return [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] in ("torch", "torchrl",
            "tensordict", "hydra", "omegaconf", "optuna", "gymnasium", "wandb")]  # fmt: skip


# Modules that import an extra make test does not install; tests/test_ray.py checks them.
NEEDS_EXTRA = {"ray"}


def inherited_but_unlisted(module_names: list[str]) -> dict[str, str]:
    """``self._x`` in an xdrl class of these modules where a library base class defines ``_x``
    and the tripwire does not list it: {class.name: base}."""
    missing = {}
    for module_name in module_names:
        module = importlib.import_module(module_name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module_name:
                continue
            bases = _library_bases(cls)
            if not bases:
                continue
            for name in set(re.findall(r"self\.(_[a-z]\w*)\b", _source(cls))):
                for base in bases:
                    in_base = name in vars(base) or re.search(rf"self\.{name}\b", _source(base))
                    if in_base and name not in _listed_names():
                        missing[f"{module_name}.{cls.__name__}.{name}"] = base.__qualname__
    return missing


def test_every_private_name_xdrl_inherits_is_listed() -> None:
    """``self._x`` in an xdrl class where a library base class defines ``_x``: an override or a
    read of the base's private state, which the tripwire must list."""
    import xdrl

    names = []
    for info in pkgutil.walk_packages(xdrl.__path__, "xdrl."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as error:
            if error.name in NEEDS_EXTRA:
                continue
            raise
        names.append(info.name)
    missing = inherited_but_unlisted(names)
    assert not missing, f"private names inherited but not in the tripwire: {missing}"
