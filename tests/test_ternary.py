"""Wang & Başar's ternary quantizer and defense: the sampler and its exact law, the exact (0, δ)
accounting against hand values and brute force, the wire, one iteration by hand, the claim, and
the Fig. 2 finding (larger r, larger overshoot) in a fast version."""

import itertools
import math

import dp_accounting
import numpy as np
import pytest
import torch
from dp_accounting.pld import privacy_loss_distribution

import privaudit.defenses.ternary  # noqa: F401  (registers the defense)
from privaudit.defenses.ternary import Ternary, TernaryParams
from privaudit.accounting import epsilon
from privaudit.campaign.config import load_campaign
from privaudit.quantizers import (
    TernaryQuantizerDpEvent,
    coordinate_tv,
    overflows,
    ternary,
    ternary_pmf,
    ternary_tv,
    worst_case_delta,
)
from privaudit.sim import simulate
from privaudit.wire import GlobalListener, Kind, Wire
from tests.helpers import tiny_setup

R = 4.0
X = torch.tensor([0.0, 1.0, -3.0, 4.0, -4.0, 0.3], dtype=torch.float64)
ESTIMATION = {"kind": "ternary", "topology": "ring", "agents": 5, "model": "linear_estimator",
              "model_options": {"loss_scale": 1.0}, "r": R, "a1": 0.05}
ESTIMATION_DATA = {"dataset": "estimation_wb"}


def draws(x: torch.Tensor, n: int, r: float = R, seed: int = 0) -> torch.Tensor:
    return ternary(x.expand(n, -1), r, torch.Generator().manual_seed(seed))


def test_quantizer_sends_three_levels_with_the_input_sign_and_is_unbiased():
    q = draws(X, 200_000)
    assert set(q.unique().tolist()) <= {-R, 0.0, R}
    assert bool(((q == 0) | (torch.sign(q) == torch.sign(X))).all())
    assert bool((q[:, 0] == 0).all()) and bool((q[:, 3] == R).all()) and bool((q[:, 4] == -R).all())
    spread = (R * X.abs() - X.square()).clamp(min=1e-12).sqrt() / math.sqrt(len(q))
    assert bool(((q.mean(dim=0) - X).abs() <= 5 * spread + 1e-12).all())


def test_pmf_has_the_hand_values_and_matches_monte_carlo_frequencies():
    pmf = ternary_pmf(X, R)
    assert pmf[1] == pytest.approx([0.0, 0.75, 0.25]) and pmf[2] == pytest.approx([0.75, 0.25, 0.0])
    assert pmf[0] == pytest.approx([0.0, 1.0, 0.0]) and np.allclose(pmf.sum(axis=1), 1.0)
    q = draws(X, 100_000, seed=1)
    frequencies = np.stack([(q == level * R).double().mean(dim=0).numpy() for level in (-1, 0, 1)], axis=-1)
    tolerance = 5 * np.sqrt(pmf * (1 - pmf) / len(q)) + 1e-12
    assert (np.abs(frequencies - pmf) <= tolerance).all()


def test_inputs_beyond_r_saturate_and_are_counted_or_refused():
    x = torch.tensor([5.0, -6.0, 1.0])
    assert overflows(x, R) == 2
    q = draws(x, 1000)
    assert bool((q[:, 0] == R).all()) and bool((q[:, 1] == -R).all())
    assert ternary_pmf(x, R)[:2] == pytest.approx(np.array([[0, 0, 1.0], [1.0, 0, 0]]))
    with pytest.raises(ValueError, match="2 coordinates out of range"):
        ternary(x, R, torch.Generator(), on_overflow="raise")


def test_same_generator_state_gives_the_same_draw():
    x = torch.linspace(-3.9, 3.9, 50)
    assert torch.equal(draws(x, 3, seed=7), draws(x, 3, seed=7))
    assert not torch.equal(draws(x, 3, seed=7), draws(x, 3, seed=8))


def test_coordinate_tv_same_sign_and_sign_change_by_hand():
    x = np.array([0.5, 0.5, 0.0, -2.0, 1.0])
    y = np.array([1.5, -0.25, -1.0, -1.5, 1.0])
    assert coordinate_tv(x, y, R) == pytest.approx([0.25, 0.125, 0.25, 0.125, 0.0])
    assert (coordinate_tv(x, y, R) <= np.abs(x - y) / R + 1e-15).all()


def brute_force_tv(x: np.ndarray, y: np.ndarray, r: float, n_draws: int) -> float:
    """TV over every sequence of levels of n_draws draws of every coordinate (3^(d·T) outcomes)."""
    px, py = np.tile(ternary_pmf(x, r), (n_draws, 1)), np.tile(ternary_pmf(y, r), (n_draws, 1))
    total = 0.0
    for outcome in itertools.product(range(3), repeat=len(px)):
        index = np.arange(len(px)), np.array(outcome)
        total += abs(px[index].prod() - py[index].prod())
    return total / 2


