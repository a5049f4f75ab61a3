"""Issue 39 items 1 and 5 for Muffliato-GD, Wang & Zhang's two algorithms (seed 003) and Wang &
Başar's ternary quantizer (seed 004): each step mixes what the wire delivers (the honest path
bit-identical when nobody lies), each view states how a neighbour who lies steers it, from the
algorithm's own update solved for the liar's message, exact where the liar hears the victim's state
and off by exactly the stated error where it hears only a noisy or quantized copy; a steering that
cannot apply refuses in one line; and no honest-agent claim of these algorithms is called refuted by
an active result."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch
from torch import Tensor

from privaudit.attacks.active.override import override_message, steering, victim_model
from privaudit.attacks.active.threat import plan_override
from privaudit.attacks.active.trial import override_trial
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.defenses.tvss import Schedule
from privaudit.reports.html import runs_of
from privaudit.reports.verdicts import verdict_section
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import GroundTruth, Kind, Malicious, Tap
from tests.helpers import campaign_file, one_line_error

MLP = {"topology": "ring", "agents": 4, "model": "mlp", "model_options": {"hidden": [32]}}
TABLES = {
    "muffliato": {"kind": "muffliato", "lr": 0.1, "batch_size": 16, "clip": 0.1, "noise_multiplier": 1.0,
                  "gossip_steps": 2},
    "tvss_output": {"kind": "tvss_output"},
    "tvss_gradient": {"kind": "tvss_gradient"},
    "ternary": {"kind": "ternary", "batch_size": 4},
}
KINDS = {"muffliato": Kind.MODEL, "tvss_output": Kind.NOISY_STATE, "tvss_gradient": Kind.MODEL,
         "ternary": Kind.QUANTIZED_STATE}


@dataclass
class Silent:
    """A liar that crafts nothing: the wire must deliver exactly what the protocol sends."""

    calls: int = 0

    def craft(self, round, kind, sender, receivers, heard):
        self.calls += 1
        return {}


@dataclass
class ToGoal:
    """A liar that steers victim 0 at `round` to a random goal near its model as the liar holds it
    (the defense's `Steering`, read through the override's own functions)."""

    round: int
    knowledge: object
    goal: Tensor | None = field(default=None, repr=False)
    base: Tensor | None = field(default=None, repr=False)

    def craft(self, round, kind, sender, receivers, heard: Tap):
        if round != self.round:
            return {}
        base = self.base = victim_model(heard, self.knowledge, round, 0)
        noise = torch.randn(base.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        self.goal = base + 0.5 * noise
        return {0: override_message(heard, self.knowledge, round, sender, 0, self.goal)}


def _build(defense_of, name):
    return defense_of({**MLP, **TABLES[name]})


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_honest_path_is_bit_identical_with_a_liar_that_crafts_nothing(defense_of, name):
    plain, lied = _build(defense_of, name), _build(defense_of, name)
    simulate(plain, rounds=3, taps=[], evaluation=False)
    silent = Silent()
    simulate(lied, rounds=3, taps=[Malicious([1, 3], [1], silent, speaks=[KINDS[name]])], evaluation=False)
    assert silent.calls == 3
    assert torch.equal(plain.states, lied.states)
    assert steering(name) is not None and type(lied).delivering()


def _steered(defense_of, name, round):
    """Run `name` with agent 1 steering victim 0 at `round` (agents 1 and 3 pooled); the liar's
    strategy, the victim's private values of that round and its state after it."""
    defense = _build(defense_of, name)
    strategy = ToGoal(round, public_knowledge(defense))
    truth = GroundTruth(0, rounds=[round], names=("gradient", "noise", "state"))
    simulate(defense, rounds=round + 1, taps=[Malicious([1, 3], [1], strategy, speaks=[KINDS[name]]), truth],
             evaluation=False)
    own = {d.name: d.value.double() for d in truth.disclosures}
    return defense, strategy, own, defense.states[0].double()


def test_muffliato_mixes_exactly_to_the_goal_before_an_update_round(defense_of):
    _, strategy, _, after = _steered(defense_of, "muffliato", round=1)  # K = 2: round 1 gossips, round 2 updates
    assert torch.allclose(after, strategy.goal, atol=1e-5)


@pytest.mark.parametrize("round", [0, 2])
def test_tvss_gradient_lands_exactly_on_the_goal_before_its_step(defense_of, round):
    defense, strategy, own, after = _steered(defense_of, "tvss_gradient", round)
    alpha = float(Schedule.of(defense.params).step(round))
    assert torch.allclose(after + alpha * (own["gradient"] + own["noise"]), strategy.goal, atol=1e-4)


@pytest.mark.parametrize("round", [0, 2])
def test_tvss_output_is_exact_at_round_0_and_off_by_the_victims_own_noise_after(defense_of, round):
    defense, strategy, own, after = _steered(defense_of, "tvss_output", round)
    schedule = Schedule.of(defense.params)
    alpha, beta = float(schedule.step(round)), float(schedule.weight(round))
    error = -(1 - beta) * own["noise"] if round else torch.zeros_like(after)
    assert torch.allclose(after + alpha * own["gradient"], strategy.goal + error, atol=1e-4)
    if round:
        assert (error.abs() > 1e-2).float().mean() > 0.5  # the stated error is really there, not negligible


