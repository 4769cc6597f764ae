"""The ``pareto`` config group's schema: :func:`pareto_settings`, whose annotated signature is
what ``xdrl.config.check`` reads for ``pareto.*`` (``_target_`` of the node in conf/config.yaml),
and :func:`check_sweep`, the checks that need the env, run by the sweeper before any job.

The annotations use only ``Annotated``, ``Field``, ``Literal`` and builtins, so the config check
can evaluate them from this file's source without importing it. Nothing heavy is imported here.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal, NamedTuple

from omegaconf import DictConfig, OmegaConf
from pydantic import Field

from xdrl.config.errors import ConfigError


class ParetoSettings(NamedTuple):
    """The checked ``pareto`` node (see :func:`pareto_settings` for each field). A NamedTuple:
    Hydra's plugin scan runs this file outside ``sys.modules``, where a dataclass cannot."""

    method: str
    num_weights: int
    tolerance: float
    max_jobs: int
    w0_range: tuple[float, float]
    report_dir: str | None
    edge_margin: float
    suspect_gap: float
    retry_suspect: bool


def pareto_settings(
    *,
    method: Literal["grid", "ols"] = "grid",
    num_weights: Annotated[int, Field(ge=2)] = 11,
    tolerance: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1.0e-3,
    max_jobs: Annotated[int, Field(ge=2)] = 15,
    w0_range: Annotated[
        list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]],
        Field(min_length=2, max_length=2),
    ] = (0.0, 1.0),  # type: ignore[assignment]
    report_dir: str | None = None,
    edge_margin: Annotated[float, Field(ge=0, lt=0.5, allow_inf_nan=False)] = 0.01,
    suspect_gap: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.05,
    retry_suspect: bool = True,
) -> ParetoSettings:
    """Settings of a weight sweep (``xdrl-train -m hydra/sweeper=pareto``).

    Args:
        method: ``grid`` (``num_weights`` weights spread over the simplex) or ``ols``
            (optimistic linear support: corner weights of the front found so far, 2 objectives).
        num_weights: grid: weight vectors; two at least (the simplex's corners).
        tolerance: ols: stop when no corner weight can raise the scalarized value more than this.
        max_jobs: ols: jobs in all, the two extremes included.
        w0_range: ols: ``[low, high]`` of the first objective's weight, ``low < high``.
        report_dir: where ``pareto.json`` and ``pareto.png`` go (None: ``<sweep dir>/report``).
        edge_margin: every weight the sweeper trains is at least this (weights at the simplex's
            edges are moved inside, see :func:`xdrl.pareto.weights.inside_simplex`), so no
            objective, e.g. a time cost, is weighted 0 and loops stay costly.
        suspect_gap: a point is suspect when its greedy evaluation episodes did not all
            terminate, or its discounted scalarized return and its Q-value of the start state
            differ by more than this.
        retry_suspect: ols: re-run a suspect weight once with seed + 1000 (within ``max_jobs``).

    Example:
        >>> pareto_settings(method="ols", w0_range=[0.2, 0.8]).w0_range
        (0.2, 0.8)
    """
    low, high = (float(w) for w in w0_range)
    if low >= high:
        raise ConfigError(
            "pareto.w0_range",
            f"[{low}, {high}] is empty or reversed; set [low, high] with low < high, "
            "e.g. pareto.w0_range=[0.0,1.0]",
        )
    return ParetoSettings(
        method,
        int(num_weights),
        float(tolerance),
        int(max_jobs),
        (low, high),
        report_dir,
        float(edge_margin),
        float(suspect_gap),
        bool(retry_suspect),
    )


def checked_settings(node: DictConfig) -> ParetoSettings:
    """The ``pareto`` node checked against :func:`pareto_settings`'s annotations, key by key
    (one :class:`ConfigError` naming the first bad key), then built."""
    from xdrl.config.check import check_value

    values: dict[str, Any] = OmegaConf.to_container(node, resolve=True)  # type: ignore[assignment]
    params = inspect.signature(pareto_settings, eval_str=True).parameters
    for name, value in values.items():
        if name.startswith("_"):
            continue
        if name not in params:
            known = ", ".join(params)
            raise ConfigError(f"pareto.{name}", f"not a config key; keys here: {known}")
        param = params[name]
        check_value(f"pareto.{name}", value, param.annotation, param.default)
    return pareto_settings(**{k: v for k, v in values.items() if not k.startswith("_")})


def reward_dim(env_id: str, weights: Any) -> int:
    """Objectives of ``env_id`` (MO-Gymnasium's reward space), with ``weights`` (if not None)
    of that length; a :class:`ConfigError` for an env with a scalar reward (nothing to sweep)."""
    from xdrl.envs.factory import check_env_id, check_reward_weights, is_multi_objective

    check_env_id(env_id)
    if not is_multi_objective(env_id):
        raise ConfigError(
            "env.id",
            f"{env_id} has a scalar reward, so a Pareto sweep has no weights to sweep; "
            "pick a multi-objective env, e.g. env=deep_sea_treasure",
        )
    import mo_gymnasium

    env = mo_gymnasium.make(env_id)
    try:
        dim = int(env.unwrapped.reward_space.shape[0])  # type: ignore[attr-defined]
    finally:
        env.close()
    if weights is not None:
        check_reward_weights([float(w) for w in weights], dim, env_id)
    return dim


def check_sweep(config: DictConfig) -> tuple[ParetoSettings, int]:
    """Everything a Pareto sweep of ``config`` needs, checked before any job: the run config
    every job shares, the settings, a multi-objective env, and ``ols`` only with two objectives.
    Returns the settings and the number of objectives."""
    from xdrl.config.check import check_config

    check_config(OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"]))
    settings = checked_settings(config.pareto)
    dim = reward_dim(str(config.env.id), config.env.reward_weights)
    if settings.method == "ols" and dim != 2:
        raise ConfigError(
            "pareto.method",
            f"ols sweeps two objectives, {config.env.id} has {dim}; use pareto.method=grid",
        )
    return settings, dim
