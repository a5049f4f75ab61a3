"""LT-ADMM-DP (seed 002): the wire, one round against the paper's equations by hand, the
neighbour's reconstruction of the state, the claim of Theorem 2 and a short training run."""

import math

import dp_accounting
import pytest
import torch

import privaudit.defenses.lt_admm_dp  # noqa: F401  (registers the defense)
from privaudit.defenses.lt_admm_dp import LTADMMDP, LTADMMDPParams
from privaudit.accounting import WITHOUT_REPLACEMENT_METHOD, without_replacement_epsilon
from privaudit.models import build_model
from privaudit.sim import simulate
from privaudit.wire import CuriousNeighbour, GlobalListener, Kind, Wire
from tests.helpers import tiny_setup

RING = {"kind": "lt_admm_dp", "topology": "ring", "agents": 4, "model": "logreg",
        "model_options": {"binary": True, "nonconvex_reg": 0.01}}
PAPER = {**RING, "agents": 10}


def test_one_bridge_message_per_directed_edge_per_round(defense_of):
    defense = defense_of(RING, dataset="logistic", samples_per_agent=20)
    listener = GlobalListener()
    output = simulate(defense, rounds=3, eval_every=10, taps=[listener])
    directed = [(i, j) for i in range(4) for j in ((i - 1) % 4, (i + 1) % 4)]
    assert sorted((m.round, m.sender, m.receiver) for m in listener.messages) == sorted(
        (t, i, j) for t in range(3) for i, j in directed)
    assert {m.kind for m in listener.messages} == {Kind.ADMM_BRIDGE}
    assert all(m.payload.shape == (5,) for m in listener.messages)
    assert listener.disclosures == []
    assert output.messages_sent == {"admm_bridge": 3 * 8}


def _reference_round(setup, p, x, z, noise, batch):
    """Eqs. (5a), (6), (7), Alg. 1 line 13 and eq. (5b), agent by agent, step by step, with the
    disclosed noise draws and batch rows; x [N, P], z {(i, j): z_ij}."""
    topology = setup.topology
    new_x = {}
    for i in range(topology.n):
        neighbours = topology.neighbours(i)
        consensus = p.beta * (p.rho * len(neighbours) * x[i] - sum(z[i, j] for j in neighbours))
        phi = x[i]
        for t in range(p.tau):
            rows = batch[i][t]
            point = phi.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(setup.model.loss(point, setup.local.x[rows], setup.local.y[rows]), point)
            mu = p.zeta / (p.zeta + torch.linalg.vector_norm(g))
            phi = phi - (p.gamma * (mu * g + noise[i][t]) + consensus)
        new_x[i] = phi
    messages = {(i, j): z[i, j] - 2 * p.rho * new_x[i] for i, j in z}
    new_z = {(i, j): 0.5 * z[i, j] - 0.5 * messages[j, i] for i, j in z}
    return new_x, messages, new_z


def test_one_round_matches_the_papers_equations_by_hand():
    torch.manual_seed(0)
    module = build_model("logreg", (3,), 2, binary=True, nonconvex_reg=0.3)
    setup = tiny_setup(3, topology="ring", samples=6, features=3, module=module)
    p = LTADMMDPParams(gamma=0.3, beta=0.2, rho=0.7, zeta=0.5, tau=3, batch_size=4, sigma_e=0.1)
    defense = LTADMMDP(p, setup)
    defense.step(0, Wire(setup.topology))
    x = defense.x.clone()
    z = {edge: defense.z[e].clone() for e, edge in enumerate(defense.edges)}
    assert not torch.allclose(z[0, 1], z[1, 0])
    listener, selves = GlobalListener(), [CuriousNeighbour(i) for i in range(3)]
    defense.step(1, Wire(setup.topology, [listener, *selves]))

    def disclosed(name):
        return [next(d.value for d in tap.disclosures if d.name == name) for tap in selves]

    noise, batch = disclosed("noise"), disclosed("batch")
    for i in range(3):
        assert noise[i].shape == (3, 3) and batch[i].shape == (3, 4)
        assert all(len(set(rows.tolist())) == 4 for rows in batch[i])
        assert set(batch[i].flatten().tolist()) <= set(range(6 * i, 6 * i + 6))
    assert len({tuple(rows.tolist()) for rows in batch[0]}) == 3
    new_x, messages, new_z = _reference_round(setup, p, x, z, noise, batch)
    for i in range(3):
        torch.testing.assert_close(defense.x[i], new_x[i], atol=1e-6, rtol=0)
    for e, edge in enumerate(defense.edges):
        sent = listener.transcript(None).payload(Kind.ADMM_BRIDGE, 1, edge[0], edge[1])
        torch.testing.assert_close(sent, messages[edge], atol=1e-6, rtol=0)
        torch.testing.assert_close(defense.z[e], new_z[edge], atol=1e-6, rtol=0)


