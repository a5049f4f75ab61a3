"""The audit's mechanisms: samplers match their laws and shapes, statistics are what they claim,
candidates stay in the adjacency, exact curves match closed forms, claims match the papers'
formulas, and bad parameters are one-line errors."""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from scipy.stats import laplace, norm

from privaudit.attacks.audit.mechanisms import MECHANISMS, NORMS, GaussianMixtureFactor, Pair, Setting, build, privacy_curve
from privaudit.errors import ConfigError
from privaudit.quantizers import ternary_pmf, ternary_tv, worst_case_delta

N = 200_000


def draws(name: str, x, n: int = N, seed: int = 0, **params) -> np.ndarray:
    return build(name, params).sample(np.asarray(x, dtype=np.float64), n, np.random.default_rng(seed))


def close(observed: np.ndarray, expected: np.ndarray, spread: np.ndarray, n: int = N) -> bool:
    """Within 5 standard errors."""
    return bool((np.abs(observed - expected) <= 5 * np.sqrt(spread / n) + 1e-12).all())


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_every_sampler_is_vectorised_and_seeded(name):
    mechanism = build(name)
    pair = mechanism.candidates(1.0, 3)[0]
    first = mechanism.sample(pair.x_prime, 1000, np.random.default_rng(5))
    again = mechanism.sample(pair.x_prime, 1000, np.random.default_rng(5))
    assert first.shape == (1000, 3) and np.array_equal(first, again)
    statistic = mechanism.statistic(first, pair)
    assert statistic.shape[0] == 1000 and statistic.ndim == 2
    if mechanism.finite:
        assert len(np.unique(statistic)) <= 2 * 3 + 1


def test_laplace_and_gaussian_have_their_means_and_variances():
    x = np.array([0.0, 1.0, -2.0])
    y = draws("laplace", x, eps=2.0)
    assert close(y.mean(0), x, np.full(3, 2 * 0.5**2)) and close(y.var(0), np.full(3, 0.5), np.full(3, 20 * 0.5**4))
    y = draws("gaussian", x, sigma=3.0)
    assert close(y.mean(0), x, np.full(3, 9.0)) and close(y.var(0), np.full(3, 9.0), np.full(3, 2 * 81.0))


def test_randomized_response_flips_with_its_probability_and_quantizers_follow_their_pmfs():
    flips = (draws("rr", [0.0, 1.0], eps=1.0) != [0.0, 1.0]).mean(0)
    p = 1 / (1 + math.e)
    assert close(flips, np.full(2, p), np.full(2, p * (1 - p)))
    x = np.array([-4.0, -1.0, 0.0, 2.5, 4.0])
    up = (draws("onebit", x, r=4.0) > 0).mean(0)
    expected = (x + 4) / 8
    assert close(up, expected, expected * (1 - expected))
    y = draws("ternary", x, r=4.0)
    frequencies = np.stack([(y == level * 4.0).mean(0) for level in (-1, 0, 1)], axis=-1)
    pmf = ternary_pmf(x, 4.0)
    assert close(frequencies, pmf, pmf * (1 - pmf))


def test_defense_releases_have_their_laws():
    x = np.array([0.5, -0.25])
    y = draws("dpdl_cross_gradient", x, sigma=1.5, clip=2.0, batch_size=4)
    assert close(y.mean(0), 2 * 2.0 * x / 4, np.full(2, (1.5 * 2 / 4) ** 2))
    assert close(y.std(0), np.full(2, 1.5 * 2 / 4), np.full(2, 1.0))
    # γ(K·2ζx + N(0, τσ_e²)), K ~ Bin(τ, |B|/m): mean γτq·2ζx, variance γ²(τσ_e² + τq(1−q)(2ζx)²)
    y = draws("lt_admm_round", x, sigma_e=0.5, zeta=1.0, tau=4, batch_size=100, samples=400, gamma=0.1)
    q, shift = 0.25, 2 * x
    assert close(y.mean(0), 0.1 * 4 * q * shift, 0.01 * (4 * 0.25 + 4 * q * (1 - q) * shift**2))
    assert close(y.var(0), 0.01 * (4 * 0.25 + 4 * q * (1 - q) * shift**2), np.full(2, 1e-3))
    gradient = build("tvss_gradient")
    gamma_1, sigma_1 = math.ceil(2**1.2), 2**0.1
    assert gradient.unit() == pytest.approx(0.2 / gamma_1) and gradient.scale() == pytest.approx(sigma_1)
    assert gradient.record_level().unit() == pytest.approx(2 * 0.2 / gamma_1)
    y = draws("tvss_gradient", x)
    assert close(y.mean(0), gradient.unit() * x, np.full(2, 2 * sigma_1**2))


