"""Issue 39 item 1: the wire delivers. A `Malicious` tap's liar replaces what it broadcasts,
receiver by receiver, and the honest agents mix what they received; without a liar nothing moves."""

import pytest
import torch

from privaudit.defenses.base import DEFENSES
from privaudit.defenses.dpsgd import DPSGD
from privaudit.errors import PrivauditError
from privaudit.sim import simulate
from privaudit.wire import GlobalListener, Kind, Malicious

RING = {"kind": "dpsgd", "topology": "ring", "agents": 4, "model": "mlp", "lr": 0.1, "batch_size": 8}


class Silent:
    """A liar that crafts nothing: every message goes out as the protocol sends it."""

    def craft(self, round, kind, sender, receivers, heard):
        return {}


class Push:
    """Sends agent `to` the liar's own state (what the protocol would send) plus `shift`, at `round` only."""

    def __init__(self, round: int, to: int, shift: float):
        self.round, self.to, self.shift = round, to, shift
        self.sent = {}

    def craft(self, round, kind, sender, receivers, heard):
        if round != self.round:
            return {}
        (own,) = [d.value for d in heard.disclosures if d.round == round and d.name == "protocol model"]
        self.sent[round] = own + self.shift
        return {self.to: self.sent[round]}


def test_a_liar_that_crafts_nothing_leaves_every_state_bit_identical(defense_of):
    honest = simulate(defense_of(RING), rounds=3, eval_every=10)
    silent = simulate(defense_of(RING), rounds=3, eval_every=10, taps=[Malicious([1], [1], Silent())])
    assert torch.equal(honest.final_states, silent.final_states)
    assert honest.messages_sent == silent.messages_sent


def test_the_receiver_mixes_the_crafted_message_and_the_liar_updates_honestly(defense_of):
    honest = simulate(defense_of(RING), rounds=2, eval_every=10, taps=[GlobalListener()])
    push = Push(round=1, to=0, shift=0.5)
    listener = GlobalListener()
    lied = simulate(defense_of(RING), rounds=2, eval_every=10, taps=[Malicious([1], [1], push), listener])
    W = defense_of(RING).setup.topology.W
    x_liar = honest.transcripts[0].payload(Kind.MODEL, 1, 1, None)
    shift = float(W[0, 1]) * (push.sent[1] - x_liar)
    assert torch.allclose(lied.final_states[0], honest.final_states[0] + shift, atol=1e-6)
    assert not torch.allclose(lied.final_states[0], honest.final_states[0], atol=1e-3)
    assert torch.equal(lied.final_states[1:3], honest.final_states[1:3])
    assert torch.equal(listener.transcript(None).payload(Kind.MODEL, 1, 1, 0), push.sent[1])
    assert torch.equal(listener.transcript(None).payload(Kind.MODEL, 1, 1, 2), x_liar)
    assert not listener.transcript(None).find(Kind.MODEL, round=1, sender=1, receiver=None)


def test_a_defense_that_does_not_mix_the_delivery_is_refused_in_one_line(defense_of):
    assert {name for name, cls in DEFENSES.items() if cls.delivering()} >= {
        "dpsgd", "dp_dpsgd", "muffliato", "tvss_output", "tvss_gradient", "ternary", "dpdl", "lt_admm_dp"}

    class Stubborn(DPSGD):
        """Steps its own way (the parent's code) without declaring that it mixes the delivery."""

        def step(self, t, wire):
            super().step(t, wire)

    stubborn = Stubborn(DPSGD.Params(lr=0.1, batch_size=8), defense_of(RING).setup)
    assert not Stubborn.delivering()
    with pytest.raises(PrivauditError, match="would reach nobody") as error:
        simulate(stubborn, rounds=1, eval_every=10, taps=[Malicious([1], [1], Silent())])
    assert "\n" not in str(error.value)


def test_a_crafted_message_for_a_non_neighbour_is_refused(defense_of):
    with pytest.raises(ValueError, match="agent 3, which is not its neighbour"):
        simulate(defense_of(RING), rounds=2, eval_every=10, taps=[Malicious([1], [1], Push(0, to=3, shift=1.0))])
