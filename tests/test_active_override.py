"""Issue 39 item 2 and acceptance 1: the trap-weight state override on D-PSGD and DP-D-PSGD. The
liar steers the victim to trap weights built on its own model, and reads the victim's batch off its
next release; the passive attack on the same run (the same agents, honest) is measured beside it."""

import pytest
import torch

from privaudit.attacks.active.threat import TrapOverride, malicious_tap, plan_override
from privaudit.attacks.active.trap import expected_alone, trap_weights
from privaudit.attacks.active.trial import override_trial
from privaudit.attacks.extraction import steer_mixing
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import GroundTruth

MLP256 = {"kind": "dpsgd", "topology": "ring", "agents": 4, "model": "mlp", "model_options": {"hidden": [256]},
          "lr": 0.1, "batch_size": 16}


def test_the_victim_mixes_exactly_to_the_goal(defense_of):
    defense = defense_of(MLP256)
    setup = defense.setup
    plan = plan_override("dpsgd", setup.topology, victim=0, round=1, rounds=4, agents=[1, 3])
    strategy = TrapOverride(plan, public_knowledge(defense), setup.model, setup.data.x_test, 16, setup.seed)
    truth = GroundTruth(0, rounds=[1], names=("gradient",))
    simulate(defense, rounds=2, taps=[malicious_tap(plan, strategy), truth], evaluation=False)
    (gradient,) = [d.value for d in truth.disclosures]
    mixed = defense.states[0].double() + 0.1 * gradient.double()
    assert torch.allclose(mixed, strategy.goal.double(), atol=1e-5)
    assert not torch.allclose(strategy.message, strategy.goal, atol=1e-2)


def test_trap_units_each_fire_for_one_public_record_in_B(defense_of):
    setup = defense_of(MLP256).setup
    public = setup.data.x_test
    trapped = trap_weights(setup.model, setup.model.initial(), public, 16, seed=0)
    weight, bias = trapped[:256 * 64].view(256, 64), trapped[256 * 64:256 * 65]
    firing = ((public.reshape(len(public), -1) @ weight.T + bias) > 0).double().mean(dim=0)
    assert torch.allclose(firing, torch.full_like(firing, 1 / 16), atol=0.01)
    assert torch.equal(trapped[256 * 65:], setup.model.initial()[256 * 65:])
    assert expected_alone(256, 16) == pytest.approx(256 / 16 * (15 / 16) ** 15)


def test_steer_mixing_solves_the_victims_row():
    from privaudit.wire import Kind, Message, PublicKnowledge, Transcript

    W = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.75, 0.0], [0.25, 0.0, 0.75]]).numpy()
    states = torch.randn(3, 5, dtype=torch.float64)
    public = PublicKnowledge("dpsgd", "custom", W, "mlp", (5,), 2, torch.zeros(5))
    heard = Transcript("malicious", None, [Message(0, j, None, Kind.MODEL, states[j]) for j in range(3)], [], public)
    goal = torch.randn(5, dtype=torch.float64)
    message = steer_mixing(Kind.MODEL)(heard, 0, 1, 0, goal)
    assert torch.allclose(0.5 * states[0] + 0.25 * message + 0.25 * states[2], goal)
    with pytest.raises(ValueError, match="agent 2 does not weigh in agent 1's average"):
        steer_mixing(Kind.MODEL)(heard, 0, 2, 1, goal)


def test_a_defense_without_a_steering_is_refused_in_one_line():
    from privaudit.attacks.active.threat import override_refusal

    refusal = override_refusal("a_defense_of_yours")
    assert refusal is not None and "\n" not in refusal
    assert "a liar steers dpsgd, dp_dpsgd, " in refusal and "not 'a_defense_of_yours'" in refusal
    assert "register_steering" in refusal and override_refusal("dpdl") is None


@pytest.mark.parametrize("table, where, error", [
    ({}, {}, "cannot steer and read agent 0: .*give agents that hold or neighbour every neighbour of agent 0"),
    ({}, {"liar": 2, "agents": [2, 1, 3]}, "the liar 2 must be a neighbour of the victim 0"),
    ({}, {"agents": [1, 3], "round": 2}, "reads the victim's release from round 4, but the run has rounds 0..3"),
    ({}, {"agents": [0, 1, 3]}, "the victim 0 cannot be one of the malicious agents"),
])
def test_plan_refuses_in_one_line_what_the_override_cannot_do(defense_of, table, where, error):
    defense = defense_of({**MLP256, **table})
    where = {"round": 1, **where}
    with pytest.raises(ValueError, match=error) as raised:
        plan_override(defense.name, defense.setup.topology, victim=0, rounds=4, **where)
    assert "\n" not in str(raised.value)


def _acceptance(defense_of, seed):
    trial = override_trial(lambda: defense_of(MLP256, seed=seed), victim=0, round=2, agents=[1, 3])
    active, passive = trial.active, trial.passive
    print(f"seed {seed}: active {active.recovered(40)}/{trial.records} above 40 dB "
          f"(PSNR {[round(v, 1) for v in active.psnr]}), passive {passive.recovered(40)}/{trial.records} "
          f"(PSNR {[round(v, 1) for v in passive.psnr]})")
    assert trial.records == 16
    assert active.recovered(40) >= 12
    assert active.leak["leak"] is True
    assert passive.recovered(40) < active.recovered(40)
    return trial


def test_acceptance_1_an_active_neighbour_recovers_the_batch_seed_0(defense_of):
    _acceptance(defense_of, 0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_acceptance_1_every_seed(defense_of, seed):
    _acceptance(defense_of, seed)


def test_dp_dpsgd_trapped_release_gives_records_despite_clipping_and_not_through_noise(defense_of):
    """Clipping scales each record's share of a unit alike in ∂W and ∂b, so with negligible noise
    the records come out exact; at σ = 1 the noise σC/B drowns the trapped units."""
    table = {**MLP256, "kind": "dp_dpsgd", "clip": 0.1}
    faint = override_trial(lambda: defense_of({**table, "noise_multiplier": 1e-9}), victim=0, round=2, agents=[1, 3])
    assert faint.active.recovered(40) >= 0.75 * faint.records
    noisy = override_trial(lambda: defense_of({**table, "noise_multiplier": 1.0}), victim=0, round=2, agents=[1, 3])
    assert noisy.active.recovered(40) == 0