def test_statistics_are_the_log_likelihood_ratio_or_sufficient_counts():
    pair = Pair(np.array([0.0, 0.3]), np.array([1.0, 0.3]), "")
    y = draws("laplace", pair.x, n=50, eps=2.0)
    exact = (laplace.logpdf(y, pair.x_prime, 0.5) - laplace.logpdf(y, pair.x, 0.5)).sum(axis=1)
    assert np.allclose(build("laplace", {"eps": 2.0}).statistic(y, pair)[:, 0], exact, atol=1e-8)
    exact = (norm.logpdf(y, pair.x_prime, 2.0) - norm.logpdf(y, pair.x, 2.0)).sum(axis=1)
    projection = build("gaussian", {"sigma": 2.0}).statistic(y, pair)[:, 0]
    assert np.allclose(exact, (projection - 0.5) / 4.0)
    ternary = build("ternary", {"r": 4.0})
    pair = Pair(np.array([-0.5, 2.0]), np.array([0.5, 2.0]), "")
    counts = ternary.statistic(np.array([[4.0, 4.0], [-4.0, 0.0], [0.0, 4.0]]), pair)
    assert counts.tolist() == [[1, 0], [0, 1], [0, 0]]


@pytest.mark.parametrize("name", list(MECHANISMS))
@pytest.mark.parametrize("adjacency", list(NORMS))
@pytest.mark.parametrize("dim", [1, 4])
def test_candidates_are_neighbours_inside_the_input_domain(name, adjacency, dim):
    mechanism = build(name)
    pairs = mechanism.candidates(NORMS[adjacency], dim)
    assert pairs and all(p.distance(NORMS[adjacency]) <= 1 + 1e-12 and len(p.x) == dim for p in pairs)
    assert all(not p.same_as(q) for i, p in enumerate(pairs) for q in pairs[i + 1:])
    if name in ("ternary", "onebit"):
        assert all(max(abs(p.x).max(), abs(p.x_prime).max()) <= mechanism.params.r for p in pairs)
    if name == "rr":
        assert all(set(np.concatenate([p.x, p.x_prime])) <= {0.0, 1.0} for p in pairs)


@pytest.mark.parametrize("r, adjacency, dim", [(10.0, "l1", 1), (4.0, "l2", 4), (4.0, "linf", 3), (0.5, "l1", 2)])
def test_quantizer_candidates_start_with_the_exact_worst_case(r, adjacency, dim):
    """The ternary list starts with worst_case_delta's pair, whose exact curve is that δ at ε = 0;
    the 1-bit quantizer is the ternary one with threshold 2r seen from −r."""
    worst = worst_case_delta(r, dim=dim, norm=NORMS[adjacency])
    first = build("ternary", {"r": r}).candidates(NORMS[adjacency], dim)[0]
    curve = privacy_curve(build("ternary", {"r": r}).law(first), 1)
    assert curve.delta(0.0) == pytest.approx(worst.delta, rel=1e-3)
    assert curve.delta(0.0) == pytest.approx(ternary_tv(first.x, first.x_prime, r), rel=1e-3)
    onebit = build("onebit", {"r": r})
    first = onebit.candidates(NORMS[adjacency], dim)[0]
    assert privacy_curve(onebit.law(first), 1).delta(0.0) == pytest.approx(
        worst_case_delta(2 * r, dim=dim, norm=NORMS[adjacency]).delta, rel=1e-3)


