"""Many worlds as one simulation: the disjoint copies of a network are independent runs of it."""

import dataclasses

import pytest
import torch

from defenses import DEFENSES
from privaudit.sim import simulate
from privaudit.threats import build_tap
from privaudit.topology import Topology
from privaudit.wire import Kind
from privaudit.worlds import Replicated, replicate, world_agents
from tests.helpers import small_campaign


def _setup(table, **data):
    from privaudit.campaign.cells import build_setup, expand

    cell = expand(small_campaign([table], **data))[0]
    return cell, build_setup(cell)


def test_replicated_topology_is_block_diagonal_with_the_network_size_kept():
    ring = Topology.build("ring", 5)
    copies = ring.replicate(3)
    assert (copies.n, copies.network_size, copies.copies) == (15, 5, 3)
    assert (copies.W[:5, :5] == ring.W).all() and (copies.W[5:10, 5:10] == ring.W).all()
    assert (copies.W[:5, 5:] == 0).all()
    assert copies.neighbours(7) == [6, 8]
    with pytest.raises(ValueError, match="replicate takes one network"):
        copies.replicate(2)


def test_a_world_of_a_deterministic_run_follows_the_single_run_exactly():
    """Full batches and no noise make D-PSGD deterministic: each copy must then evolve exactly as
    the network alone (nothing crosses between copies, and N stays the network's)."""
    table = {"kind": "dpsgd", "topology": "ring", "agents": 4, "model": "logreg", "rounds": 5, "batch_size": 40,
             "lr": 0.5}
    cell, setup = _setup(table, max_train=160)
    alone = DEFENSES["dpsgd"](cell.params, setup)
    together = DEFENSES["dpsgd"](cell.params, replicate(setup, 3))
    simulate(alone, 5, eval_every=5)
    simulate(together, 5, eval_every=5)
    for world in range(3):
        assert torch.allclose(together.states[4 * world: 4 * world + 4], alone.states, atol=1e-6)


def test_worlds_draw_their_own_randomness():
    table = {"kind": "dp_dpsgd", "topology": "complete", "agents": 3, "model": "logreg", "rounds": 3,
             "batch_size": 5, "lr": 0.5, "noise_multiplier": 1.0}
    cell, setup = _setup(table, max_train=90)
    together = DEFENSES["dp_dpsgd"](cell.params, replicate(setup, 2))
    simulate(together, 3, eval_every=3)
    assert not torch.allclose(together.states[:3], together.states[3:])


def test_a_replicated_tap_hears_in_every_world_what_its_network_tap_hears():
    ring = Topology.build("ring", 4)
    copies = ring.replicate(3)
    base = build_tap("eavesdropper", 0, ring, links=[(0, 1)], kinds=[Kind.MODEL])
    tap = Replicated(base, ring)
    tap.check(copies)
    for world in range(3):
        shift = 4 * world
        assert tap.hears(shift + 0, shift + 1, copies) and tap.hears(shift + 1, None, copies)
        assert not tap.hears(shift + 2, shift + 3, copies) and not tap.hears(shift + 3, None, copies)
    assert world_agents(1, 4, 3) == [1, 5, 9]
    with pytest.raises(ValueError, match="cannot listen to copies"):
        tap.check(Topology.build("ring", 5).replicate(2))


def test_dpdl_uses_the_network_size_not_the_simulated_one():
    table = {"kind": "dpdl", "topology": "ring", "agents": 4, "model": "logreg", "rounds": 2, "batch_size": 5,
             "noise_multiplier": 1.0}
    cell, setup = _setup(table, max_train=80)
    alone = DEFENSES["dpdl"](cell.params, setup)
    together = DEFENSES["dpdl"](cell.params, dataclasses.replace(replicate(setup, 2)))
    assert torch.allclose(together.noisy_weight[:8], alone.noisy_weight[:8])
    assert together.claim(10).eps_claimed == pytest.approx(alone.claim(10).eps_claimed)
