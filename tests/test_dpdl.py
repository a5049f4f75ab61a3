"""DPDL (seed 000, Algorithm 1): its messages, one round against the paper's equations computed by
hand, its claim (eq. 23) and its sound accounting, and that its ND variant learns."""

import math

import dp_accounting
import pytest
import torch
from pydantic import ValidationError

import privaudit.defenses.dpdl  # noqa: F401  (registers "dpdl")
from privaudit.defenses.dpdl import DPDL, DPDLParams
from privaudit.accounting import WITHOUT_REPLACEMENT_METHOD, epsilon, without_replacement_epsilon
from privaudit.sim import simulate
from privaudit.wire import CuriousNeighbour, GlobalListener, Kind, Wire
from tests.helpers import tiny_setup


def build(n_agents: int = 3, topology: str = "complete", **params) -> DPDL:
    return DPDL(DPDLParams(**{"batch_size": 4, "lr": 0.3, "clip": 0.5, **params}),
                tiny_setup(n_agents, topology=topology))


def test_transcript_has_exactly_the_papers_messages():
    defense = build(4, "ring", noise_multiplier=1.0)
    listener = GlobalListener()
    output = simulate(defense, rounds=3, eval_every=10, taps=[listener])
    topology, dim = defense.setup.topology, defense.setup.model.dim
    directed = sorted((i, j) for i in range(4) for j in topology.neighbours(i))
    assert {m.kind for m in listener.messages} == {Kind.MODEL, Kind.CROSS_GRADIENT, Kind.MOMENTUM,
                                                   Kind.PREGOSSIP_MODEL}
    for t in range(3):
        heard = {kind: [m for m in listener.messages if m.kind == kind and m.round == t] for kind in Kind}
        for kind in (Kind.MODEL, Kind.MOMENTUM, Kind.PREGOSSIP_MODEL):
            assert sorted(m.sender for m in heard[kind]) == list(range(4))
            assert all(m.receiver is None for m in heard[kind])
        assert sorted((m.sender, m.receiver) for m in heard[Kind.CROSS_GRADIENT]) == directed
    assert all(m.payload.shape == (dim,) for m in listener.messages)
    assert len(listener.messages) == 3 * (3 * 4 + len(directed))
    assert output.messages_sent == {"model": 24, "cross_gradient": 24, "momentum": 24, "pregossip_model": 24}


def four(**params) -> DPDL:
    """Four agents on a complete graph (w = 1/4 everywhere), B = 3 of 6 samples, σ = 2 by default."""
    return build(4, "complete", **{"batch_size": 3, "noise_multiplier": 2.0, **params})


def _clipped_grad(model, point: torch.Tensor, x: torch.Tensor, y: torch.Tensor, clip: float) -> torch.Tensor:
    flat = point.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(model.loss(flat, x[None], y[None]), flat)
    return (g * min(1.0, clip / float(g.norm()))).double()


def _reference_round(defense: DPDL, x, v, private, wire_cross):
    """Eqs. 8–22 for every agent with loops over agents and samples, in float64."""
    setup, p = defense.setup, defense.params
    n, W = setup.topology.n, torch.tensor(setup.topology.W)
    data_x, data_y = setup.local.x, setup.local.y
    neighbourhood = [setup.topology.neighbours(i) + [i] for i in range(n)]

    def clipped_sum(owner, point):
        rows = private[owner]["batch"]
        return sum(_clipped_grad(setup.model, x[point], data_x[r], data_y[r], p.clip) for r in rows.tolist())

    def noise(owner, name):
        return private[owner][name].double() if p.noise else 0.0

    sent = {(i, j): (clipped_sum(i, j) + noise(i, f"noise_to_{j}")) / p.batch_size
            for i in range(n) for j in setup.topology.neighbours(i)}
    for key, payload in sent.items():
        torch.testing.assert_close(wire_cross[key].double(), payload, rtol=0, atol=1e-6)
    g_tilde = []
    for i in range(n):
        clean = clipped_sum(i, i) / p.batch_size
        noisy_self = (clipped_sum(i, i) + noise(i, "self_noise")) / p.batch_size
        total = torch.zeros_like(clean)
        for j in neighbourhood[i]:
            received = noisy_self if j == i else sent[(j, i)]
            similarity = received @ clean / (received.norm() * clean.norm())
            calibration = 1 / (1 + math.exp(float(similarity)))
            total += received / (math.sqrt(W[i, j]) * n) + p.alpha * W[i, j] * calibration * clean
        g_tilde.append(total)
    v_tilde = p.beta * v + torch.stack(g_tilde)
    x_tilde = x.double() - p.lr * v_tilde
    return W @ x_tilde, W @ v_tilde, v_tilde, x_tilde


