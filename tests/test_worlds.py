"""Many worlds as one simulation: the disjoint copies of a network are independent runs of it."""

import dataclasses

import pytest
import torch

from privaudit.defenses import DEFENSES
from privaudit.sim import simulate
from privaudit.threats import build_tap
from privaudit.topology import Topology
from privaudit.wire import Kind
from privaudit.worlds import Replicated, replicate
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
    assert copies.has_edge(5, 6) and not copies.has_edge(4, 5) and copies.degree(9) == 2
    assert copies.edges == sorted((min(u, v), max(u, v)) for u, v in copies.graph.edges)
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
    tap = Replicated(base, ring, 3)
    tap.check(copies)
    for world in range(3):
        shift = 4 * world
        assert tap.hears(shift + 0, shift + 1, copies) and tap.hears(shift + 1, None, copies)
        assert not tap.hears(shift + 2, shift + 3, copies) and not tap.hears(shift + 3, None, copies)
    with pytest.raises(ValueError, match="cannot listen to copies"):
        tap.check(Topology.build("ring", 5).replicate(2))
    with pytest.raises(ValueError, match="worlds cannot listen"):
        tap.check(ring.replicate(2))


def test_dpdl_uses_the_network_size_not_the_simulated_one():
    table = {"kind": "dpdl", "topology": "ring", "agents": 4, "model": "logreg", "rounds": 2, "batch_size": 5,
             "noise_multiplier": 1.0}
    cell, setup = _setup(table, max_train=80)
    alone = DEFENSES["dpdl"](cell.params, setup)
    together = DEFENSES["dpdl"](cell.params, dataclasses.replace(replicate(setup, 2)))
    assert torch.allclose(together.noisy_weight[:8], alone.noisy_weight[:8])
    assert together.claim(10).eps_claimed == pytest.approx(alone.claim(10).eps_claimed)


def test_copies_mix_and_weigh_as_their_block_diagonal_w():
    """Gossip on the copies is the dense block-diagonal W, without building it."""
    torus = Topology.build("torus", 9)
    copies = torus.replicate(4)
    x = torch.randn(36, 5, 2, dtype=torch.float64)
    dense = torch.tensor(copies.W)
    assert torch.allclose(copies.mix(x), torch.einsum("ij,jab->iab", dense, x))
    rows, cols = torch.randint(36, (200,)), torch.randint(36, (200,))
    assert torch.allclose(copies.weights(rows, cols).double(), dense[rows, cols], atol=1e-7)
    assert torch.allclose(torus.mix(x[:9]), torch.einsum("ij,jab->iab", torch.tensor(torus.W), x[:9]))


def _stacked_and_alone(kind: str, table: dict, copies: int = 3):
    """One simulation of `copies` worlds heard by a replicated global listener and by a global
    listener of every simulated agent."""
    from privaudit.wire import GlobalListener

    cell, setup = _setup({"kind": kind, **table}, max_train=120)
    many = replicate(dataclasses.replace(setup, generator=torch.Generator().manual_seed(5)), copies)
    network = setup.topology
    stacked, alone = Replicated(GlobalListener(), network, copies), GlobalListener()
    simulate(DEFENSES[kind](cell.params, many), 3, eval_every=3, taps=[stacked, alone])
    return network, stacked, alone


def test_a_replicated_tap_keeps_each_message_once_stacked_over_the_worlds():
    network, stacked, alone = _stacked_and_alone(
        "dp_dpsgd", {"topology": "ring", "agents": 4, "model": "logreg", "rounds": 3, "batch_size": 5, "lr": 0.5})
    assert len(stacked.messages) * 3 == len(alone.messages)
    for message in stacked.messages:
        assert message.payload.shape[0] == 3
        for world in range(3):
            (own,) = [m for m in alone.messages if (m.round, m.sender, m.kind) ==
                      (message.round, world * network.n + message.sender, message.kind)]
            assert torch.equal(message.payload[world], own.payload)


class _AgentByAgent(DEFENSES["dpsgd"]):
    """D-PSGD sending each agent's broadcast with its own call (a defense written without `broadcast_each`)."""

    name = "dpsgd_agent_by_agent"

    def step(self, t, wire):
        for i in range(self.setup.topology.n):
            wire.broadcast(t, i, Kind.MODEL, self.x[i])
        gradients, _ = self.local_gradients()
        self.x = self.gossip(self.x) - self.params.lr * gradients


def test_messages_sent_agent_by_agent_are_stacked_too():
    from privaudit.wire import GlobalListener

    cell, setup = _setup({"kind": "dpsgd", "topology": "ring", "agents": 4, "model": "logreg", "rounds": 2,
                          "batch_size": 5, "lr": 0.5}, max_train=120)
    many = replicate(setup, 2)
    one_by_one, at_once = Replicated(GlobalListener(), setup.topology, 2), Replicated(GlobalListener(), setup.topology, 2)
    seeded = [dataclasses.replace(many, generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    simulate(_AgentByAgent(cell.params, seeded[0]), 2, eval_every=2, taps=[one_by_one])
    simulate(DEFENSES["dpsgd"](cell.params, seeded[1]), 2, eval_every=2, taps=[at_once])
    assert [(m.round, m.sender) for m in one_by_one.messages] == [(m.round, m.sender) for m in at_once.messages]
    assert all(torch.equal(a.payload, b.payload) for a, b in zip(one_by_one.messages, at_once.messages))
    assert not one_by_one._pending
