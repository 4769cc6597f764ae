"""What every algorithm builder returns, and the network pieces they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict.nn import (
    AddStateIndependentNormalScale,
    NormalParamExtractor,
    TensorDictModule,
    TensorDictSequential,
)
from torch import nn
from torchrl.data import Binary, Categorical, MultiCategorical, OneHot
from torchrl.modules import (
    MLP,
    ProbabilisticActor,
    QValueActor,
    TanhModule,
    ValueOperator,
)

from xdrl.algorithms.distributions import ClippedModeNormal
from xdrl.algorithms.encoders import FEATURES, Head, NatureCNN, observation_shape, resolve_encoder
from xdrl.config.errors import ConfigError
from xdrl.lean.categorical_actor import CategoricalActor, MultiCategoricalActor
from xdrl.lean.normal_actor import NormalActor
from xdrl.lean.tanh_normal_actor import TanhNormalActor

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
DISTRIBUTIONS = (
    "tanh_normal",
    "normal",
)  # continuous on-policy actors (algorithm.build.distribution)


@dataclass
class AlgorithmParts:
    """The pieces an algorithm contributes to a Trainer; the builder wires them.

    Args:
        policy: the module the collector runs (with exploration for off-policy methods).
        eval_policy: the module evaluation runs (exploration type decides the action).
        loss_module: a TorchRL ``LossModule``; its parameters are optimized.
        optim_steps_per_batch: optimizer steps per epoch (``None``: until the sampler stops).
        num_epochs: passes over each batch (Trainer ``num_epochs``).
        hooks: ``(stage, hook)`` pairs registered in order; ``stage=None`` calls
            ``hook.register(trainer)``.
        modules: extra objects with ``state_dict`` saved in checkpoints, by name.
        init_random_frames: collector frames taken with random actions before training.
        optimization_stepper: a ``torchrl.trainers.OptimizationStepper`` replacing xdrl's
            default one-optimizer step (e.g. TD3's delayed actor updates); None: the default.
        value_gamma: the discount of a value-based ``eval_policy`` (one that writes
            ``chosen_action_value``): evaluation then checks its start-state value against the
            discounted return; None: not value-based.
    """

    policy: Any
    eval_policy: Any
    loss_module: Any
    optim_steps_per_batch: int | None
    num_epochs: int = 1
    hooks: list[tuple[str | None, Any]] = field(default_factory=list)
    modules: dict[str, Any] = field(default_factory=dict)
    init_random_frames: int = 0
    optimization_stepper: Any = None
    value_gamma: float | None = None


def activation_class(name: str) -> type[nn.Module]:
    """The torch activation class for a config name."""
    if name not in ACTIVATIONS:
        raise ConfigError(
            "algorithm.build.activation", f"must be one of {sorted(ACTIVATIONS)}, got {name!r}"
        )
    return ACTIVATIONS[name]


def image_torso(env, encoder: str, device: str) -> NatureCNN | None:
    """The Nature CNN for ``env``'s image observations (``encoder``: auto | mlp | cnn; see
    :func:`~xdrl.algorithms.encoders.resolve_encoder`), None for an MLP."""
    if resolve_encoder(env, encoder) == "mlp":
        return None
    return NatureCNN(observation_shape(env), device=device)


def is_discrete(env) -> bool:
    """Whether the env's action spec is discrete (categorical or one-hot; one dimension or
    several: see :func:`action_nvec`)."""
    return isinstance(env.action_spec, (Categorical, OneHot))


def action_nvec(env) -> tuple[int, ...] | None:
    """The number of choices of each action dimension of a ``MultiDiscrete`` (TorchRL's
    ``MultiCategorical``) or ``MultiBinary`` (``Binary``: two each) action space; None for one
    ``Discrete`` choice or continuous actions."""
    spec = env.action_spec_unbatched
    if isinstance(spec, MultiCategorical):
        if spec.nvec.ndim != 1:
            raise ConfigError(
                "env.id",
                f"actions are a {tuple(spec.nvec.shape)} MultiDiscrete grid; ppo and a2c train "
                "a flat MultiDiscrete([...]) only: wrap the env to flatten its action space",
            )
        return tuple(int(n) for n in spec.nvec.tolist())
    if isinstance(spec, Binary):
        return (2,) * int(spec.shape[-1])
    return None


def action_space_name(env) -> str:
    """The env's action space as gymnasium names it: ``Discrete(2)``, ``MultiDiscrete([3 4])``,
    ``MultiBinary(3)`` or ``Box(shape=(1,))``."""
    spec = env.action_spec_unbatched
    if isinstance(spec, Binary):
        return f"MultiBinary({int(spec.shape[-1])})"
    if isinstance(spec, MultiCategorical):
        return f"MultiDiscrete({spec.nvec.tolist()})"
    if is_discrete(env):
        return f"Discrete({int(spec.space.n)})"
    return f"Box(shape={tuple(spec.shape)})"


def observation_dim(env) -> int:
    """Flat size of the ``observation`` entry."""
    return int(env.observation_spec["observation"].shape[-1])


def require_discrete(env, algorithm: str) -> None:
    """Fail before training when a single-``Discrete`` algorithm meets another action space."""
    if action_nvec(env) is not None:
        raise ConfigError(
            "algorithm",
            f"{algorithm} needs a Discrete action space but this env's actions are "
            f"{action_space_name(env)}; pick ppo or a2c (independent categoricals per dimension)",
        )
    if not is_discrete(env):
        raise ConfigError(
            "algorithm",
            f"{algorithm} needs a discrete action space but this env's actions are continuous "
            f"({type(env.action_spec).__name__}); pick a continuous algorithm (ppo, a2c, sac, td3) "
            "or a discrete env",
        )


def require_continuous(env, algorithm: str) -> None:
    """Fail before training when a continuous-only algorithm meets a discrete env."""
    if action_nvec(env) is not None:
        raise ConfigError(
            "algorithm",
            f"{algorithm} needs a continuous (Box) action space but this env's actions are "
            f"{action_space_name(env)}; pick ppo or a2c (independent categoricals per dimension)",
        )
    if is_discrete(env):
        raise ConfigError(
            "algorithm",
            f"{algorithm} needs a continuous (Box) action space but this env's actions are "
            "discrete; pick a discrete algorithm (ppo, a2c, dqn) or a continuous env",
        )


def orthogonal_init(mlp: nn.Module, last_gain: float) -> nn.Module:
    """PPO's usual initialization: orthogonal weights (gain sqrt 2 in hidden layers,
    ``last_gain`` in the output layer) and zero biases; a small ``last_gain`` starts the policy
    near uniform, which keeps early updates stable."""
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, gain=last_gain if i == len(linears) - 1 else 2**0.5)
        nn.init.zeros_(layer.bias)
    return mlp


def check_distribution(
    env, distribution: str, log_std_init: float, recurrent: str | None = None
) -> None:
    """Fail before training on a ``distribution`` the env or the actor cannot take: ``normal``
    needs a continuous (Box) action space and a feed-forward actor; ``log_std_init`` is the
    ``normal`` actor's (the tanh-normal one learns a state-dependent scale)."""
    key = "algorithm.build.distribution"
    if distribution not in DISTRIBUTIONS:
        raise ConfigError(key, f"must be one of {list(DISTRIBUTIONS)}, got {distribution!r}")
    if distribution == "tanh_normal":
        if log_std_init != 0.0:
            raise ConfigError(
                "algorithm.build.log_std_init",
                f"{log_std_init} needs distribution=normal (the tanh-normal actor's scale "
                "depends on the state); set algorithm.build.distribution=normal or leave "
                "log_std_init at 0",
            )
        return
    if is_discrete(env) or action_nvec(env) is not None:
        raise ConfigError(
            key,
            f"normal needs a continuous (Box) action space but this env's actions are "
            f"{action_space_name(env)}; set algorithm.build.distribution=tanh_normal (discrete "
            "envs get a categorical actor)",
        )
    if recurrent is not None:
        raise ConfigError(
            key,
            "normal is not available with a recurrent actor yet; set "
            "algorithm.build.distribution=tanh_normal or algorithm.build.recurrent=null",
        )