@pytest.mark.parametrize("noise", [False, True], ids=["ND", "noisy"])
@pytest.mark.parametrize("shape", [(3, "complete"), (4, "star")])
def test_two_rounds_match_the_papers_equations_by_hand(noise, shape):
    defense = build(*shape, noise=noise, noise_multiplier=0.7, beta=0.6, alpha=2.0)
    n = defense.setup.topology.n
    listener, selves = GlobalListener(), [CuriousNeighbour(i) for i in range(n)]
    wire = Wire(defense.setup.topology, [listener, *selves])
    x, v = defense.x.double(), torch.zeros(n, defense.setup.model.dim, dtype=torch.float64)
    for t in range(2):
        defense.step(t, wire)
        private = [{d.name: d.value for d in tap.disclosures if d.round == t} for tap in selves]
        transcript = listener.transcript(None)
        cross = {(m.sender, m.receiver): m.payload for m in transcript.find(Kind.CROSS_GRADIENT, round=t)}
        x, v, v_tilde, x_tilde = _reference_round(defense, x.float(), v, private, cross)
        for i in range(n):
            torch.testing.assert_close(transcript.payload(Kind.MOMENTUM, t, i).double(), v_tilde[i], rtol=0, atol=1e-6)
            torch.testing.assert_close(transcript.payload(Kind.PREGOSSIP_MODEL, t, i).double(), x_tilde[i],
                                       rtol=0, atol=1e-6)
        torch.testing.assert_close(defense.x.double(), x, rtol=0, atol=1e-6)
        torch.testing.assert_close(defense.v.double(), v, rtol=0, atol=1e-6)
    per_sample = torch.stack([
        _clipped_grad(defense.setup.model, defense.x[0], defense.setup.local.x[r], defense.setup.local.y[r], 1e9)
        for r in range(12)])
    assert float(per_sample.norm(dim=1).max()) > 0.5 > float(per_sample.norm(dim=1).min()), "clipping must bind"


def test_row_chunks_give_the_same_round(monkeypatch):
    whole = build(4, "complete", noise_multiplier=1.0)
    whole.step(0, Wire(whole.setup.topology))
    monkeypatch.setattr(privaudit.defenses.dpdl, "_CHUNK_FLOATS", 30)  # B · P = 24: one row per chunk
    chunked = build(4, "complete", noise_multiplier=1.0)
    chunked.step(0, Wire(chunked.setup.topology))
    torch.testing.assert_close(chunked.x, whole.x)


def test_noise_is_fresh_per_neighbour_with_std_sigma_c():
    defense = build(4, "complete", noise_multiplier=1.5, clip=0.8)
    tap = CuriousNeighbour(0)
    wire = Wire(defense.setup.topology, [tap])
    for t in range(40):
        defense.step(t, wire)
    draws = {name: torch.stack([d.value for d in tap.disclosures if d.name == name])
             for name in ("noise_to_1", "noise_to_2", "noise_to_3", "self_noise")}
    assert not torch.equal(draws["noise_to_1"], draws["noise_to_2"])
    assert float(torch.cat(list(draws.values())).std()) == pytest.approx(1.5 * 0.8, rel=0.08)
    (realised,) = [s for s in defense.claim(40).statements if s.startswith("h realised")]
    assert float(realised.split(": ")[1].split(";")[0]) > 1


def test_claim_is_eq_23_computed_by_hand():
    claim = four().claim(100)
    q = 3 / (4 * 6)  # B / (N · min_i D_i)
    root = math.sqrt(100 * math.log(1e5))
    factor = 2 / math.sqrt(0.25) + 15 * 1.5 * 4 / 8 + 1.5 * 0.25 * 2 ** 2 * 4 / 2  # w = 1/4, h = 1
    assert claim.eps_claimed == pytest.approx(factor * 2 * q * root / (math.sqrt(4 / 0.25) * 2.0))
    assert claim.eps_stated is None and claim.eps_sound is None and claim.delta == 1e-5
    appendix = (2 / math.sqrt(0.25) + 15 * 1.5 * 0.75 / 8 + 3) * 2 * q * root / (math.sqrt(4 / 0.25) * 2.0)
    assert any(f"ε = {appendix:.4g}" in s for s in claim.statements)
    for constant in ("c₁ = 1", "c₂ = 2", "h = 1", "δ = 1e-05"):
        assert any(a.startswith(constant) for a in claim.assumptions), constant
    assert "OUTSIDE" in claim.equation  # ε ≈ 19.4 > c₁q²T = 1.5625
    assert "OUTSIDE" not in four(c1=100.0).claim(100).equation


