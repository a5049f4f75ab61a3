"""Message→gradient extractors: each against the ground truth its victim discloses (read only here,
through a curious tap of the victim, or by the test stepping the defense itself), its documented
error where recovery is not exact, its clear error when a tap lacks a message, and the registry's
`needs` against what real runs' transcripts allow."""

import math

import pytest
import torch

from privaudit.attacks.extraction import KINDS
from privaudit.attacks.views import EXTRACTORS, extractor
from privaudit.attacks.views.dpdl import cross_gradient as dpdl_cross_gradient, momentum_difference as dpdl_momentum_difference, momentum_gradient as dpdl_momentum_gradient, self_gradient as dpdl_self_gradient
from privaudit.attacks.views.lt_admm_dp import bridge_update as lt_admm_bridge_update, state as lt_admm_state
from privaudit.attacks.views.ternary import state_difference as ternary_state_difference
from privaudit.attacks.views.tvss import noisy_state as tvss_noisy_state, state_difference as tvss_state_difference
from privaudit.defenses import DEFENSES
from privaudit.campaign.cells import build_defense, expand
from privaudit.grads import batch_grad, clip_l2, per_sample_grads, smooth_clip
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import CuriousNeighbour, Eavesdropper, GlobalListener, Kind, Transcript, Wire
from tests.helpers import small_campaign

RING = {"topology": "ring", "agents": 5, "model": "mlp", "model_options": {"hidden": [16]}}
VICTIM = 2  # on the ring of 5: neighbours 1 and 3; agent 3's other neighbour is 4


def build(table, seed=0):
    return build_defense(expand(small_campaign([table], seeds=(seed,)))[0])


def relative(estimate: torch.Tensor, truth: torch.Tensor) -> float:
    return float((estimate.double() - truth.double()).norm() / truth.double().norm())


def disclosed(transcript: Transcript) -> dict[tuple[int, str], torch.Tensor]:
    return {(d.round, d.name): d.value.double() for d in transcript.disclosures}


def taps_of(run) -> dict[str, Transcript]:
    names = ("global", "victim", "one_link", "neighbour", "all_links")
    return dict(zip(names, run.transcripts))


def five_taps():
    """A global listener, the victim's own view (ground truth, for the test only), an eavesdropper
    on one of its links, the curious neighbour at its other end, an eavesdropper on all its links."""
    return [GlobalListener(), CuriousNeighbour(VICTIM), Eavesdropper([(2, 3)]), CuriousNeighbour(3),
            Eavesdropper([(1, 2), (2, 3)])]


# ---------------------------------------------------------------- DPDL


@pytest.fixture(scope="module", params=[False, True], ids=["ND", "noisy"])
def dpdl(request):
    table = {"kind": "dpdl", **RING, "batch_size": 8, "lr": 0.05, "clip": 0.5, "beta": 0.7, "alpha": 1.5,
             "noise": request.param, "noise_multiplier": 0.5}
    defense = build(table)
    return defense, taps_of(simulate(defense, rounds=3, eval_every=100, taps=five_taps()))