def stochastic_actor(
    env,
    cells: Sequence[int],
    act: type[nn.Module],
    device: str,
    torso: nn.Module | None = None,
    *,
    distribution: str = "tanh_normal",
    log_std_init: float = 0.0,
    ortho_init: bool = True,
) -> ProbabilisticActor:
    """A categorical actor for discrete actions (:class:`CategoricalActor`, with a tensor-level
    fast path; one independent categorical per dimension for ``MultiDiscrete`` and
    ``MultiBinary``: :class:`MultiCategoricalActor`); for continuous actions a tanh-normal one
    (``distribution=tanh_normal``) or a diagonal Gaussian with a state-independent learned
    log-std starting at ``log_std_init`` (``normal``: :func:`normal_actor`); with ``torso`` (an
    image encoder), a linear head on its features instead of an MLP. ``ortho_init``: orthogonal
    MLP weights (:func:`orthogonal_init`), else PyTorch's default initialization."""
    spec = env.action_spec_unbatched
    discrete = is_discrete(env)
    nvec = action_nvec(env)
    normal = distribution == "normal" and not discrete and nvec is None
    if nvec is not None:
        n_out = sum(nvec)
    elif discrete:
        n_out = int(spec.space.n)
    else:
        n_out = (1 if normal else 2) * int(spec.shape[-1])
    if torso is not None:
        net: nn.Module = nn.Sequential(torso, Head(FEATURES, n_out, gain=0.01, device=device))
    else:
        net = MLP(
            in_features=observation_dim(env),
            out_features=n_out,
            num_cells=list(cells),
            activation_class=act,
            device=device,
        )
        if ortho_init:
            net = orthogonal_init(net, 0.01)
    if nvec is not None:
        return MultiCategoricalActor(net, env.full_action_spec_unbatched, nvec)
    if discrete:
        return CategoricalActor(net, env.full_action_spec_unbatched)
    if normal:
        return normal_actor(env, net, log_std_init, device)
    return _tanh_normal_actor(env, nn.Sequential(net, NormalParamExtractor()), device)