@pytest.mark.parametrize("round", [0, 2])
def test_ternary_is_exact_at_round_0_and_off_by_the_quantization_error_after(defense_of, round):
    defense, strategy, own, after = _steered(defense_of, "ternary", round)
    lam, eps = defense.params.step_sizes(round)
    error = own["state"] - strategy.base  # x_v^k − Q_v^k; zero at k = 0, where the base is the public x_0
    assert torch.allclose(after + eps * lam * own["gradient"], strategy.goal + error, atol=1e-4)
    assert (error.abs().max() == 0) == (round == 0)


def test_muffliato_refuses_a_round_before_a_gossip_round_in_one_line(defense_of):
    defense = _build(defense_of, "muffliato")  # K = 2: rounds 0, 2, … update
    with pytest.raises(ValueError, match="round 1, a gossip round .*choose a round t with t \\+ 1 a multiple of 2") as no:
        plan_override("muffliato", defense.setup.topology, victim=0, round=0, rounds=4, agents=[1, 3],
                      hyper=defense.public())
    assert "\n" not in str(no.value)
    assert plan_override("muffliato", defense.setup.topology, victim=0, round=1, rounds=4, agents=[1, 3],
                         hyper=defense.public()).recovery_round == 2


def _toml(tmp_path, defense: dict, attack: dict) -> str:
    return campaign_file(tmp_path / "active.toml", defense, "attack", attack)


TRAP = {"kind": "trap_weights", "label": "trap", "threat": "malicious", "agents": [1, 3], "victim": 0}


@pytest.mark.parametrize("defense, attack, error", [
    ({"kind": "muffliato", "gossip_steps": 2, "rounds": 4}, {"rounds": [0]}, "round 1, a gossip round"),
    ({"kind": "tvss_gradient", "rounds": 3}, {"rounds": [0]}, "'tvss_gradient' has no public batch size"),
])
def test_check_refuses_what_a_seed_steering_cannot_do_in_one_line(tmp_path, capsys, defense, attack, error):
    table = {**MLP, "label": "D", "eval_every": defense["rounds"], **defense}
    err = one_line_error(capsys, ["check", _toml(tmp_path, table, {**TRAP, **attack}), "--out", str(tmp_path / "o")])
    assert error in err, err


def test_the_trial_needs_a_batch_size_where_the_schedule_changes_it(defense_of):
    with pytest.raises(ValueError, match="'tvss_output' has no public batch size to place the traps for: give one"):
        override_trial(lambda: _build(defense_of, "tvss_output"), victim=0, round=0, agents=[1, 3])


@pytest.fixture(scope="module")
def honest_agent_run(tmp_path_factory):
    """The trap override on the honest-agent seed algorithms (seed 003's two, seed 004's), at settings
    where it does recover records from Wang & Zhang's (Laplace scale s = 10⁻⁹, no effective clipping),
    so that a verdict that stays below "refuted" means something."""
    ring = {**MLP, "rounds": 3, "eval_every": 3}
    defenses = [{**ring, "kind": "tvss_gradient", "label": "G", "sigma_scale": 1e-9, "clip": 1e6},
                {**ring, "kind": "tvss_output", "label": "O", "sigma_scale": 1e-9, "clip": 1e6},
                {**ring, "kind": "ternary", "label": "T", "batch_size": 1}]
    attack = {**TRAP, "rounds": [0], "batch_size": 3}
    raw = {"campaign": {"name": "t", "seeds": [0]}, "data": {"dataset": "digits"}, "defense": defenses,
           "attack": [attack]}
    store = run_campaign(parse_campaign(raw), "# test", tmp_path_factory.mktemp("seeds"), progress=False,
                         say=lambda line: None)
    return store.rows()


def test_no_honest_agent_claim_of_these_algorithms_is_refuted_by_an_active_result(honest_agent_run):
    rows = honest_agent_run
    training = [row for row in rows if row.get("type", "training") == "training"]
    assert {row["claim"]["threat"]["kind"] for row in training} == {"honest-but-curious"}
    recovered = {row["training"]: row["active"]["active"]["recovered"] for row in rows if row.get("active")}
    assert len(recovered) == 3 and sum(recovered.values()) >= 2  # the lie did recover records somewhere
    entries = verdict_section(rows, runs_of(training))["entries"]
    assert len(entries) == 3
    for entry in entries:
        assert entry["status"] != "refuted" and entry["threat"].startswith("honest-but-curious (seed 00")
        [finding] = [f for f in entry["findings"] if f["kind"] == "outside threat model"]
        assert "never a refutation" in finding["text"] and "the active attack trap" in finding["text"]


def test_the_report_gives_each_seed_its_own_batch_size():
    """Poisson batches (Muffliato-GD, DP-D-PSGD) differ from seed to seed: each seed's count is of its own batch."""
    from privaudit.reports.active import _inversion_side

    records = [{"records": 13, "threshold_db": 40.0}, {"records": 9, "threshold_db": 40.0}]
    sides = [{"label": "active", "recovered": 0}, {"label": "active", "recovered": 1}]
    assert _inversion_side(sides, records)["recovered"] == "0/13, 1/9"