def test_exact_curves_match_closed_forms():
    rr = build("rr", {"eps": 1.5})
    pair = rr.candidates(1.0, 1)[0]
    keep, flip = math.exp(1.5) / (1 + math.exp(1.5)), 1 / (1 + math.exp(1.5))
    curve = privacy_curve(rr.law(pair), 1)
    assert curve.epsilon(0.0) == pytest.approx(1.5, abs=1e-5)
    assert curve.delta(0.5) == pytest.approx(keep - math.exp(0.5) * flip, abs=1e-5)
    lap = build("laplace", {"eps": 1.0})
    curve = privacy_curve(lap.law(lap.candidates(1.0, 1)[0]), 1)
    assert curve.epsilon(0.0) == pytest.approx(1.0, abs=1e-3)
    assert curve.delta(0.5) == pytest.approx(1 - math.exp(-0.25), abs=1e-3)  # δ(ε) = 1 − e^{(ε−1)/2}
    gaussian = build("gaussian", {"sigma": 0.5})
    curve = privacy_curve(gaussian.law(gaussian.candidates(1.0, 1)[0]), 3)
    mu = 2 * math.sqrt(3)
    expected = norm.cdf(-1 / mu + mu / 2) - math.e * norm.cdf(-1 / mu - mu / 2)
    assert curve.delta(1.0) == pytest.approx(expected, abs=1e-4)
    ternary = build("ternary", {"r": 10.0})
    curve = privacy_curve(ternary.law(ternary.candidates(1.0, 1)[0]), 4)
    assert curve.delta(0.0) == pytest.approx(1 - 0.9**4, rel=1e-4) and curve.epsilon(0.01) == math.inf
    assert privacy_curve([], 3).delta(0.0) == 0.0


def test_mixture_factor_is_the_sampled_gaussian_and_the_round_is_below_its_sound_bound():
    """One step with K ~ Bernoulli(q) is dp_accounting's Poisson-sampled Gaussian (same law)."""
    mixture = privacy_curve([GaussianMixtureFactor(1.0, (0.0, 2.0), (0.9, 0.1))], 1)
    sampled = privacy_loss_distribution.from_gaussian_mechanism(1.0, sensitivity=2.0, sampling_prob=0.1,
                                                               value_discretization_interval=1e-2)
    assert mixture.epsilon(1e-5) == pytest.approx(sampled.get_epsilon_for_delta(1e-5), abs=0.02)
    round_ = build("lt_admm_round", {"tau": 2, "batch_size": 50, "samples": 500})
    exact = privacy_curve(round_.law(round_.candidates(2.0, 1)[0]), 1).epsilon(1e-5)
    assert 0 < exact <= round_.sound(Setting(2.0, 1, 1, 1e-5), 0.0).eps
    assert round_.law(round_.candidates(2.0, 1)[1]) is None  # x ≠ 0: no exact law


