"""Issue 39 item 5's audits: a record-canary audit with a liar (`threat = "malicious"`) on every seed
algorithm whose view registers a steering, and on DP-D-PSGD. On an audit's batched worlds each
world's liar crafts from its own world's messages (over broadcasts and over links: LT-ADMM-DP sends
its bridge variables link by link), it lies at every round its steering serves and at no other,
the audit's reading of the stacked worlds equals their reading one by one, and what it cannot serve
is refused in one line."""

from __future__ import annotations

import copy

import pytest
import torch

from privaudit.attacks.active.override import steering
from privaudit.attacks.audit.canary_audit import _scores_of, audit_game, world
from privaudit.campaign.audit_findings import game_for_table
from privaudit.campaign.config import parse_campaign
from privaudit.defenses import DEFENSES
from privaudit.errors import ConfigError
from privaudit.sim import simulate
from privaudit.worlds import Replicated, one_world

DATA = {"dataset": "digits", "max_train": 120}
MLP = {"topology": "complete", "agents": 4, "model": "mlp", "model_options": {"hidden": [8]}, "eval_every": 100}
SEEDS = {
    "dp_dpsgd": {"kind": "dp_dpsgd", "rounds": 3, "lr": 0.5, "batch_size": 10, "clip": 1.0, "noise_multiplier": 1.0},
    "muffliato": {"kind": "muffliato", "rounds": 4, "lr": 0.5, "batch_size": 10, "clip": 1.0, "noise_multiplier": 0.5,
                  "gossip_steps": 2, "delta": 1e-5},
    "tvss_output": {"kind": "tvss_output", "rounds": 3, "clip": 0.2},
    "tvss_gradient": {"kind": "tvss_gradient", "rounds": 3, "clip": 0.2},
    "ternary": {"kind": "ternary", "rounds": 3, "batch_size": 2},
    "dpdl": {"kind": "dpdl", "rounds": 3, "batch_size": 8, "noise_multiplier": 1.0},
    "lt_admm_dp": {"kind": "lt_admm_dp", "rounds": 3, "tau": 2, "batch_size": 4, "sigma_e": 0.5},
}
COALITION = [1, 2, 3]
"""Every neighbour of victim 0 on the complete graph: LT-ADMM-DP's bridge is read from the victim's
messages on each of its links, which only their receivers hear."""


@pytest.fixture(scope="module", params=sorted(SEEDS))
def game(request):
    return game_for_table(MLP | SEEDS[request.param], DATA, canary="natural", threat="malicious",
                          statistic="projection", agents=COALITION)


def _stacked_run(game, copies: int, seed: int):
    """One simulation of `copies` worlds with the canary present, and its stacked transcript."""
    tap = Replicated(copy.deepcopy(game.tap), game.setup.topology, copies)
    defense = DEFENSES[game.kind](game.params, world(game, torch.ones(1, dtype=torch.bool), seed, copies))
    output = simulate(defense, game.rounds, taps=[tap], evaluation=False)
    return tap, output.transcripts[0]


def test_each_worlds_liar_crafts_from_its_own_worlds_messages_at_every_round_it_can_steer(game):
    tap, transcript = _stacked_run(game, 3, 7)
    strategy = tap.base.strategy
    plan, steer = strategy.plan, steering(game.kind)
    receivers = game.setup.topology.neighbours(plan.liar)
    lied = []
    for round in range(game.rounds):
        sent = transcript.find(steer.kind, round=round, sender=plan.liar, receiver=plan.victim)
        if steer.refusal(transcript.public.hyper, round) is not None:
            assert not sent or torch.equal(sent[0].payload, _protocol(tap, round, plan, steer.kind))
            continue
        (message,) = sent
        lied.append(round)
        assert not torch.allclose(message.payload.double(), _protocol(tap, round, plan, steer.kind).double())
        for w in range(3):
            own = strategy.craft(round, steer.kind, plan.liar, receivers, one_world(transcript, w))[plan.victim]
            assert torch.allclose(message.payload[w].double(), own.double(), rtol=1e-5, atol=1e-6)
    assert lied, f"the liar of {game.kind} lied at no round"


def _protocol(tap, round, plan, kind):
    """What the protocol would have had the liar send the victim at `round` (its own value, kept by the tap)."""
    names = {f"protocol {kind}", f"protocol {kind} to {plan.victim}"}
    (kept,) = [d.value for d in tap.disclosures if d.round == round and d.agent == plan.liar and d.name in names]
    return kept


def test_the_stacked_reading_of_the_steered_worlds_equals_their_reading_one_by_one(game):
    present = torch.ones(1, dtype=torch.bool)
    stacked = _scores_of(game, present, 5, 3, "stacked")
    alone = _scores_of(game, present, 5, 3, "alone")
    assert stacked.reading == "stacked" and alone.reading == "alone"
    assert stacked.heard == alone.heard and stacked.heard
    assert torch.allclose(torch.from_numpy(stacked.values), torch.from_numpy(alone.values), rtol=1e-6, atol=1e-9)


def test_one_stacked_world_lies_as_the_unstacked_wire_does(game):
    present = torch.ones(1, dtype=torch.bool)
    runs = []
    for tap in (Replicated(copy.deepcopy(game.tap), game.setup.topology, 1), copy.deepcopy(game.tap)):
        defense = DEFENSES[game.kind](game.params, world(game, present, 11, 1))
        simulate(defense, game.rounds, taps=[tap], evaluation=False)
        runs.append(defense.states.detach().clone())
    assert torch.equal(runs[0], runs[1])


def test_the_audit_row_says_who_lied_and_a_null_audit_bounds_nothing(game):
    record = audit_game(game, runs=16, seed=0, null=True)
    assert record["eps_lb"] == 0 and record["active"]["liar"] == 1 and record["active"]["agents"] == COALITION


@pytest.mark.parametrize("name, change, named", [
    ("lt_admm_dp", {"agents": [1]}, "cannot steer and read agent 0"),
    ("tvss_gradient", {"statistic": "law"}, "statistic = 'projection'"),
    ("muffliato", {"model_options": {"hidden": [8, 8]}}, "canary steering sets an MLP"),
])
def test_what_the_steering_cannot_serve_is_refused_in_one_line(name, change, named):
    table = MLP | SEEDS[name] | {k: v for k, v in change.items() if k == "model_options"}
    options = {"agents": COALITION, "statistic": "projection"} | {k: v for k, v in change.items() if k != "model_options"}
    with pytest.raises(ConfigError, match=named) as refused:
        game_for_table(table, DATA, canary="natural", threat="malicious", **options)
    assert "\n" not in str(refused.value)


def test_no_round_muffliato_can_steer_is_refused_in_one_line():
    only_gossip = MLP | SEEDS["muffliato"] | {"rounds": 1}
    with pytest.raises(ConfigError) as refused:
        game_for_table(only_gossip, DATA, canary="natural", threat="malicious", statistic="projection", agents=COALITION)
    assert "\n" not in str(refused.value)


def test_an_active_audit_table_targets_every_seed_algorithm_of_a_campaign():
    defenses = [MLP | table | {"label": name} for name, table in SEEDS.items()]
    audit = {"kind": "canary", "threat": "malicious", "canary": "natural", "statistic": "projection",
             "agents": COALITION, "runs": 16}
    campaign = parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": DATA, "defense": defenses,
                               "audit": [audit]})
    assert sorted(campaign.audit_targets(0)) == list(range(len(SEEDS)))
