"""Issue 39 items 1 and 5 for DPDL (seed 000) and LT-ADMM-DP (seed 002): each step uses what the wire
delivered (the honest path unchanged), each view's Steering solves the algorithm's own update for
the liar's message (DPDL: the model it sends is the point of the victim's cross-gradient, lag 0;
LT-ADMM-DP: its bridge message sets the victim's next drift, lag 2), and an active result never
refutes a claim stated against passive adversaries (acceptance 3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
import torch
from torch import Tensor

from privaudit.attacks.active.override import override_message, steered_records, victim_model
from privaudit.attacks.active.threat import plan_override
from privaudit.attacks.views import STEERINGS
from privaudit.attacks.views.dpdl import cross_gradient, steer_cross_gradient
from privaudit.attacks.views.lt_admm_dp import steer_bridge
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.errors import PrivauditError
from privaudit.grads import batch_grads, clipped_sums, smooth_clip
from privaudit.reports.html import runs_of
from privaudit.reports.verdicts import verdict_section
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import GroundTruth, Kind, Malicious, PublicKnowledge, Tap, Transcript, Wire

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"topology": "ring", "agents": 4, "model": "mlp", "model_options": {"hidden": [16]}}
DPDL_ND = {**SMALL, "kind": "dpdl", "lr": 0.005, "batch_size": 4, "clip": 2.0, "alpha": 2.0, "noise": False}
DPDL_NOISY = {**DPDL_ND, "noise": True, "noise_multiplier": 1.0}
LT_ADMM = {**SMALL, "kind": "lt_admm_dp", "tau": 2, "batch_size": 4, "sigma_e": 0.5}


class Silent:
    """A liar's strategy that crafts nothing: every message goes out as the protocol says."""

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int], heard: Tap) -> Mapping[int, Tensor]:
        return {}


@dataclass
class Perturbed:
    """At `round`, the liar steers the victim to its own model (as the liar holds it) moved by a
    random `scale`: the goal and the message are kept for the test."""

    public: PublicKnowledge
    round: int
    liar: int
    victim: int
    scale: float
    goal: Tensor | None = field(default=None, repr=False)

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int], heard: Tap) -> Mapping[int, Tensor]:
        if round != self.round or sender != self.liar:
            return {}
        base = victim_model(heard, self.public, round, self.victim)
        self.goal = base + self.scale * torch.randn(base.shape, generator=torch.Generator().manual_seed(5),
                                                    dtype=torch.float64)
        return {self.victim: override_message(heard, self.public, round, self.liar, self.victim, self.goal)}


@pytest.mark.parametrize("table, speaks", [(DPDL_NOISY, [Kind.MODEL, Kind.MOMENTUM, Kind.PREGOSSIP_MODEL]),
                                           (LT_ADMM, [Kind.ADMM_BRIDGE])])
def test_a_liar_who_crafts_nothing_leaves_the_run_bit_identical(defense_of, table, speaks):
    honest = defense_of(table)
    simulate(honest, rounds=3, evaluation=False)
    lied = defense_of(table)
    simulate(lied, rounds=3, taps=[Malicious([1, 3], [1], Silent(), speaks=speaks)], evaluation=False)
    assert type(lied).delivering()
    assert torch.equal(honest.states, lied.states)


def test_dpdl_victim_computes_its_cross_gradient_at_the_liars_model(defense_of):
    defense = defense_of(DPDL_ND)
    setup = defense.setup
    strategy = Perturbed(public_knowledge(defense), round=1, liar=1, victim=0, scale=0.3)
    liar = Malicious([1], [1], strategy, speaks=[Kind.MODEL])
    truth = GroundTruth(0, rounds=[1])
    simulate(defense, rounds=2, taps=[liar, truth], evaluation=False)
    target = cross_gradient(liar.transcript(public_knowledge(defense)), 0, 1)
    assert torch.equal(target.point, strategy.goal.float())
    (rows,) = [d.value for d in truth.disclosures]
    x, y = setup.local.x[rows], setup.local.y[rows]
    at_goal = clipped_sums(setup.model, strategy.goal.float()[None], x[None], y[None], torch.ones(1, 4), 2.0)
    assert torch.allclose(target.gradient.float(), at_goal[0] / 4, atol=1e-6)
    honest = clipped_sums(setup.model, defense_of(DPDL_ND).states[1:2], x[None], y[None], torch.ones(1, 4), 2.0)
    assert not torch.allclose(target.gradient.float(), honest[0] / 4, atol=1e-3)


