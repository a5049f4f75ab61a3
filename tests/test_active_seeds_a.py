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
from privaudit.defenses.tvss import Schedule
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import GroundTruth, Kind, Malicious, Tap

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
