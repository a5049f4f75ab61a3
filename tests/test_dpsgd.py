"""The D-PSGD baselines: the leak an eavesdropper exploits, determinism, and DP-D-PSGD's claim."""

import pytest
import torch

from privaudit.attacks.views.dpsgd import state_difference as dpsgd_state_difference
from privaudit.accounting import epsilon, subsampled_gaussian
from privaudit.sim import simulate
from privaudit.wire import CuriousNeighbour, Eavesdropper, GlobalListener, Kind

RING = {"kind": "dpsgd", "topology": "ring", "agents": 6, "model": "mlp", "lr": 0.1, "batch_size": 16}


@pytest.mark.parametrize("round", [0, 4])
def test_global_listener_recovers_the_victims_gradient(defense_of, round):
    victim = 2
    defense = defense_of(RING, partition="dirichlet", alpha=0.5, min_size=20)
    listener, truth = GlobalListener(rounds=[round, round + 1]), CuriousNeighbour(victim, rounds=[round])
    output = simulate(defense, rounds=round + 2, eval_every=100, taps=[listener, truth])
    target = dpsgd_state_difference(output.transcripts[0], victim, round)
    (disclosed,) = [d.value for d in output.transcripts[1].disclosures if d.agent == victim and d.name == "gradient"]
    error = torch.linalg.vector_norm(target.gradient - disclosed.double()) / torch.linalg.vector_norm(disclosed.double())
    assert float(error) < 1e-5
    assert torch.equal(target.point, output.transcripts[0].payload(Kind.MODEL, round, victim, None))


def test_eavesdropper_on_all_victim_links_suffices_but_one_link_does_not(defense_of):
    defense = defense_of(RING)
    everywhere = Eavesdropper(links=[(1, 2), (2, 3)], rounds=[0, 1])
    one_link = Eavesdropper(links=[(2, 3)], rounds=[0, 1])
    output = simulate(defense, rounds=2, eval_every=100, taps=[everywhere, one_link])
    assert dpsgd_state_difference(output.transcripts[0], 2, 0).gradient.abs().sum() > 0
    with pytest.raises(KeyError, match="agent 1"):
        dpsgd_state_difference(output.transcripts[1], 2, 0)


def test_same_config_and_seed_give_the_same_numbers(defense_of):
    table = {**RING, "kind": "dp_dpsgd", "noise_multiplier": 1.0}
    first = simulate(defense_of(table, seed=3), rounds=5, eval_every=5)
    second = simulate(defense_of(table, seed=3), rounds=5, eval_every=5)
    other = simulate(defense_of(table, seed=4), rounds=5, eval_every=5)
    assert torch.equal(first.final_states, second.final_states)
    assert first.history == second.history
    assert not torch.equal(first.final_states, other.final_states)


def test_dpsgd_sends_one_model_broadcast_per_agent_per_round(defense_of):
    listener = GlobalListener()
    output = simulate(defense_of(RING), rounds=3, eval_every=10, taps=[listener])
    assert {m.kind for m in listener.messages} == {Kind.MODEL}
    assert sorted((m.round, m.sender) for m in listener.messages) == [(t, i) for t in range(3) for i in range(6)]
    assert all(m.receiver is None for m in listener.messages)
    assert output.messages_sent == {"model": 3 * 6 * 2}


def test_undefended_claim_says_there_is_no_bound(defense_of):
    claim = defense_of(RING).claim(100)
    assert claim.notion == "none" and claim.eps_sound is None and claim.eps_claimed is None


def test_dp_dpsgd_claim_is_the_subsampled_gaussian_of_the_worst_agent(defense_of):
    table = {**RING, "kind": "dp_dpsgd", "noise_multiplier": 1.1, "delta": 1e-5}
    defense = defense_of(table, partition="dirichlet", alpha=0.5, min_size=20)
    claim = defense.claim(200)
    q = 16 / int(defense.setup.local.sizes.min())
    event = subsampled_gaussian(q, 1.1, 200)
    assert claim.eps_claimed == pytest.approx(epsilon(event, 1e-5, "rdp"))
    assert claim.eps_sound == pytest.approx(epsilon(event, 1e-5, "pld"))
    assert 0 < claim.eps_sound <= claim.eps_claimed
    stronger = defense_of({**table, "noise_multiplier": 3.0}, partition="dirichlet", alpha=0.5, min_size=20)
    assert stronger.claim(200).eps_sound < claim.eps_sound


def test_dp_dpsgd_noise_has_the_stated_scale(defense_of):
    """Same batch drawn twice, once with σ and once with σ ≈ 0: the difference is the noise,
    whose std per coordinate must be σC/B."""
    defense = defense_of({**RING, "kind": "dp_dpsgd", "noise_multiplier": 2.0, "clip": 0.5})
    state = defense.setup.generator.get_state()
    noisy, _ = defense.local_gradients()
    defense.setup.generator.set_state(state)
    defense.params = defense.params.model_copy(update={"noise_multiplier": 1e-9})
    signal, _ = defense.local_gradients()
    assert float((noisy - signal).std()) == pytest.approx(2.0 * 0.5 / 16, rel=0.03)
