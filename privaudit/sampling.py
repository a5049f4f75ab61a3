"""How agents draw their mini-batches each round, for all agents at once.

Every agent's shard is padded into one `[N, L]` index table, so one round's batches for all N
agents are drawn with a handful of tensor operations (no loop over agents or samples), and the
result stacks into `[N, B, ...]` for `vmap` over agents.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


FLOYD_RATIO = 32
"""An audit's shards at least this many times the batch are sampled with Floyd's algorithm (`fixed_batches`)."""


def _floyd(sizes: Tensor, batch: int, generator: torch.Generator) -> Tensor:
    """`batch` distinct positions in [0, sizes[i]) for every row i, each subset equally likely
    (Floyd 1987: for j = size − batch … size − 1, draw t uniform in [0, j] and keep t, or j when t
    was kept already), all rows at once; [n, batch]."""
    chosen = torch.empty(len(sizes), batch, dtype=torch.long)
    for step in range(batch):
        top = sizes - batch + step
        draw = (torch.rand(len(sizes), generator=generator, dtype=torch.float64) * (top + 1)).long()
        draw = torch.minimum(draw, top)
        seen = (chosen[:, :step] == draw[:, None]).any(dim=1)
        chosen[:, step] = torch.where(seen, top, draw)
    return chosen


class LocalData:
    """The private training data of each agent: `x[index[i, :sizes[i]]]` is agent i's shard; its
    tensors are on the device of `x`."""

    def __init__(self, x: Tensor, y: Tensor, shards: Sequence[np.ndarray]) -> None:
        self.x, self.y = x, y
        device = x.device
        self.sizes = torch.tensor([len(s) for s in shards], dtype=torch.long, device=device)
        if int(self.sizes.min()) < 1:
            raise ValueError("every agent needs at least one training sample")
        width = int(self.sizes.max())
        self.index = torch.zeros(len(shards), width, dtype=torch.long, device=device)
        for i, shard in enumerate(shards):
            self.index[i, : len(shard)] = torch.as_tensor(shard, dtype=torch.long, device=device)
        self.valid = torch.arange(width, device=device)[None, :] < self.sizes[:, None]
        self.copies = 1

    def repeat(self, copies: int) -> LocalData:
        """The same shards for `copies` copies of the agents (agent w·n + i holds agent i's)."""
        tiled = LocalData.__new__(LocalData)
        tiled.x, tiled.y = self.x, self.y
        tiled.sizes = self.sizes.repeat(copies)
        tiled.index = self.index.repeat(copies, 1)
        tiled.valid = self.valid.repeat(copies, 1)
        tiled.copies = self.copies * copies
        return tiled

    def to(self, device: torch.device) -> LocalData:
        """The same shards with every tensor on `device`."""
        moved = LocalData.__new__(LocalData)
        moved.x, moved.y = self.x.to(device), self.y.to(device)
        moved.sizes, moved.index, moved.valid = self.sizes.to(device), self.index.to(device), self.valid.to(device)
        moved.copies = self.copies
        return moved

    def shards(self) -> tuple[Tensor, Tensor]:
        """Every agent's whole shard, padded (x [m, L, ...], y [m, L]; a slot past an agent's size
        holds a meaningless record), for the m = n / copies agents of one copy: agent w·m + i holds
        row i's. With a mask over the slots (`poisson_mask`) this is a batch shared by the copies,
        which closed-form gradients of all worlds read in a few large products (`grads.clipped_sums`)."""
        rows = self.index[: self.n_agents // self.copies]
        return self.x[rows], self.y[rows]

    @property
    def n_agents(self) -> int:
        return len(self.sizes)

    def shard(self, agent: int) -> tuple[Tensor, Tensor]:
        """All of `agent`'s samples (the ground truth for attacks' scoring, never for attacks)."""
        rows = self.index[agent, : int(self.sizes[agent])]
        return self.x[rows], self.y[rows]

    def check_batch_size(self, batch_size: int) -> None:
        """Raise ValueError (naming `batch_size`) when some agent holds fewer samples than that."""
        smallest = int(self.sizes.min())
        if batch_size > smallest:
            raise ValueError(f"batch_size {batch_size} exceeds the smallest local dataset ({smallest} samples)")

    def fixed_batches(self, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """A uniformly random batch of `batch_size` distinct samples per agent: the `batch_size`
        largest of one uniform key per sample, or, on an audit's copies of the agents (`repeat`)
        whose shards hold `FLOYD_RATIO` times the batch or more, Floyd's algorithm (`_floyd`), which
        draws `batch_size` numbers per agent instead of one per sample (LT-ADMM-DP's 1000-record
        shards, batches of 8, thousands of worlds). Both draw every subset with the same
        probability; their random streams differ, so a single network keeps the key draw and every
        stored run its batches.

        Returns x [N, B, ...], y [N, B] and the dataset rows [N, B] that were drawn.
        """
        self.check_batch_size(batch_size)
        if self.copies > 1 and self.index.shape[1] >= FLOYD_RATIO * batch_size:
            positions = _floyd(self.sizes, batch_size, generator)
        else:
            keys = torch.rand(self.index.shape, generator=generator).masked_fill(~self.valid, -1.0)
            positions = keys.topk(batch_size, dim=1).indices
        rows = self.index.gather(1, positions)
        return self.x[rows], self.y[rows], rows

    def capped_batches(self, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Like `fixed_batches`, but a batch larger than an agent's data takes all of it: agent i
        gets min(batch_size, |D_i|) distinct samples, uniformly at random (growing batch-size
        schedules, seed 003, outgrow small shards; the paper's §4.2 remark caps them so).

        Batches are padded to the largest one; the mask [N, K] is 1.0 on real samples and 0.0 on
        padding. Returns x [N, K, ...], y [N, K], the dataset rows [N, K] (padding rows are
        meaningless) and the mask. When no agent is capped the draw equals `fixed_batches`' on a single
        network.
        """
        if batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {batch_size}")
        width = min(batch_size, self.index.shape[1])
        keys = torch.rand(self.index.shape, generator=generator).masked_fill(~self.valid, -1.0)
        positions = keys.topk(width, dim=1).indices
        rows = self.index.gather(1, positions)
        mask = torch.arange(width, device=self.sizes.device)[None, :] < self.sizes.clamp(max=batch_size)[:, None]
        return self.x[rows], self.y[rows], rows, mask.to(self.x.dtype)

    def poisson_mask(self, rates: Tensor, generator: torch.Generator) -> Tensor:
        """Poisson sampling as a mask over each agent's shard slots [n, L] (`shards`): slot k of
        agent i is in its batch with probability `rates[i]`; the draw `poisson_batches` makes."""
        draws = torch.rand(self.index.shape, generator=generator)
        return (draws < rates[:, None]) & self.valid

    def poisson_batches(
        self, rates: Tensor, generator: torch.Generator
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Poisson sampling: each sample of agent i is in its batch independently with
        probability `rates[i]` — the sampling that the subsampled-Gaussian accountant assumes.

        Batches have random sizes, so they are padded to the largest one; the returned mask
        [N, K] is 1.0 on real samples and 0.0 on padding. Returns x [N, K, ...], y [N, K], the
        mask and the dataset rows [N, K] (padding rows are meaningless).
        """
        chosen = self.poisson_mask(rates, generator)
        width = max(int(chosen.sum(dim=1).max()), 1)
        order = torch.argsort((~chosen).to(torch.int8), dim=1, stable=True)[:, :width]
        mask = chosen.gather(1, order)
        rows = self.index.gather(1, order)
        return self.x[rows], self.y[rows], mask.to(self.x.dtype), rows