def test_a_neighbour_rebuilds_the_victims_states_from_its_own_link(defense_of):
    """Neighbour j tracks z_ij from the public x_0 and its own messages (eq. 5b), then reads
    x_{i,k+1} = (z_ij,k − m_ij,k) / 2ρ off every message m_ij,k it receives."""
    defense = defense_of(RING, dataset="logistic", samples_per_agent=20)
    victim, curious, rho = 1, 2, defense.params.rho
    tap = CuriousNeighbour(curious)
    wire, truth = Wire(defense.setup.topology, [tap]), []
    for k in range(5):
        defense.step(k, wire)
        truth.append(defense.states[victim].clone())
    transcript = tap.transcript(None)
    z = defense.setup.model.initial()
    for k in range(5):
        received = transcript.payload(Kind.ADMM_BRIDGE, k, victim, curious)
        torch.testing.assert_close((z - received) / (2 * rho), truth[k], atol=1e-5, rtol=0)
        z = 0.5 * z - 0.5 * transcript.payload(Kind.ADMM_BRIDGE, k, curious, victim)
    assert not torch.allclose(truth[0], truth[4])


def test_theorem_2_claim_on_the_papers_setting(defense_of):
    """The sound ε is the tight accountant for sampling without replacement (707.51; it was the
    RDP accountant's 112,606 before that accountant existed, see tests/test_accounting_wor.py)."""
    defense = defense_of(PAPER, dataset="logistic")
    claim = defense.claim(4000)
    first = 2 * 4000 * 4 * 1**2 * 8**2 / (0.5**2 * 1000**2)
    second = 2 * 1 * 8 / (0.5 * 1000) * math.sqrt(2 * 4000 * 4 * math.log(1e4))
    assert first == pytest.approx(8.192)
    assert claim.eps_claimed == pytest.approx(first + second, rel=1e-12)
    assert claim.eps_claimed == pytest.approx(25.5645, abs=1e-4)
    assert claim.eps_stated == 19.6
    assert claim.delta == 1e-4 and claim.horizon == 4000
    assert any("natural log" in a for a in claim.assumptions)
    assert any("m_i = min_i |D_i| = 1000" in a for a in claim.assumptions)
    step = dp_accounting.SampledWithoutReplacementDpEvent(1000, 8, dp_accounting.GaussianDpEvent(0.25))
    assert defense.mechanism(4000) == dp_accounting.SelfComposedDpEvent(step, 16000)
    assert claim.eps_sound == without_replacement_epsilon(dp_accounting.SelfComposedDpEvent(step, 16000), 1e-4)
    assert claim.eps_sound == pytest.approx(707.51, abs=0.01)
    assert claim.sound_method.startswith(WITHOUT_REPLACEMENT_METHOD) and "16000 = Kτ" in claim.sound_method
    assert claim.eps_sound > 25 * claim.eps_claimed
    assert defense.claim(400).eps_stated is None
    assert defense_of({**PAPER, "sigma_e": 0.6}, dataset="logistic").claim(4000).eps_stated is None
    assert defense_of(PAPER, dataset="logistic", samples_per_agent=900).claim(4000).eps_stated is None


def test_accuracy_rises_on_the_logistic_problem(defense_of):
    defense = defense_of({**RING, "agents": 6}, dataset="logistic", samples_per_agent=200)
    history = simulate(defense, rounds=150, eval_every=150).history
    assert history[-1]["avg_acc"] > history[0]["avg_acc"] + 0.1
    assert history[-1]["avg_acc"] > 0.7