def test_claim_on_an_irregular_graph_uses_w_min_w_max_and_the_smallest_neighbourhood():
    defense = build(4, "star", batch_size=3, noise_multiplier=2.0, h=3.0, c2=1.0)
    # star with Metropolis weights: hub–leaf 1/4, hub 1/4, leaf 3/4; a leaf has |N_i| = 2
    factor = 2 / math.sqrt(0.25) + 15 * 1.5 * 4 / 8 + 1.5 * 0.75 * 4 ** 2 * 4 / 6
    expected = factor * (3 / 24) * math.sqrt(100 * math.log(1e5)) / (math.sqrt(2 / 0.75) * 2.0)
    assert defense.claim(100).eps_claimed == pytest.approx(expected)


def test_target_epsilon_sets_sigma_by_eq_23_or_is_reported_beside_it():
    derived = four(noise_multiplier=None, target_epsilon=0.5, target_rounds=100)
    claim = derived.claim(100)
    assert claim.eps_claimed == pytest.approx(0.5) and claim.eps_stated == 0.5
    assert derived.public()["noise_multiplier"] == pytest.approx(four().claim(100).eps_claimed * 2.0 / 0.5)
    assert derived.claim(400).eps_claimed == pytest.approx(1.0)  # ε ∝ √T at fixed σ
    given = four(target_epsilon=0.5).claim(100)
    assert given.eps_stated == 0.5 and given.eps_claimed != pytest.approx(0.5)
    with pytest.raises(ValidationError, match="target_epsilon"):
        DPDLParams()
    with pytest.raises(ValidationError, match="target_rounds"):
        DPDLParams(target_epsilon=0.5)


def test_sound_accounting_is_unsupported_and_the_cross_gradient_channel_is_a_labelled_partial_figure():
    """The partial figure comes from the tight accountant for sampling without replacement (it came
    from the looser RDP accountant before that accountant existed)."""
    defense = four()
    assert isinstance(defense.mechanism(100), dp_accounting.UnsupportedDpEvent)
    per_round = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(1.0), 3)  # σ/2, 3 neighbours
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(6, 3, per_round), 100)
    partial = without_replacement_epsilon(event, 1e-5)
    claim = defense.claim(100)
    assert claim.statements[0].startswith("PARTIAL") and f"ε = {partial:.4g}" in claim.statements[0]
    assert WITHOUT_REPLACEMENT_METHOD in claim.statements[0]
    assert partial < epsilon(event, 1e-5, "rdp", "replace_one")
    assert "WITHOUT noise" in claim.sound_method
    assert without_replacement_epsilon(four(noise_multiplier=4.0).cross_gradient_mechanism(100), 1e-5) < partial


def test_nd_variant_claims_no_privacy():
    defense = build(noise=False)
    claim = defense.claim(100)
    assert claim.notion == "none" and claim.eps_claimed is None and claim.eps_sound is None
    assert isinstance(defense.mechanism(100), dp_accounting.NonPrivateDpEvent)


@pytest.fixture
def one_thread():
    """Tiny tensors: one intra-op thread avoids thread contention on a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_nd_variant_learns_digits(defense_of, one_thread):
    table = {"kind": "dpdl", "topology": "bipartite", "agents": 4, "model": "mlp",
             "model_options": {"hidden": [32]}, "lr": 0.05, "batch_size": 16, "noise": False}
    output = simulate(defense_of(table), rounds=40, eval_every=40)
    assert output.history[0]["avg_acc"] < 0.3
    assert output.history[-1]["avg_acc"] > 0.8


@pytest.mark.parametrize("topology", ["complete", "ring", "star"])
def test_the_closed_form_clipped_sums_of_every_pair_equal_autograds(topology):
    """On a regular graph the pairs are slot-major and their clipped sums come in closed form from
    the agents' shared batches; on an irregular one (a star) in row chunks. Either equals the clipped
    per-sample gradients of each pair's batch at its receiver's point, by autograd."""
    import dataclasses

    from privaudit.grads import clip_l2, per_sample_grads

    defense = build(5, topology, noise_multiplier=1.0)
    assert defense.slotted == (topology != "star") and defense.setup.model.closed_form
    defense.x = defense.x + 0.3 * torch.randn(defense.x.shape, generator=torch.Generator().manual_seed(1))
    xb, yb, _ = defense.setup.local.fixed_batches(4, torch.Generator().manual_seed(2))
    sums = defense._clipped_sums(xb, yb)
    plain = defense.setup.model.without_closed_forms()
    for row, (sender, point) in enumerate(zip(defense.sender.tolist(), defense.point.tolist())):
        expected = clip_l2(per_sample_grads(plain, defense.x[point], xb[sender], yb[sender]), 0.5).sum(0)
        assert torch.allclose(sums[row], expected, atol=1e-6)
    defense.setup = dataclasses.replace(defense.setup, model=plain)
    assert torch.allclose(defense._clipped_sums(xb, yb), sums, atol=1e-6)
