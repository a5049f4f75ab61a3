"""Batches: Floyd's sampler draws every subset equally often, Poisson masks are the draw of
Poisson batches, and copies of the agents share their shards."""

import itertools
from collections import Counter

import numpy as np
import torch
from scipy.stats import chisquare

from privaudit.sampling import FLOYD_RATIO, LocalData, _floyd


def test_floyd_draws_every_subset_of_every_shard_equally_often():
    sizes = torch.tensor([5, 7, 6])
    generator = torch.Generator().manual_seed(0)
    counts = [Counter() for _ in sizes]
    for _ in range(6000):
        for row, positions in enumerate(_floyd(sizes, 2, generator).tolist()):
            assert len(set(positions)) == 2 and max(positions) < sizes[row]
            counts[row][tuple(sorted(positions))] += 1
    for row, size in enumerate(sizes.tolist()):
        subsets = list(itertools.combinations(range(size), 2))
        assert set(counts[row]) == set(subsets)
        assert chisquare([counts[row][s] for s in subsets]).pvalue > 1e-4


def test_an_audits_large_shards_are_sampled_with_floyd_and_a_single_network_keeps_its_draw():
    x = torch.arange(400.0)[:, None]
    local = LocalData(x, torch.arange(400), [np.arange(0, 200), np.arange(200, 400)])
    copies = local.repeat(3)
    for batch in (3, 200 // FLOYD_RATIO + 1):
        _, _, alone = local.fixed_batches(batch, torch.Generator().manual_seed(1))
        keys = torch.rand(local.index.shape, generator=torch.Generator().manual_seed(1))
        assert torch.equal(alone, local.index.gather(1, keys.topk(batch, dim=1).indices))
        _, yb, rows = copies.fixed_batches(batch, torch.Generator().manual_seed(1))
        assert rows.shape == (6, batch) and torch.equal(yb, rows)
        for agent in range(6):
            drawn, low = rows[agent].tolist(), 200 * (agent % 2)
            assert len(set(drawn)) == batch and all(low <= r < low + 200 for r in drawn)


def test_a_poisson_mask_is_the_draw_of_poisson_batches_and_copies_share_shards():
    x = torch.randn(30, 4)
    local = LocalData(x, torch.arange(30), [np.arange(0, 10), np.arange(10, 30)]).repeat(3)
    rates = torch.full((6,), 0.4)
    chosen = local.poisson_mask(rates, torch.Generator().manual_seed(2))
    xb, _, mask, rows = local.poisson_batches(rates, torch.Generator().manual_seed(2))
    shard_x, shard_y = local.shards()
    assert shard_x.shape == (2, 20, 4) and local.copies == 3
    for agent in range(6):
        assert rows[agent][mask[agent] > 0].tolist() == local.index[agent][chosen[agent]].tolist()
        assert torch.equal(shard_y[agent % 2][chosen[agent]], local.index[agent][chosen[agent]])
