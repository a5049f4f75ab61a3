"""Taps record exactly what their threat model hears, for the rounds and kinds configured."""

import pytest
import torch

from privaudit.topology import Topology
from privaudit.wire import CuriousNeighbour, Eavesdropper, GlobalListener, Kind, PublicKnowledge, Wire

RING = Topology.build("ring", 5)  # 0-1-2-3-4-0


def _traffic(wire: Wire, rounds: int = 3) -> None:
    """Every agent broadcasts its model and sends a cross-gradient to each neighbour, each round."""
    for t in range(rounds):
        for i in range(RING.n):
            wire.broadcast(t, i, Kind.MODEL, torch.full((3,), float(10 * t + i)))
            for j in RING.neighbours(i):
                wire.send(t, i, j, Kind.CROSS_GRADIENT, torch.full((2,), float(100 * i + j)))


def _headers(tap):
    return sorted((m.round, m.sender, m.receiver if m.receiver is not None else -1, str(m.kind)) for m in tap.messages)


def test_eavesdropper_hears_its_links_only_in_chosen_rounds_and_kinds():
    tap = Eavesdropper(links=[(0, 1)], rounds=[1], kinds=[Kind.MODEL])
    _traffic(Wire(RING, [tap]))
    assert _headers(tap) == [(1, 0, -1, "model"), (1, 1, -1, "model")]


def test_eavesdropper_hears_both_directions_of_a_link():
    tap = Eavesdropper(links=[(2, 3)], kinds=["cross_gradient"])
    _traffic(Wire(RING, [tap]), rounds=1)
    assert _headers(tap) == [(0, 2, 3, "cross_gradient"), (0, 3, 2, "cross_gradient")]


def test_curious_neighbour_hears_what_reaches_it_and_what_it_sends():
    tap = CuriousNeighbour(agent=2, rounds=[0])
    _traffic(Wire(RING, [tap]))
    expected = sorted(
        [(0, s, -1, "model") for s in (1, 2, 3)]
        + [(0, s, 2, "cross_gradient") for s in (1, 3)]
        + [(0, 2, r, "cross_gradient") for r in (1, 3)]
    )
    assert _headers(tap) == expected


def test_global_listener_hears_everything_in_its_rounds():
    tap = GlobalListener(rounds=[0, 2])
    _traffic(Wire(RING, [tap]))
    per_round = RING.n + 2 * len(RING.edges)
    assert len(tap.messages) == 2 * per_round
    assert {m.round for m in tap.messages} == {0, 2}


def test_disclosures_reach_only_the_observing_agent():
    me, other, listener = CuriousNeighbour(agent=1, rounds=[0]), CuriousNeighbour(agent=3), GlobalListener()
    wire = Wire(RING, [me, other, listener])
    wire.disclose(0, 1, "noise", torch.ones(2))
    wire.disclose(1, 1, "noise", torch.ones(2))
    assert [(d.round, d.agent, d.name) for d in me.disclosures] == [(0, 1, "noise")]
    assert other.disclosures == [] and listener.disclosures == []


def test_recorded_payload_is_a_copy():
    tap = GlobalListener()
    payload = torch.zeros(4)
    Wire(RING, [tap]).broadcast(0, 0, Kind.MODEL, payload)
    payload += 1
    assert torch.equal(tap.messages[0].payload, torch.zeros(4))


def test_counts_every_copy_sent_without_any_tap():
    wire = Wire(RING)
    _traffic(wire, rounds=2)
    assert wire.counts[Kind.MODEL] == 2 * 2 * RING.n  # a broadcast reaches two ring neighbours
    assert wire.counts[Kind.CROSS_GRADIENT] == 2 * 2 * len(RING.edges)


def test_sending_off_the_graph_and_tapping_a_non_edge_are_errors():
    with pytest.raises(ValueError, match="not its neighbour"):
        Wire(RING).send(0, 0, 2, Kind.CROSS_GRADIENT, torch.zeros(1))
    with pytest.raises(ValueError, match=r"link \(0, 2\) is not an edge"):
        Wire(RING, [Eavesdropper(links=[(0, 2)])])
    with pytest.raises(ValueError, match="not an agent"):
        Wire(RING, [CuriousNeighbour(agent=7)])


def test_transcript_lookup_names_what_was_heard():
    tap = Eavesdropper(links=[(0, 1)], rounds=[0, 1])
    _traffic(Wire(RING, [tap]))
    public = PublicKnowledge("x", "ring", RING.W, "mlp", (3,), 2, torch.zeros(3))
    transcript = tap.transcript(public)
    assert torch.equal(transcript.payload(Kind.MODEL, 1, 0, None), torch.full((3,), 10.0))
    assert torch.equal(transcript.payload("cross_gradient", 0, 1, 0), torch.full((2,), 100.0))
    with pytest.raises(KeyError, match=r"rounds heard from it: \[0, 1\]"):
        transcript.payload(Kind.MODEL, 2, 0, None)
