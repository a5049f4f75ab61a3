"""Issue 39 acceptance 4: a malicious agent never reads a message its tap does not hear, and the
honest agents run the same code with and without it.

The run is recorded as the defense hands it to the wire (every broadcast's payloads, every private
value), then replayed onto a fresh wire with a fresh liar twice: as it was, and with every payload
and value of an agent the malicious tap does not hear replaced by NaN. The liar's crafted message
and the records it recovers must not change; NaN in a model it does hear changes them (the control
that shows the replay can fail)."""

import torch

from privaudit.attacks.active.recovery import recover_trapped
from privaudit.attacks.active.threat import TrapOverride, malicious_tap, plan_override
from privaudit.defenses.base import Defense
from privaudit.defenses.dpsgd import DPSGD
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import Wire

RING6 = {"kind": "dpsgd", "topology": "ring", "agents": 6, "model": "mlp", "model_options": {"hidden": [256]},
         "lr": 0.1, "batch_size": 16}
ROUNDS = 5


class Recording(Wire):
    """A wire that keeps what the defense hands it, to replay it (test code on the wire's side:
    the defense's own code is untouched)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handed = []

    def broadcast_each(self, round, kind, payloads):
        self.handed.append(("broadcast", round, kind, payloads.clone()))
        return super().broadcast_each(round, kind, payloads)

    def disclose_each(self, round, name, values):
        computed = values() if callable(values) else values
        self.handed.append(("disclose", round, name, [v.clone() for v in computed]))
        return super().disclose_each(round, name, computed)


def _liar(defense):
    setup = defense.setup
    plan = plan_override("dpsgd", setup.topology, victim=0, round=2, rounds=ROUNDS, agents=[1, 5])
    strategy = TrapOverride(plan, public_knowledge(defense), setup.model, setup.data.x_test, 16, setup.seed)
    return plan, strategy, malicious_tap(plan, strategy)


def _blank(value):
    """NaN in place of a float value; -1 (no row) in place of a batch's row indices."""
    return torch.full_like(value, float("nan") if value.is_floating_point() else -1)


def _replay(handed, defense, blank: set[int]):
    """The recorded run replayed onto a fresh wire and liar, agents `blank`'s payloads and values NaN."""
    plan, strategy, tap = _liar(defense)
    wire = Wire(defense.setup.topology, [tap], delivers=True)
    for what, round, name, values in handed:
        if what == "broadcast":
            payloads = values.clone()
            payloads[sorted(blank)] = float("nan")
            wire.broadcast_each(round, name, payloads)
        else:
            wire.disclose_each(round, name, [_blank(v) if i in blank else v for i, v in enumerate(values)])
    setup = defense.setup
    transcript = tap.transcript(public_knowledge(defense))
    return strategy, recover_trapped(transcript, plan, setup.model, setup.data, 16, setup.seed)


def test_the_liar_reads_nothing_its_tap_does_not_hear(defense_of):
    defense = defense_of(RING6)
    plan, strategy, tap = _liar(defense)
    wire = Recording(defense.setup.topology, [tap], delivers=True)
    for t in range(ROUNDS):
        defense.step(t, wire)
    unheard = {agent for agent in range(6) if not tap.hears(agent, None, defense.setup.topology)}
    assert unheard == {3}

    same, same_rec = _replay(wire.handed, defense, set())
    blanked, blanked_rec = _replay(wire.handed, defense, unheard)
    assert torch.equal(same.message, strategy.message)
    assert torch.equal(blanked.message, strategy.message)
    assert torch.isfinite(blanked_rec.images).all()
    assert torch.equal(blanked_rec.images, same_rec.images)

    control, _ = _replay(wire.handed, defense, {5})
    assert torch.isnan(control.message).any()


def test_the_honest_agents_run_the_same_code_with_and_without_a_liar(defense_of):
    honest, lied = defense_of(RING6), defense_of(RING6)
    _, _, tap = _liar(lied)
    simulate(honest, rounds=1, evaluation=False)
    simulate(lied, rounds=1, taps=[tap], evaluation=False)
    for defense in (honest, lied):
        assert type(defense) is DPSGD
        assert type(defense).step is DPSGD.step and type(defense).gossip is Defense.gossip
        assert type(defense).local_gradients is DPSGD.local_gradients
        assert not {"step", "gossip", "local_gradients"} & set(vars(defense))
