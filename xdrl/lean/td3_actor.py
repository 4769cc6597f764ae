"""NoisyTanhActor: TD3's exploration policy (the deterministic actor, then TorchRL's Gaussian
noise) with a tensor-level fast path.

Why it exists: with one env (SB3's TD3 defaults on Pendulum) the collector ran this policy's
TensorDict forward once per frame: two TensorDict modules, the ``TanhModule`` and the noise
module's TensorDict reads and writes around a few matmuls. :meth:`NoisyTanhActor.act` runs the
actor's MLP as torch functions, the same tanh map to the bounds
(:class:`~xdrl.lean.td3_loss.TanhActorHead`) and the noise module's own ``_add_noise``
(same draws, same projection onto the action spec). The module is still the
``TensorDictSequential(actor, noise)`` TorchRL would run: evaluation and checkpoints use it
unchanged. One Pendulum observation ([400, 300] actor) took 50 us through
:meth:`NoisyTanhActor.act` against 143 us through ``TensorDictSequential(actor, noise)`` under
random exploration, 2.9x (``python scripts/bench_ablation.py --piece td3_actor --reps 9 --calls
2000``: 1 thread, the two alternated in one process, medians; load average 2.8 on 2 cores,
November 26; 3.3x at load 19).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase, TensorDictSequential
from torchrl.modules import AdditiveGaussianModule

from xdrl.lean.ensemble import mlp_forward
from xdrl.lean.policy_types import TensorSampler
from xdrl.lean.td3_loss import TanhActorHead


class NoisyTanhActor(TensorDictSequential, TensorSampler):
    """``TensorDictSequential(actor, noise)``: writes the actor's ``param`` and the noisy
    ``action`` under random exploration, the actor's action otherwise.

    Args:
        actor: a deterministic actor built like ``xdrl.algorithms.common.deterministic_actor``.
        noise: TorchRL's ``AdditiveGaussianModule`` on ``action``.

    Example:
        >>> policy = NoisyTanhActor(actor, AdditiveGaussianModule(spec, sigma_init=0.1))
        >>> policy.act(torch.zeros(1, 3), explore=True)["action"].shape
        torch.Size([1, 1])
    """

    def __init__(self, actor: TensorDictModuleBase, noise: AdditiveGaussianModule) -> None:
        super().__init__(actor, noise)
        # the parameter tensors are updated in place, so the tensor path is looked up once
        head = TanhActorHead.of(actor)
        self._tensor_head = head and (head, head.layers_of(TensorDict.from_module(actor)))

    def act(self, observation: torch.Tensor, explore: bool) -> dict[str, torch.Tensor] | None:
        """``param`` and ``action`` for a batch of observations; None for an actor
        :class:`TanhActorHead` cannot read (it then takes the TensorDict forward)."""
        if not self._tensor_head:
            return None
        head, (layers, low, high) = self._tensor_head
        param = mlp_forward(layers, head.act, observation)
        action = head.squash(param, low, high)
        if explore:
            action = self.module[1]._add_noise(action)
        return {"param": param, "action": action}