def normal_actor(env, net: nn.Module, log_std_init: float, device: str) -> ProbabilisticActor:
    """A diagonal Gaussian on ``net``'s means with a state-independent learned log-std
    (TorchRL's ``AddStateIndependentNormalScale``, ``exp`` mapping, starting at
    ``log_std_init``): SB3's ``DiagGaussianDistribution``, as RL-Zoo's and CleanRL's MuJoCo PPO.
    The sampled action is unbounded and is what the loss scores; the env clips it to the
    bounds (:class:`~xdrl.envs.action_clip.ClipActionToBounds`), and the deterministic action
    is the mean clipped to them (:class:`~xdrl.algorithms.distributions.ClippedModeNormal`)."""
    low, high = action_bounds(env)
    scale = AddStateIndependentNormalScale(
        int(low.numel()), scale_mapping="exp", init_value=log_std_init, device=device
    )
    module = TensorDictModule(
        nn.Sequential(net, scale), in_keys=["observation"], out_keys=["loc", "scale"]
    )
    return NormalActor(
        module,
        in_keys=["loc", "scale"],
        spec=env.full_action_spec_unbatched,
        distribution_class=ClippedModeNormal,
        distribution_kwargs={"low": low.to(device), "high": high.to(device)},
        return_log_prob=True,
    )


def _tanh_normal_actor(env, net: nn.Module, device: str) -> TanhNormalActor:
    """A tanh-normal actor on ``net``'s ``(loc, scale)`` outputs, within the action bounds."""
    space = env.action_spec_unbatched.space
    return TanhNormalActor(
        net, env.full_action_spec_unbatched, space.low.to(device), space.high.to(device)
    )


def state_value(
    env,
    cells: Sequence[int],
    act: type[nn.Module],
    device: str,
    torso: nn.Module | None = None,
    *,
    ortho_init: bool = True,
) -> ValueOperator:
    """A state-value critic V(s) (a linear head on ``torso``'s features when given);
    ``ortho_init``: orthogonal MLP weights, else PyTorch's default initialization."""
    if torso is not None:
        head = nn.Sequential(torso, Head(FEATURES, 1, gain=1.0, device=device))
        return ValueOperator(head, in_keys=["observation"])
    net = MLP(
        in_features=observation_dim(env),
        out_features=1,
        num_cells=list(cells),
        activation_class=act,
        device=device,
    )
    return ValueOperator(orthogonal_init(net, 1.0) if ortho_init else net, in_keys=["observation"])


def action_bounds(env) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower and upper bounds of a continuous (Box) action spec."""
    space = env.action_spec_unbatched.space
    return space.low, space.high


def deterministic_actor(env, cells: Sequence[int], act: type[nn.Module], device: str):
    """A deterministic actor a = tanh(MLP(s)) rescaled to the action bounds (TD3, DDPG)."""
    low, high = action_bounds(env)
    net = MLP(
        in_features=observation_dim(env),
        out_features=int(low.numel()),
        num_cells=list(cells),
        activation_class=act,
        device=device,
    )
    return TensorDictSequential(
        TensorDictModule(net, in_keys=["observation"], out_keys=["param"]),
        TanhModule(
            in_keys=["param"],
            out_keys=["action"],
            spec=env.action_spec_unbatched,
            low=low.to(device),
            high=high.to(device),
        ),
    )


def action_value(env, cells: Sequence[int], act: type[nn.Module], device: str) -> ValueOperator:
    """A state-action critic Q(s, a) for continuous actions (SAC, TD3)."""
    in_features = observation_dim(env) + int(env.action_spec_unbatched.shape[-1])
    net = MLP(
        in_features=in_features,
        out_features=1,
        num_cells=list(cells),
        activation_class=act,
        device=device,
    )
    return ValueOperator(net, in_keys=["observation", "action"])


def q_value_actor(
    env,
    cells: Sequence[int],
    act: type[nn.Module],
    device: str,
    torso: nn.Module | None = None,
    *,
    bias: bool = True,
) -> QValueActor:
    """A greedy Q-network actor for discrete actions: one action value per action (DQN); with
    ``torso``, a linear head on its features (PyTorch's default initialization, as SB3's and
    CleanRL's DQN); ``bias``: whether the MLP's output layer has one (no cells: a linear
    network)."""
    n_actions = int(env.action_spec_unbatched.space.n)
    if torso is not None:
        net: nn.Module = nn.Sequential(torso, Head(FEATURES, n_actions, device=device))
        return QValueActor(
            net, in_keys=["observation"], spec=env.full_action_spec_unbatched["action"]
        )
    net = MLP(
        in_features=observation_dim(env),
        out_features=n_actions,
        num_cells=list(cells),
        activation_class=act,
        device=device,
        bias_last_layer=bias,
    )
    return QValueActor(net, in_keys=["observation"], spec=env.full_action_spec_unbatched["action"])
