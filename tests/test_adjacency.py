"""Issue 22, acceptance 4: every audit of a shipped defense tests the neighbouring relation its
claim states, or its row says why not."""

from __future__ import annotations

import pytest

from privaudit.attacks.audit.mechanism_audit import audit
from privaudit.attacks.audit.mechanisms import MECHANISMS
from privaudit.attacks.views import CHANNELS
from privaudit.campaign.audit_findings import canary_relation, game_for_table, mechanism_relation

LOGREG = {"topology": "ring", "agents": 3, "model": "logreg", "rounds": 4}
ESTIMATOR = {"topology": "ring", "agents": 3, "model": "linear_estimator", "rounds": 4}
DEFENSES = {
    "dpsgd": ({"dataset": "digits", "max_train": 120}, {**LOGREG, "batch_size": 8}),
    "dp_dpsgd": ({"dataset": "digits", "max_train": 120}, {**LOGREG, "batch_size": 8, "noise_multiplier": 1.0}),
    "muffliato": ({"dataset": "digits", "max_train": 120},
                  {**LOGREG, "batch_size": 8, "noise_multiplier": 1.0, "gossip_steps": 2}),
    "dpdl": ({"dataset": "digits", "max_train": 120}, {**LOGREG, "batch_size": 8, "noise_multiplier": 2.0}),
    "lt_admm_dp": ({"dataset": "logistic", "samples_per_agent": 40},
                   {**LOGREG, "model_options": {"binary": True}, "tau": 2}),
    "tvss_output": ({"dataset": "estimation_wz", "samples_per_agent": 20}, ESTIMATOR),
    "tvss_gradient": ({"dataset": "estimation_wz", "samples_per_agent": 20}, ESTIMATOR),
    "ternary": ({"dataset": "estimation_wb", "samples_per_agent": 20}, ESTIMATOR),
}
"""A small configuration of every defense a canary audit runs on."""


def test_every_canary_channel_has_a_configuration_here():
    assert set(DEFENSES) == set(CHANNELS)


@pytest.mark.parametrize("kind", sorted(DEFENSES))
def test_a_canary_audit_tests_its_claims_relation_or_says_why_not(kind):
    data, table = DEFENSES[kind]
    game = game_for_table({"kind": kind, **table}, data)
    relation = canary_relation(game)
    neighbours = game.claim.neighbours
    if game.claim.notion == "none":
        assert neighbours is None and not relation["same"] and "no privacy" in relation["why"]
        return
    assert neighbours is not None, f"{kind}'s claim states no neighbouring relation"
    assert relation["same"] == ((game.channel.adjacency, game.channel.unit) == (neighbours.change, neighbours.unit))
    if relation["same"]:
        assert relation["why"] is None and relation["claimed"] == neighbours.words()
    else:
        assert relation["why"], f"{kind}: the canary audit tests another relation and does not say why"
    expected_same = {"dp_dpsgd": True, "muffliato": True, "dpdl": True, "lt_admm_dp": True, "tvss_output": True,
                     "tvss_gradient": True, "ternary": False}
    assert relation["same"] == expected_same[kind]


@pytest.mark.parametrize("name", sorted(name for name, cls in MECHANISMS.items() if cls.defense))
def test_a_mechanism_audit_of_a_defense_release_tests_the_defenses_relation(name):
    report = audit(name, samples=2_000, delta=1e-4)
    relation = mechanism_relation(report)
    data, table = DEFENSES[MECHANISMS[name].defense]
    claimed = game_for_table({"kind": MECHANISMS[name].defense, **table}, data).claim.neighbours
    sampled = report.claim.claim.neighbours
    assert (sampled.change, sampled.unit) == (claimed.change, claimed.unit)
    assert relation["same"] and relation["why"] is None


def test_wang_zhang_claims_state_definition_1_and_its_record_factor():
    for kind in ("tvss_output", "tvss_gradient"):
        data, table = DEFENSES[kind]
        claim = game_for_table({"kind": kind, **table}, data).claim
        assert claim.neighbours.unit == "gradient" and claim.neighbours.record_factor == 2.0
        assert not claim.neighbours.enforced and "Definition 1" in claim.neighbours.premise
        (finding,) = [text for kind, text in claim.findings if kind == "premise not enforced"]
        assert "factor 2" in finding and "Definition 1" in finding