def test_lt_admm_victim_starts_two_rounds_later_at_the_goal_up_to_its_own_steps(defense_of):
    table = {**LT_ADMM, "sigma_e": 1e-3}
    defense = defense_of(table)
    setup, p = defense.setup, defense.params
    strategy = Perturbed(public_knowledge(defense), round=1, liar=1, victim=0, scale=0.5)
    liar = Malicious([1, 3], [1], strategy, speaks=[Kind.ADMM_BRIDGE])
    truth = GroundTruth(0, rounds=[2], names=("batch", "noise"))
    simulate(defense, rounds=3, taps=[liar, truth], evaluation=False)
    values = {d.name: d.value for d in truth.disclosures}
    start = STEERINGS["lt_admm_dp"].base(liar.transcript(public_knowledge(defense)), 1, 0)
    drift = (start - strategy.goal) / p.tau
    phi, steps = start, torch.zeros_like(start)
    for t in range(p.tau):
        rows = values["batch"][t]
        gradient = batch_grads(setup.model, phi.float()[None], setup.local.x[rows][None], setup.local.y[rows][None])
        step = p.gamma * (smooth_clip(gradient[0], p.zeta) + values["noise"][t]).double()
        phi, steps = phi - step - drift, steps + step
    assert torch.allclose(defense.states[0].double(), phi, atol=1e-4)
    assert torch.allclose(defense.states[0].double() + steps, strategy.goal, atol=1e-4)
    assert float(steps.norm()) <= p.tau * p.gamma * (p.zeta + 1e-3 * start.numel() ** 0.5 * 2)
    assert float((start - strategy.goal).norm()) > 10 * float(steps.norm())


def _transcript(defense: str, W: list[list[float]], messages: list) -> Transcript:
    public = PublicKnowledge(defense, "custom", torch.tensor(W).numpy(), "mlp", (3,), 2, torch.zeros(3))
    return Transcript("malicious", None, messages, [], public)


def test_the_steerings_refuse_a_liar_that_is_not_the_victims_neighbour():
    path = [[0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]]
    goal = torch.ones(3, dtype=torch.float64)
    for steer, defense in ((steer_cross_gradient, "dpdl"), (steer_bridge, "lt_admm_dp")):
        with pytest.raises(ValueError, match="agent 2 is not a neighbour of agent 0") as raised:
            steer(_transcript(defense, path, []), 0, 2, 0, goal)
        assert "\n" not in str(raised.value)
    assert torch.equal(steer_cross_gradient(_transcript("dpdl", path, []), 0, 1, 0, goal), goal)
    for defense in ("dpdl", "lt_admm_dp"):
        assert STEERINGS[defense].refusal({}, 0) is None


def test_plan_lone_liar_steers_dpdl_but_not_lt_admm_which_reads_every_link(defense_of):
    dpdl = defense_of(DPDL_ND)
    plan = plan_override("dpdl", dpdl.setup.topology, victim=0, round=0, rounds=1, liar=1)
    assert plan.recovery_round == 0 and plan.agents == (1,)
    lt = defense_of(LT_ADMM)
    with pytest.raises(ValueError, match="cannot steer and read agent 0: it does not hear agent 0.s messages to agent 3") as raised:
        plan_override("lt_admm_dp", lt.setup.topology, victim=0, round=0, rounds=3, liar=1)
    assert "\n" not in str(raised.value)
    plan = plan_override("lt_admm_dp", lt.setup.topology, victim=0, round=0, rounds=3, agents=[1, 3])
    assert plan.recovery_round == 2 and plan.rounds_heard == (0, 1, 2)