def test_claims_follow_the_papers_formulas():
    setting = Setting(1.0, 1, 1, 1e-5)
    ternary = build("ternary", {"r": 8.0}).claim(setting)
    assert (ternary.eps, ternary.delta, ternary.statement) == (0.0, 0.125, "Theorem 3")
    assert ternary.claim.delta_sound == pytest.approx(0.125)
    remark6 = build("ternary", {"r": 8.0}).claim(Setting(math.inf, 3, 1, 1e-5))
    assert remark6.statement == "Remark 6 (ℓ∞)" and remark6.norm == math.inf and remark6.unevaluable is None
    remark10 = build("ternary", {"r": 8.0}).claim(Setting(1.0, 1, 4, 1e-5))
    assert remark10.unevaluable and "no constant" in remark10.unevaluable
    assert remark10.reading[:2] == (0.0, pytest.approx(0.25))
    gradient = build("tvss_gradient").claim(setting)
    assert gradient.eps == pytest.approx(0.2 / (math.ceil(2**1.2) * 2**0.1))
    state = build("tvss_state").claim(Setting(1.0, 1, 3, 1e-5))
    assert state.eps == pytest.approx(3 * 0.2 * 0.5 / (1 * 2**0.05))  # T · Cα₀/(γ₀σ₁)
    assert build("tvss_state").unit() == pytest.approx(0.2 * 0.5)  # Definition 1: Cα₀/γ₀, the claim's Δ_1
    assert build("tvss_state", {"level": "record"}).unit() == pytest.approx(2 * 0.2 * 0.5)
    from privaudit.defenses.lt_admm_dp import theorem2_epsilon

    admm = build("lt_admm_round").claim(Setting(2.0, 1, 2, 1e-4))
    assert admm.eps == pytest.approx(theorem2_epsilon(2, 4, 1.0, 8, 0.5, 1000, 1e-4))
    assert admm.claim.eps_stated is None
    gaussian = build("gaussian", {"sigma": 5.0}).claim(setting)
    assert gaussian.eps == pytest.approx(math.sqrt(2 * math.log(1.25e5)) / 5) and gaussian.unevaluable is None
    assert build("gaussian", {"sigma": 1.0}).claim(setting).unevaluable.startswith("Thm A.1 covers ε < 1")
    assert build("dpdl_cross_gradient").claim(setting).unevaluable.startswith("Theorem 1 covers the whole run")
    assert build("onebit").claim(setting) is None


def test_sound_bounds_grow_with_the_adjacency():
    lap = build("laplace", {"eps": 0.5})
    assert [lap.sound(Setting(NORMS[a], 4, 2, 1e-5), 0.0).eps for a in NORMS] == pytest.approx([1.0, 2.0, 4.0])
    gaussian = build("gaussian")
    values = [gaussian.sound(Setting(NORMS[a], 4, 1, 1e-5), 0.0).eps for a in NORMS]
    assert values[0] == pytest.approx(values[1]) and values[2] > values[1]
    assert build("ternary", {"r": 10.0}).sound(Setting(1.0, 1, 3, 1e-5), 0.0).delta == pytest.approx(1 - 0.9**3)


@pytest.mark.parametrize("name, params, expected", [
    ("nope", {}, "unknown mechanism 'nope' (choose from laplace,"),
    ("ternary", {"r": "-1"}, "ternary: --param r: Input should be greater than 0"),
    ("ternary", {"q": "1"}, "ternary: --param q: unknown parameter (choose from r)"),
    ("lt_admm_round", {"batch_size": "5000"}, "lt_admm_round: batch_size 5000 exceeds samples m_i = 1000"),
])
def test_bad_mechanism_or_parameter_is_a_one_line_error(name, params, expected):
    with pytest.raises(ConfigError) as error:
        build(name, params)
    assert str(error.value).startswith(expected) and "\n" not in str(error.value)


def test_a_defense_release_names_a_registered_defense():
    from privaudit.defenses import DEFENSES

    named = {name: cls.defense for name, cls in MECHANISMS.items() if cls.defense is not None}
    assert set(named) == {"ternary", "dpdl_cross_gradient", "lt_admm_round", "tvss_state", "tvss_gradient"}
    assert set(named.values()) <= set(DEFENSES)


def test_lt_admm_round_at_delta_zero_is_a_one_line_error():
    """Theorem 2 has log(1/δ): δ = 0 is refused before its range (which divides by log(1/δ)) is checked."""
    from privaudit.errors import ConfigError

    with pytest.raises(ConfigError, match="needs δ > 0"):
        build("lt_admm_round").claim(Setting(2.0, 1, 1, 0.0))