def clipped_sum(defense, point: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    local, p = defense.setup.local, defense.params
    per_sample = per_sample_grads(defense.setup.model, point.float(), local.x[rows.long()], local.y[rows.long()])
    return clip_l2(per_sample, p.clip).sum(dim=0).double()


def calibrated_truth(defense, view: Transcript, t: int):
    """Eqs. 15–18 for the victim from what it alone knows (its disclosures and the cross-gradients
    it received): g̃^i_t, the scale s of ĝ^{ii} in it, ĝ^{ii}, and the self-noise term z^{ii}/(B√w_ii N)."""
    p, W, n = defense.params, torch.tensor(defense.setup.topology.W), defense.setup.topology.n
    own = disclosed(view)
    clean = own[t, "self_gradient"]
    noise = own[t, "self_noise"] / p.batch_size if p.noise else torch.zeros_like(clean)
    received = {j: view.payload(Kind.CROSS_GRADIENT, t, j, VICTIM).double()
                for j in defense.setup.topology.neighbours(VICTIM)}
    received[VICTIM] = clean + noise
    total, weight = torch.zeros_like(clean), 0.0
    for j, gradient in received.items():
        c = 1 / (1 + math.exp(float(gradient @ clean / (gradient.norm() * clean.norm()))))
        total += gradient / (math.sqrt(W[VICTIM, j]) * n) + p.alpha * W[VICTIM, j] * c * clean
        weight += float(W[VICTIM, j]) * c
    w_ii = float(W[VICTIM, VICTIM])
    return total, 1 / (math.sqrt(w_ii) * n) + p.alpha * weight, clean, noise / (math.sqrt(w_ii) * n)


def test_cross_gradient_is_the_victims_batch_gradient_at_the_receivers_model(dpdl):
    defense, taps = dpdl
    t, receiver, batch = 1, 3, defense.params.batch_size
    own = disclosed(taps["victim"])
    rows = own[t, "batch"]
    noise = own[t, f"noise_to_{receiver}"] if defense.params.noise else 0.0
    for name in ("global", "one_link", "neighbour"):
        target = dpdl_cross_gradient(taps[name], VICTIM, t, receiver=receiver)
        assert torch.equal(target.point, taps["global"].payload(Kind.MODEL, t, receiver, None))
        truth = (clipped_sum(defense, target.point, rows) + noise) / batch
        assert relative(target.gradient, truth) < 1e-5
        assert target.kind == ("noisy_gradient" if defense.params.noise else "gradient")
        data = defense.setup.data
        released = target.clipping.apply(per_sample_grads(defense.setup.model, target.point.float(),
                                                          data.x_train[rows.long()], data.y_train[rows.long()]))
        assert relative(released + noise / batch, truth) < 1e-5, "the clipping rule rebuilds the release"
    at_own_model = (clipped_sum(defense, taps["global"].payload(Kind.MODEL, t, VICTIM, None), rows) + noise) / batch
    assert relative(target.gradient, at_own_model) > 1e-3, "the point must matter for this test to mean anything"
    assert dpdl_cross_gradient(taps["one_link"], VICTIM, t).point.equal(target.point)  # the only j it heard
    with pytest.raises(KeyError, match="lacks the 'cross_gradient' message from agent 2 to agent 1 at round 1"):
        dpdl_cross_gradient(taps["neighbour"], VICTIM, t, receiver=1)


def test_momentum_difference_is_the_aggregate_plus_a_momentum_residue(dpdl):
    """ṽ^i_t − ṽ^i_{t−1} = g̃^i_t + β Σ_j w_ij ṽ^j_{t−1} − ṽ^i_{t−1}: heard on one link, and not a
    gradient of i."""
    defense, taps = dpdl
    t, beta, W = 2, defense.params.beta, torch.tensor(defense.setup.topology.W)
    target = dpdl_momentum_difference(taps["one_link"], VICTIM, t)
    aggregate = calibrated_truth(defense, taps["victim"], t)[0]
    momenta = {j: taps["global"].payload(Kind.MOMENTUM, t - 1, j, None).double() for j in range(5)}
    residue = beta * sum(W[VICTIM, j] * momenta[j] for j in range(5)) - momenta[VICTIM]
    assert relative(target.gradient, aggregate + residue) < 1e-5
    assert relative(target.gradient, aggregate) > 0.05
    assert target.kind == "momentum_difference"
    assert torch.equal(target.point, taps["global"].payload(Kind.MODEL, t, VICTIM, None))
    with pytest.raises(ValueError, match="round 0 has no predecessor"):
        dpdl_momentum_difference(taps["global"], VICTIM, 0)


@pytest.mark.parametrize("t", [0, 1, 2])
def test_neighbours_momenta_give_the_aggregate_exactly(dpdl, t):
    defense, taps = dpdl
    truth = calibrated_truth(defense, taps["victim"], t)[0]
    for name in ("global", "all_links"):
        target = dpdl_momentum_gradient(taps[name], VICTIM, t)
        assert relative(target.gradient, truth) < 1e-5 and target.kind == "calibrated_gradient"
    if t > 0:
        with pytest.raises(KeyError, match="'momentum' messages from agent 1 at round"):
            dpdl_momentum_gradient(taps["one_link"], VICTIM, t)


@pytest.mark.parametrize("t", [0, 2])
def test_self_gradient_isolated_exactly_without_noise_and_up_to_self_noise_with_it(dpdl, t):
    defense, taps = dpdl
    _, scale, clean, self_noise = calibrated_truth(defense, taps["victim"], t)
    target = dpdl_self_gradient(taps["all_links"], VICTIM, t)
    assert torch.equal(target.point, taps["global"].payload(Kind.MODEL, t, VICTIM, None))
    if not defense.params.noise:
        assert target.kind == "gradient" and relative(target.gradient, clean) < 1e-5
    else:
        assert target.kind == "scaled_noisy_gradient"
        assert relative(target.gradient - scale * clean, self_noise) < 1e-4
        alpha, bias = defense.params.alpha, 1 / (math.sqrt(1 / 3) * 5)
        assert bias + alpha / (1 + math.e) < scale < bias + alpha * math.e / (1 + math.e)
    with pytest.raises(KeyError, match=r"from agent 1 (to agent 2 )?at round"):
        dpdl_self_gradient(taps["neighbour"], VICTIM, t)


# ---------------------------------------------------------------- Ternary


@pytest.fixture(scope="module", params=[4.0, 1e3], ids=["r=4", "r=1e3"])
def ternary(request):
    defense = build({"kind": "ternary", **RING, "r": request.param, "batch_size": 4})
    return defense, taps_of(simulate(defense, rounds=4, eval_every=100, taps=five_taps()))


def ternary_steps(k: int) -> tuple[float, float]:
    """λ^k = 1/(0.3k+1)^0.3, ε^k = 1/(0.3k+1)^0.6: the defense's defaults, written out."""
    return 1 / (0.3 * k + 1) ** 0.3, 1 / (0.3 * k + 1) ** 0.6


@pytest.mark.parametrize("k", [0, 2])
def test_ternary_estimate_errs_by_two_quantization_draws(ternary, k):
    """ĝ − g = (ν^k [k ≥ 1] − ν^{k+1}) / (ε^k λ^k), ν = Q(x) − x from the victim's own view."""
    defense, taps = ternary
    own, lam_eps = disclosed(taps["victim"]), math.prod(ternary_steps(k))
    sent = {s: taps["victim"].payload(Kind.QUANTIZED_STATE, s, VICTIM, None).double() for s in (k, k + 1)}
    draw = {s: sent[s] - own[s, "state"] for s in (k, k + 1)}
    error = ((draw[k] if k else 0.0) - draw[k + 1]) / lam_eps
    target = ternary_state_difference(taps["all_links"], VICTIM, k)
    gradient = own[k, "gradient"]
    assert relative(target.gradient - error, gradient) < 1e-5
    assert target.kind == "gradient_estimate"
    assert torch.equal(target.point, taps["global"].public.initial_model if k == 0 else sent[k].float())
    if defense.params.r > 100:
        assert relative(target.gradient, gradient) > 1, "a huge r drowns the gradient in quantization noise"
    with pytest.raises(KeyError, match="'quantized_state' messages from agent 1"):
        ternary_state_difference(taps["one_link"], VICTIM, k)


def test_ternary_control_without_quantization_error_is_exact(ternary):
    """The same extractor on a transcript whose victim message of round 1 carries its true state
    x_i^1 instead of Q(x_i^1) (ν = 0: the D-PSGD-like control) returns g_i^0 exactly."""
    _, taps = ternary
    own, heard = disclosed(taps["victim"]), taps["all_links"]
    control = [type(m)(m.round, m.sender, m.receiver, m.kind, own[1, "state"].float())
               if (m.round, m.sender) == (1, VICTIM) else m for m in heard.messages]
    target = ternary_state_difference(Transcript(heard.threat_model, None, control, [], heard.public), VICTIM, 0)
    assert relative(target.gradient, own[0, "gradient"]) < 1e-5


# ---------------------------------------------------------------- LT-ADMM-DP


@pytest.fixture(scope="module")
def lt_admm():
    """Three rounds stepped by the test itself, keeping the victim's true states and bridge sums
    (LT-ADMM-DP discloses its noise and batches but not its state)."""
    defense = build({"kind": "lt_admm_dp", **RING, "tau": 3, "batch_size": 8, "gamma": 0.5, "sigma_e": 0.05})
    taps = five_taps()
    wire = Wire(defense.setup.topology, taps)
    edges = [e for e, (i, _) in enumerate(defense.edges) if i == VICTIM]
    states, bridge_sums = [defense.states[VICTIM].clone()], []
    for k in range(3):
        bridge_sums.append(defense.z[edges].sum(dim=0).clone())
        defense.step(k, wire)
        states.append(defense.states[VICTIM].clone())
    public = public_knowledge(defense)
    return defense, dict(zip(("global", "victim", "one_link", "neighbour", "all_links"),
                             (tap.transcript(public) for tap in taps))), states, bridge_sums


@pytest.mark.parametrize("k", [0, 1, 2])
def test_any_one_link_reveals_the_victims_state(lt_admm, k):
    _, taps, states, _ = lt_admm
    for name in ("global", "one_link", "neighbour"):
        assert relative(lt_admm_state(taps[name], VICTIM, k), states[k + 1]) < 1e-5
    assert relative(lt_admm_state(taps["global"], VICTIM, k, neighbour=1), states[k + 1]) < 1e-5


@pytest.mark.parametrize("k", [0, 1, 2])
def test_all_links_reveal_the_multi_step_update(lt_admm, k):
    """γ Σ_t g_i(φ^t), replayed from the victim's true state, its disclosed batches and noise draws."""
    defense, taps, states, bridge_sums = lt_admm
    p, setup = defense.params, defense.setup
    own = disclosed(taps["victim"])
    drift = p.beta * (p.rho * 2 * states[k].double() - bridge_sums[k].double())
    phi, update = states[k].double(), torch.zeros_like(states[k], dtype=torch.float64)
    for t in range(p.tau):
        rows = own[k, "batch"][t].long()
        g = smooth_clip(batch_grad(setup.model, phi.float(), setup.local.x[rows], setup.local.y[rows]), p.zeta)
        step = p.gamma * (g.double() + own[k, "noise"][t])
        update += step
        phi = phi - step - drift
    assert relative(phi, states[k + 1]) < 1e-5, "the replay must follow the defense"
    target = lt_admm_bridge_update(taps["all_links"], VICTIM, k)
    assert relative(target.gradient, update) < 1e-5
    assert relative(target.drift, drift) < 1e-5 and relative(target.point, states[k]) < 1e-5
    assert (target.kind, target.steps, target.step_size) == ("multi_step_update", p.tau, p.gamma)
    assert (target.clipping.rule, target.clipping.bound) == ("smooth_mean", p.zeta)
    with pytest.raises(KeyError, match=r"'admm_bridge' message from agent (2 to agent 1|1 to agent 2) at round 0"):
        lt_admm_bridge_update(taps["neighbour"], VICTIM, k)


def test_bridges_need_every_round_from_the_start(lt_admm):
    defense, taps, _, _ = lt_admm
    late = taps["global"]
    late = Transcript(late.threat_model, None, [m for m in late.messages if m.round > 0], [], late.public)
    with pytest.raises(KeyError, match="lacks the 'admm_bridge' message from agent 1 to agent 2 at round 0"):
        lt_admm_bridge_update(late, VICTIM, 1)


# ---------------------------------------------------------------- Wang & Zhang


TVSS = {**RING, "clip": 1e3, "sigma_scale": 1e-3}


@pytest.fixture(scope="module", params=["tvss_output", "tvss_gradient"])
def tvss(request):
    defense = build({"kind": request.param, **TVSS})
    return defense, taps_of(simulate(defense, rounds=4, eval_every=100, taps=five_taps()))


@pytest.mark.parametrize("k", [0, 2])
def test_tvss_recovers_what_its_algorithm_lets_through(tvss, k):
    """Alg. 2: g + n exactly. Alg. 1: ĝ − g = ((1−β_k) n_k [k ≥ 1] − n_{k+1}) / α_k (§V's
    schedules α_k = 0.5/(k+1)^0.9, β_k = 0.5/(k+1)^0.6 for Alg. 1, 0.8 and 0.5 for Alg. 2)."""
    defense, taps = tvss
    own = disclosed(taps["victim"])
    gradient = own[k, "gradient"]
    if defense.name == "tvss_gradient":
        target = tvss_state_difference(taps["all_links"], VICTIM, k)
        assert target.kind == "noisy_gradient"
        assert relative(target.gradient - own[k, "noise"], gradient) < 1e-5
        extract = tvss_state_difference
    else:
        alpha, beta = 0.5 / (k + 1) ** 0.9, 0.5 / (k + 1) ** 0.6
        error = ((1 - beta) * own[k, "noise"] * (k > 0) - own[k + 1, "noise"]) / alpha
        target = tvss_noisy_state(taps["all_links"], VICTIM, k)
        assert target.kind == "gradient_estimate"
        assert relative(target.gradient - error, gradient) < 1e-5
        assert relative(target.gradient, gradient) > 0.01, "the Laplace noise must show for the test to mean anything"
        extract = tvss_noisy_state
    kind = Kind.NOISY_STATE if defense.name == "tvss_output" else Kind.MODEL
    if kind == Kind.NOISY_STATE and k == 0:
        assert torch.equal(target.point, taps["global"].public.initial_model)
    else:
        assert torch.equal(target.point, taps["global"].payload(kind, k, VICTIM, None))
    with pytest.raises(KeyError, match=f"'{kind}' messages from agent 1"):
        extract(taps["one_link"], VICTIM, k)


# ---------------------------------------------------------------- registry

REGISTRY_TABLES = {
    "dpsgd": {"batch_size": 8},
    "dp_dpsgd": {"batch_size": 8, "noise_multiplier": 1.0},
    "muffliato": {"batch_size": 8, "noise_multiplier": 1.0},
    "dpdl": {"batch_size": 8, "noise_multiplier": 1.0},
    "lt_admm_dp": {"batch_size": 8},
    "ternary": {},
    "tvss_output": {},
    "tvss_gradient": {},
}


def test_registry_covers_every_shipped_defense_and_names_its_needs():
    assert set(REGISTRY_TABLES) == set(DEFENSES)
    assert {defense for defense, _ in EXTRACTORS} == set(DEFENSES)
    for (defense, scenario), entry in EXTRACTORS.items():
        assert (entry.defense, entry.scenario) == (defense, scenario) and entry.needs
        assert entry.kinds and all(isinstance(kind, Kind) for kind in entry.kinds)
    assert extractor("dpdl", "cross_gradient").extract is dpdl_cross_gradient
    with pytest.raises(ValueError, match=r"no extraction scenario 'gradient' \(known: cross_gradient, momentum"):
        extractor("dpdl", "gradient")
    with pytest.raises(ValueError, match="no extractor for defense 'fedavg'"):
        extractor("fedavg", "state_difference")
    assert set(KINDS) >= {"gradient", "noisy_gradient", "multi_step_update"}


REGISTRY_TAPS = {
    "global": GlobalListener(),
    "global, round 1 only": GlobalListener(rounds=[1]),
    "global, models only": GlobalListener(kinds=[Kind.MODEL]),
    "all victim links": Eavesdropper([(1, 2), (2, 3)]),
    "one victim link": Eavesdropper([(2, 3)]),
    "a far link": Eavesdropper([(3, 4)]),
    "the victim": CuriousNeighbour(VICTIM),
    "a neighbour": CuriousNeighbour(3),
    "a stranger": CuriousNeighbour(0),
}


@pytest.mark.parametrize("name", sorted(REGISTRY_TABLES))
def test_registry_needs_agree_with_what_real_transcripts_allow(name):
    """For every scenario and tap: `missing` says None exactly when the extractor runs on what that
    tap would have heard (filtered from a global listener's record of the same run)."""
    defense = build({"kind": name, **RING, **REGISTRY_TABLES[name]})
    topology = defense.setup.topology
    (heard,) = simulate(defense, rounds=3, eval_every=100, taps=[GlobalListener()]).transcripts
    for entry in (e for e in EXTRACTORS.values() if e.defense == name):
        outcomes = {}
        for label, tap in REGISTRY_TAPS.items():
            kept = [m for m in heard.messages if tap.wants(m.round, m.sender, m.receiver, m.kind, topology)]
            transcript = Transcript(tap.threat_model, tap.observer, kept, [], heard.public)
            try:
                entry.extract(transcript, VICTIM, 1)
                works = True
            except KeyError:
                works = False
            outcomes[label] = works
            assert works == (entry.missing(tap, VICTIM, topology, round=1) is None), (entry.scenario, label)
        assert outcomes["global"] and not outcomes["a far link"] and not outcomes["a stranger"]
        assert outcomes["one victim link"] == (entry.scenario in ("cross_gradient", "momentum"))


def test_registry_check_refuses_a_tap_in_one_line():
    topology = build({"kind": "dpsgd", **RING}).setup.topology
    entry = extractor("lt_admm_dp", "bridge")
    entry.check(Eavesdropper([(1, 2), (2, 3)]), VICTIM, topology, round=5)
    with pytest.raises(ValueError, match=r"^\(lt_admm_dp, bridge\) against agent 2: the curious_neighbour tap "
                                         r"observing agent 3 cannot supply it, it does not hear agent 2's messages "
                                         r"to agent 1; needs both directions") as error:
        entry.check(CuriousNeighbour(3), VICTIM, topology)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"does not record round\(s\) \[0, 1, 2, 3, 4\]"):
        entry.check(GlobalListener(rounds=[5]), VICTIM, topology, round=5)
    complete = build({"kind": "dpsgd", **RING, "topology": "complete"}).setup.topology
    assert extractor("dpsgd", "state_difference").missing(CuriousNeighbour(3), VICTIM, complete) is None