@pytest.mark.parametrize("dim, n_draws", [(3, 1), (2, 2), (1, 5)])
def test_exact_tv_of_repeated_releases_equals_brute_force(dim, n_draws):
    rng = np.random.default_rng(dim * 10 + n_draws)
    for _ in range(5):
        x, y = rng.uniform(-R, R, dim), rng.uniform(-R, R, dim)
        y[0] = x[0]
        assert ternary_tv(x, y, R, n_draws) == pytest.approx(brute_force_tv(x, y, R, n_draws), abs=1e-12)


def test_worst_case_delta_hand_values_per_norm():
    assert worst_case_delta(R).delta == pytest.approx(0.25)
    assert worst_case_delta(R, dim=1000, norm=1).delta == pytest.approx(0.25)
    assert worst_case_delta(R, dim=3, norm="inf").delta == pytest.approx(1 - 0.75 ** 3)
    l2 = worst_case_delta(R, dim=4, norm=2)
    assert l2.exact and l2.coordinates == 4 and l2.delta == pytest.approx(1 - (7 / 8) ** 4)
    assert worst_case_delta(R, norm=1, draws=3).delta == pytest.approx(1 - 0.75 ** 3)
    assert worst_case_delta(R, norm=1, sensitivity=2.0).delta == pytest.approx(0.5)
    assert worst_case_delta(0.8).delta == 1.0


@pytest.mark.parametrize("norm, dim, r, n_draws", [(1, 3, R, 1), (2, 3, R, 1), ("inf", 2, R, 2), (2, 2, 1.5, 1),
                                                   (3, 3, 2.0, 1)])
def test_worst_case_is_attained_and_never_exceeded(norm, dim, r, n_draws):
    worst = worst_case_delta(r, dim=dim, norm=norm, draws=n_draws)
    p = math.inf if norm == "inf" else norm
    rng = np.random.default_rng(3)
    best = 0.0
    for _ in range(300):
        x = rng.uniform(-r, r, dim)
        step = rng.normal(size=dim)
        y = np.clip(x + step / np.linalg.norm(step, ord=p) * rng.uniform(0.5, 1.0), -r, r)
        best = max(best, ternary_tv(x, y, r, n_draws))
    assert best <= worst.delta + 1e-12
    if worst.exact:
        assert ternary_tv(*worst.pair(dim), r, n_draws) == pytest.approx(worst.delta)
    else:
        equal_split = np.zeros(dim), np.full(dim, dim ** (-1 / p))
        assert ternary_tv(*equal_split, r, n_draws) <= worst.delta


def test_pld_accountant_on_the_worst_pair_gives_the_same_delta_at_every_epsilon():
    """dp_accounting, independently: the PLD of Q(0) vs Q(1), composed T times."""
    pair = ({0: 0.0}, {0: math.log(1 - 1 / R), 1: math.log(1 / R)})
    pld = privacy_loss_distribution.from_two_probability_mass_functions(*pair, symmetric=False).self_compose(10)
    expected = worst_case_delta(R, norm=1, draws=10).delta
    for eps in (0.0, 1.0, 5.0):
        assert pld.get_delta_for_epsilon(eps) == pytest.approx(expected, abs=1e-4)


def test_quantizer_event_is_unsupported_by_every_accountant(defense_of):
    event = defense_of(ESTIMATION, **ESTIMATION_DATA).mechanism(50)
    assert isinstance(event, TernaryQuantizerDpEvent) and isinstance(event, dp_accounting.UnsupportedDpEvent)
    assert (event.threshold, event.dimension, event.count) == (R, 2, 50)
    for accountant in ("pld", "rdp"):
        with pytest.raises(ValueError, match="does not support"):
            epsilon(event, 1e-5, accountant)


def test_wire_carries_one_quantized_state_broadcast_per_agent_per_round(defense_of):
    listener = GlobalListener()
    output = simulate(defense_of(ESTIMATION, **ESTIMATION_DATA), rounds=3, eval_every=10, taps=[listener])
    assert {m.kind for m in listener.messages} == {Kind.QUANTIZED_STATE}
    assert sorted((m.round, m.sender) for m in listener.messages) == [(t, i) for t in range(3) for i in range(5)]
    assert all(m.receiver is None and m.payload.shape == (2,) for m in listener.messages)
    assert output.messages_sent == {"quantized_state": 3 * 5 * 2}


def logreg_gradient(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, classes: int) -> torch.Tensor:
    """∇ of the mean cross-entropy of softmax(W x + b), written out: ((p − onehot)ᵀ x / B, mean(p − onehot))."""
    features = x.shape[1]
    weight, bias = flat[: classes * features].view(classes, features), flat[classes * features:]
    residual = torch.softmax(x @ weight.T + bias, dim=1) - torch.nn.functional.one_hot(y, classes)
    return torch.cat([(residual.T @ x / len(x)).reshape(-1), residual.mean(dim=0)])