def test_the_wire_replaces_a_liars_directed_messages_and_still_refuses_single_sends(defense_of):
    topology = defense_of(LT_ADMM).setup.topology
    links = [(0, 1), (1, 0), (1, 2), (3, 0)]

    class Lie:
        def craft(self, round, kind, sender, receivers, heard):
            return {0: torch.full((2,), 9.0)}

    liar = Malicious([1], [1], Lie(), speaks=[Kind.ADMM_BRIDGE])
    wire = Wire(topology, [liar], delivers=True)
    sent = torch.arange(8.0).view(4, 2)
    delivered = wire.send_each(0, Kind.ADMM_BRIDGE, links, sent)
    assert set(delivered.crafted) == {(1, 0)}
    assert torch.equal(delivered.received(sent, links), torch.tensor([[0, 1], [9, 9], [4, 5], [6, 7]]).float())
    heard = {(m.sender, m.receiver): m.payload for m in liar.messages}
    assert torch.equal(heard[1, 0], torch.full((2,), 9.0)) and torch.equal(heard[1, 2], sent[2])
    with pytest.raises(PrivauditError, match="one message at a time"):
        wire.send(0, 1, 0, Kind.ADMM_BRIDGE, sent[0])


@pytest.fixture(scope="module")
def active_rows(tmp_path_factory):
    """A trap-weight override of DPDL (σ small enough for the trap to read records) and of
    LT-ADMM-DP, beside the passive attack, on a ring of 4 with a 256-unit MLP."""
    mlp = {"topology": "ring", "agents": 4, "model": "mlp", "model_options": {"hidden": [256]}}
    defenses = [
        {**mlp, "kind": "dpdl", "label": "DPDL", "rounds": 2, "eval_every": 2, "lr": 0.005, "batch_size": 16,
         "clip": 2.0, "alpha": 2.0, "noise_multiplier": 1e-6},
        {**mlp, "kind": "lt_admm_dp", "label": "LT-ADMM-DP", "rounds": 3, "eval_every": 3, "tau": 2, "batch_size": 8,
         "sigma_e": 1e-6},
    ]
    attack = {"kind": "trap_weights", "label": "trap", "threat": "malicious", "agents": [1, 3], "liar": 1,
              "victim": 0}
    raw = {"campaign": {"name": "t", "seeds": [0]}, "data": {"dataset": "digits"}, "defense": defenses,
           "attack": [{**attack, "defense": ["DPDL"], "rounds": [1]},
                      {**attack, "label": "trap (LT)", "defense": ["LT-ADMM-DP"], "rounds": [0]}]}
    store = run_campaign(parse_campaign(raw), "# test", tmp_path_factory.mktemp("seeds_b"), progress=False,
                         say=lambda line: None)
    return store.rows()


def test_acceptance_3_no_claim_of_dpdl_or_lt_admm_is_refuted_by_an_active_result(active_rows):
    training = [row for row in active_rows if row.get("type", "training") == "training"]
    active = [row for row in active_rows if row.get("active")]
    assert len(active) == 2
    dpdl = next(row for row in active if row["defense"] == "dpdl")
    assert dpdl["active"]["active"]["recovered"] >= 8  # the trap works: the finding is real, not vacuous
    entries = {entry["threat"].split(" (")[0]: entry
               for entry in verdict_section(active_rows, runs_of(training))["entries"]}
    assert set(entries) == {"eavesdropper", "any adversary"}  # DPDL's Theorem 1, LT-ADMM-DP's Theorem 2
    for entry in entries.values():
        assert entry["status"] != "refuted"
    entries["dpdl"], entries["lt_admm_dp"] = entries["eavesdropper"], entries["any adversary"]
    [finding] = [f for f in entries["dpdl"]["findings"] if f["kind"] == "outside threat model"]
    assert "never a refutation" in finding["text"] and "the active attack trap" in finding["text"]
    assert any("inside the claim's threat model" in note for note in entries["lt_admm_dp"]["notes"])


def test_lt_admm_traps_are_placed_for_every_record_its_tau_step_release_sums(active_rows):
    """LT-ADMM-DP's release read at the steered point sums τ local steps' batches (τB records, its
    steering's `records`), not one batch: the traps are placed, and the records counted, for τB; and
    at σ_e → 0 the liar rebuilds more of them than the same agents only listening."""
    (row,) = [row for row in active_rows if row.get("active") and row["defense"] == "lt_admm_dp"]
    assert steered_records("lt_admm_dp", {"tau": 2, "batch_size": 8}) == 16
    sides = row["active"]
    assert len(sides["active"]["psnr"]) == len(sides["passive"]["psnr"]) == 16
    assert sides["active"]["recovered"] > sides["passive"]["recovered"]
