"""The floor of one recurrent PPO update in plain PyTorch, for the ``recurrent`` bench mode.

A 256-frame batch (8 envs x 32 steps) with the shapes of ``cartpole_novel_lstm``: an actor
LSTM(4 -> 64) and a critic LSTM(4 -> 64) on the observation, linear heads, PPO's clipped loss,
gradient clipping at 0.5 and an Adam step, 1 thread. Four ways to run the cells: ``nn.LSTM`` on
whole rows (no episode start inside a row: the floor), one cell step at a time with the state
zeroed where an episode starts (sb3-contrib's way when an episode starts inside a sequence),
and on the rows cut at their episode starts, the pieces either packed (``PackedSequence``:
TorchRL's ``LSTMModule`` in recurrent mode) or zero-padded to the longest
(``xdrl.lean.recurrent_ppo_loss``). Usage: ``python scripts/recurrent_floor.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

ENVS, STEPS, OBS, HIDDEN, ACTIONS = 8, 32, 4, 64, 2
Forward = Callable[[], tuple[torch.Tensor, torch.Tensor]]


class ActorCritic(nn.Module):
    """Separate actor and critic LSTMs on the observation, linear heads."""

    def __init__(self) -> None:
        super().__init__()
        self.actor = nn.LSTM(OBS, HIDDEN, batch_first=True)
        self.critic = nn.LSTM(OBS, HIDDEN, batch_first=True)
        self.pi = nn.Linear(HIDDEN, ACTIONS)
        self.v = nn.Linear(HIDDEN, 1)

    def rows(self, obs: torch.Tensor, h0: tuple[torch.Tensor, torch.Tensor]) -> tuple:
        """Logits and values of whole rows, each from its stored state."""
        actor, _ = self.actor(obs, h0)
        critic, _ = self.critic(obs, h0)
        return self.pi(actor), self.v(critic).squeeze(-1)

    def steps(self, obs: torch.Tensor, init: torch.Tensor, h0: tuple) -> tuple:
        """The same one step at a time, the states zeroed where ``init`` marks an episode start."""
        (ha, ca), (hc, cc) = h0, h0
        actor, critic = [], []
        for t in range(obs.shape[1]):
            keep = (~init[:, t]).float().view(1, -1, 1)
            ha, ca, hc, cc = ha * keep, ca * keep, hc * keep, cc * keep
            ya, (ha, ca) = self.actor(obs[:, t : t + 1], (ha, ca))
            yc, (hc, cc) = self.critic(obs[:, t : t + 1], (hc, cc))
            actor.append(ya)
            critic.append(yc)
        return self.pi(torch.cat(actor, 1)), self.v(torch.cat(critic, 1)).squeeze(-1)

    def pieces(self, obs: torch.Tensor, init: torch.Tensor, packed: bool) -> tuple:
        """The rows cut at ``init`` into pieces (zero start states: every piece starts an
        episode or a row whose stored state is zero here), run packed or padded; the real
        steps back in the batch's order."""
        cut = init.clone()
        cut[:, 0] = True
        starts = cut.reshape(-1).nonzero().squeeze(-1)
        lengths = torch.diff(starts, append=torch.tensor([cut.numel()]))
        offsets = torch.arange(int(lengths.max()))
        real = offsets < lengths.unsqueeze(-1)
        index = torch.where(real, starts.unsqueeze(-1) + offsets, starts.unsqueeze(-1))
        padded = obs.reshape(-1, OBS)[index]
        h0 = (torch.zeros(1, len(starts), HIDDEN), torch.zeros(1, len(starts), HIDDEN))
        outputs = []
        for lstm in (self.actor, self.critic):
            if packed:
                seq = nn.utils.rnn.pack_padded_sequence(
                    padded, lengths, batch_first=True, enforce_sorted=False
                )
                out, _ = nn.utils.rnn.pad_packed_sequence(lstm(seq, h0)[0], batch_first=True)
            else:
                out, _ = lstm(padded, h0)
            outputs.append(out[real].reshape(ENVS, STEPS, HIDDEN))
        return self.pi(outputs[0]), self.v(outputs[1]).squeeze(-1)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = ActorCritic()
    optimizer = torch.optim.Adam(net.parameters(), 1e-3, eps=1e-5)
    obs = torch.randn(ENVS, STEPS, OBS)
    action = torch.randint(0, ACTIONS, (ENVS, STEPS))
    old_log_prob = torch.full((ENVS, STEPS), -0.69)
    advantage, returns = torch.randn(ENVS, STEPS), torch.randn(ENVS, STEPS)
    h0 = (torch.zeros(1, ENVS, HIDDEN), torch.zeros(1, ENVS, HIDDEN))
    init = torch.zeros(ENVS, STEPS, dtype=torch.bool)
    init[:, 0] = True
    init[3, 17] = True  # one episode starts inside a row
    cuts = torch.zeros(ENVS, STEPS, dtype=torch.bool)  # 10 starts inside rows, as in a batch
    for row, step in ((0, 9), (0, 21), (1, 14), (2, 5), (3, 17), (4, 11), (4, 26), (5, 8),
                      (6, 19), (7, 23)):  # fmt: skip
        cuts[row, step] = True

    def update(forward: Forward) -> None:
        logits, value = forward()
        log_prob = torch.distributions.Categorical(logits=logits).log_prob(action)
        ratio = (log_prob - old_log_prob).exp()
        adv = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        clipped = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        loss = -clipped.mean() + 0.5 * (value - returns).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        optimizer.step()

    ways: dict[str, Forward] = {
        "rows (nn.LSTM on whole rows)": lambda: net.rows(obs, h0),
        "steps (one cell step at a time, resets)": lambda: net.steps(obs, init, h0),
        "pieces, packed (TorchRL's LSTMModule)": lambda: net.pieces(obs, cuts, packed=True),
        "pieces, zero-padded (xdrl's lean loss)": lambda: net.pieces(obs, cuts, packed=False),
    }
    for name, forward in ways.items():
        for _ in range(20):
            update(forward)
        start, n = time.perf_counter(), 200
        for _ in range(n):
            update(forward)
        print(f"{name}: {(time.perf_counter() - start) / n * 1000:.2f} ms per update")


if __name__ == "__main__":
    main()