def test_two_iterations_match_a_hand_written_update_with_the_broadcast_draws():
    """Full-batch gradients make g deterministic; Q comes from the wire, so the reference also
    fails if an agent used a different draw locally than the one it broadcast."""
    setup = tiny_setup(3, samples=6)
    params = TernaryParams(r=1.0, a1=0.7, a2=0.9, a3=0.5, delta1=0.3, delta2=0.6, batch_size=6)
    defense = Ternary(params, setup)
    listener = GlobalListener()
    wire = Wire(setup.topology, [listener])
    W = setup.topology.W
    for k in range(2):
        before = defense.x.clone()
        defense.step(k, wire)
        sent = {m.sender: m.payload for m in listener.messages if m.round == k}
        q = torch.stack([sent[i] for i in range(3)])
        assert bool((q.abs().sum(dim=1) > 0).all()), "every agent should send a non-zero draw here"
        assert bool(((q == 0) | (q == torch.sign(before))).all())
        lam, eps = 0.7 / (0.5 * k + 1) ** 0.3, 0.9 / (0.5 * k + 1) ** 0.6
        for i in range(3):
            x_i, y_i = setup.local.shard(i)
            g = logreg_gradient(before[i], x_i, y_i, 2)
            coupling = sum(W[i, j] * (q[j] - q[i]) for j in setup.topology.neighbours(i))
            expected = before[i] + eps * coupling - eps * lam * g
            assert torch.allclose(defense.x[i], expected, atol=1e-6)


def test_claim_states_theorem_3_and_its_remarks_with_exact_numbers(defense_of):
    defense = defense_of(ESTIMATION, **ESTIMATION_DATA)
    claim = defense.claim(10)
    assert (claim.notion, claim.eps_claimed, claim.delta, claim.horizon) == ("(0, δ)-DP", 0.0, 0.25, 10)
    assert claim.eps_sound is None and claim.delta_sound == pytest.approx(1 - 0.75 ** 10)
    assert "‖x − y‖₁ ≤ 1" in claim.adjacency and "INPUT" in claim.sound_method
    theorem, remark6, remark10 = claim.statements
    assert theorem.startswith("Theorem 3") and "holds, and is tight" in theorem
    assert remark6.startswith("Remark 6") and "ℓ∞ 0.4375" in remark6 and "fails" in remark6
    assert remark10.startswith("Remark 10") and f"{1 - 0.75 ** 10:.4g}" in remark10
    assert "not checked yet" in claim.assumptions[0] and "x_i^0 = 0" in claim.assumptions[-1]


def test_claim_reports_whether_r_covered_every_quantizer_input(defense_of):
    wide = defense_of({**ESTIMATION, "r": 50.0}, **ESTIMATION_DATA)
    simulate(wide, rounds=5, eval_every=10)
    assert "held at all 25 agent-iterations" in wide.claim(5).assumptions[0]
    narrow = defense_of({**ESTIMATION, "r": 0.05, "a1": 1.0}, **ESTIMATION_DATA)
    simulate(narrow, rounds=5, eval_every=10)
    assert narrow.overflow_draws > 0 and "FAILED" in narrow.claim(5).assumptions[0]
    strict = defense_of({**ESTIMATION, "r": 0.05, "a1": 1.0, "on_overflow": "raise"}, **ESTIMATION_DATA)
    with pytest.raises(ValueError, match="> r = 0.05"):
        simulate(strict, rounds=5, eval_every=10)


def overshoots(defense_of, r: float, seeds: range, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per seed: overshoot = max_k e_k − e_0 and the final relative error e_T / e_0, where e_k is
    the agents' mean distance ‖x_i^k − θ̂‖ to the empirical-risk minimiser θ̂ (the simulator's
    `agent_error_mean`) and e_0 = ‖θ̂‖ since x^0 = 0."""
    peaks, finals = [], []
    for seed in seeds:
        defense = defense_of({**ESTIMATION, "r": r}, seed=seed, **ESTIMATION_DATA)
        truth, wire = defense.setup.data.truth, Wire(defense.setup.topology)
        errors = [float(torch.linalg.vector_norm(defense.x - truth, dim=1).mean())]
        for k in range(rounds):
            defense.step(k, wire)
            errors.append(float(torch.linalg.vector_norm(defense.x - truth, dim=1).mean()))
        peaks.append(max(errors) - errors[0])
        finals.append(errors[-1] / errors[0])
    return np.array(peaks), np.array(finals)


def test_larger_threshold_gives_larger_overshoot_fast(defense_of):
    small, small_final = overshoots(defense_of, 2.0, range(4), 100)
    large, large_final = overshoots(defense_of, 8.0, range(4), 100)
    assert large.mean() > small.mean() + 0.5
    assert (small_final < 0.5).all() and (large_final < 0.8).all()


@pytest.mark.slow
def test_larger_threshold_gives_larger_overshoot_paper_preset(defense_of):
    results = {r: overshoots(defense_of, r, range(10), 1000) for r in (2.0, 4.0, 8.0)}
    means = [results[r][0].mean() for r in (2.0, 4.0, 8.0)]
    assert means[0] < means[1] < means[2]
    assert all((results[r][1] < 0.5).all() for r in results)


def test_preset_validates_with_three_thresholds():
    campaign = load_campaign("privaudit/presets/ternary.toml")
    (table,) = campaign.defense
    assert [run.params().r for run in table.variants()] == [2.0, 4.0, 8.0]
    assert table.model == "linear_estimator" and campaign.data.dataset == "estimation_wb"
