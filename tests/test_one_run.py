"""The one-run audits of `privaudit.attacks.audit.one_run`: Steinke et al. 2023's (ε, δ) bound and Mahloujifar et
al. 2024's f-DP (μ-GDP) bound, on hand-set counts and on simulated runs of a μ-GDP mechanism."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from privaudit.attacks.audit.one_run import (gdp_eps, gdp_inverse_power, one_run_eps, one_run_fdp_rejects, one_run_gdp_eps,
                                   one_run_gdp_mu, one_run_p_value)
from privaudit.errors import ConfigError

DELTA = 1e-5


def one_run_outcome(mu: float, canaries: int, guesses_each: int, rng: np.random.Generator) -> int:
    """Right guesses in one run of the μ-GDP mechanism that releases a score per canary, N(μ, 1)
    when it is in and N(0, 1) when out (each canary's pair of laws is exactly μ-GDP); "in" for the
    `guesses_each` highest scores, "out" for as many lowest."""
    included = rng.random(canaries) < 0.5
    order = np.argsort(rng.standard_normal(canaries) + mu * included)
    return int((~included[order[:guesses_each]]).sum() + included[order[-guesses_each:]].sum())


def approx_dp_inverse_power(power: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """f̄⁻¹ of (ε, δ)-DP: f̄(α) = min(1, δ + e^ε α, 1 − e^{−ε}(1 − δ − α)) (Kairouz et al. 2015),
    inverted piece by piece."""
    return np.maximum(np.maximum((power - DELTA) * np.exp(-eps), 1 - DELTA - np.exp(eps) * (1 - power)), 0.0)


def test_chance_counts_give_zero_for_both_analyses():
    for correct in (0, 30, 50):
        assert one_run_eps(correct, 100, 1000, DELTA, 0.95) == 0.0
        assert one_run_gdp_mu(correct, 100, 1000, 0.95) == 0.0
        assert one_run_gdp_eps(correct, 100, 1000, DELTA, 0.95) == 0.0


def test_coin_flip_scores_give_zero_in_most_seeds():
    # μ = 0: the truth is 0, so a positive bound exceeds it. A valid 95 % bound is positive with
    # probability <= 0.05 per seed, so more than 4 of 40 happens with probability <= P(Bin(40,
    # 0.05) >= 5) = 0.048; a bound positive in a quarter of the seeds passes with P(Bin(40, 0.25)
    # <= 4) = 0.016.
    rng = np.random.default_rng(0)
    counts = [one_run_outcome(0.0, 1000, 50, rng) for _ in range(40)]
    assert sum(one_run_gdp_mu(c, 100, 1000, 0.95) > 0 for c in counts) <= 4
    assert sum(one_run_eps(c, 100, 1000, DELTA, 0.95) > 0 for c in counts) <= 4


@pytest.mark.parametrize("mu, canaries, guesses_each", [(1.0, 1000, 50), (0.5, 1000, 100)])
def test_bounds_exceed_the_truth_of_a_gdp_mechanism_in_few_seeds(mu, canaries, guesses_each):
    # Same binomial argument as above: <= 4 of 40 exceedances. These settings are chosen where the
    # bound is close to the truth (median μ_LB/μ = 0.63 and 0.57, largest 0.84 and 0.76), so an
    # analysis too optimistic by a third would fail: at confidence 0.5 instead of 0.95, 8 and 6 of
    # the 40 seeds exceed μ.
    rng = np.random.default_rng(1)
    truth = gdp_eps(mu, DELTA)
    counts = [one_run_outcome(mu, canaries, guesses_each, rng) for _ in range(40)]
    mu_bounds = [one_run_gdp_mu(c, 2 * guesses_each, canaries, 0.95) for c in counts]
    assert sum(b > mu for b in mu_bounds) <= 4
    assert sum(one_run_gdp_eps(c, 2 * guesses_each, canaries, DELTA, 0.95) > truth for c in counts) <= 4
    assert sum(one_run_eps(c, 2 * guesses_each, canaries, DELTA, 0.95) > truth for c in counts) <= 4
    assert np.median(mu_bounds) > 0.4 * mu


def test_bounds_are_positive_for_a_leaky_mechanism():
    rng = np.random.default_rng(2)
    counts = [one_run_outcome(4.0, 1000, 50, rng) for _ in range(10)]
    assert all(one_run_gdp_mu(c, 100, 1000, 0.95) > 1.0 for c in counts)
    assert all(one_run_gdp_eps(c, 100, 1000, DELTA, 0.95) > 4.0 for c in counts)


@pytest.mark.parametrize("canaries, guesses, counts", [(1000, 100, (70, 80, 90, 95, 100)),
                                                       (10_000, 1000, (600, 700, 800, 900, 1000)),
                                                       (100, 20, (15, 18, 20))])
def test_gdp_eps_beats_steinke_where_guesses_are_accurate(canaries, guesses, counts):
    # The GDP audit refutes a whole trade-off curve, so the same count forces a larger ε at δ than
    # the (ε, δ) analysis (Mahloujifar et al. 2024, their comparison with Steinke et al.).
    for correct in counts:
        assert one_run_gdp_eps(correct, guesses, canaries, DELTA, 0.95) > one_run_eps(correct, guesses, canaries,
                                                                                     DELTA, 0.95)


def test_gdp_eps_is_below_steinke_near_chance():
    # Near chance the count probes only the middle of the trade-off curve: μ_LB = 0.015, whose ε at
    # δ = 1e-5 (0.044) is below the (ε, δ) analysis's 0.050 (the exception the module states).
    assert 0 < one_run_gdp_eps(60, 100, 1000, DELTA, 0.95) < one_run_eps(60, 100, 1000, DELTA, 0.95)


def test_fdp_recursion_on_the_approximate_dp_curve_agrees_with_steinke():
    # Two different theorems on the same count and the same claim: they must nearly agree (the
    # recursion on the (ε, δ) curve is within 0.03 of Steinke et al. over these counts).
    for correct in (60, 70, 80, 90, 95, 100):
        grid = np.linspace(0.0, 6.0, 60_001)
        refuted = one_run_fdp_rejects(approx_dp_inverse_power, grid, correct, 100, 1000, 0.95)
        largest = grid[np.argmin(refuted) - 1]
        assert largest == pytest.approx(one_run_eps(correct, 100, 1000, DELTA, 0.95), abs=0.03)


def test_bounds_increase_with_right_guesses():
    mus = [one_run_gdp_mu(c, 100, 1000, 0.95) for c in range(101)]
    epss = [one_run_gdp_eps(c, 100, 1000, DELTA, 0.95) for c in range(0, 101, 5)]
    steinke = [one_run_eps(c, 100, 1000, DELTA, 0.95) for c in range(0, 101, 5)]
    for values in (mus, epss, steinke):
        assert all(a <= b for a, b in zip(values, values[1:]))
    assert mus[-1] > mus[80] > mus[60] > 0


def test_bounds_decrease_with_confidence():
    assert one_run_gdp_mu(90, 100, 1000, 0.99) < one_run_gdp_mu(90, 100, 1000, 0.95) < \
        one_run_gdp_mu(90, 100, 1000, 0.5)


def test_mu_bound_is_the_edge_of_the_refuted_claims():
    mu = one_run_gdp_mu(90, 100, 1000, 0.95)
    refuted = one_run_fdp_rejects(gdp_inverse_power, np.array([0.0, mu / 2, mu, mu + 1e-5, 2 * mu]), 90, 100, 1000,
                                  0.95)
    assert refuted.tolist() == [True, True, True, False, False]


def test_gdp_eps_is_the_root_of_the_gdp_delta_curve():
    from scipy.stats import norm

    for mu in (0.5, 1.0, 3.0):
        eps = gdp_eps(mu, DELTA)
        delta = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert delta == pytest.approx(DELTA, rel=1e-6)
    assert gdp_eps(0.0, DELTA) == 0.0


def test_steinke_p_value_is_the_binomial_tail_at_zero_delta():
    from scipy.stats import binom

    assert one_run_p_value(1.0, 30, 40, 200, 0.0) == pytest.approx(binom.sf(29, 40, 1 / (1 + math.exp(-1.0))))
    assert one_run_p_value(1.0, 30, 40, 200, 1e-5) > one_run_p_value(1.0, 30, 40, 200, 0.0)


def test_inconsistent_counts_are_one_line_errors():
    with pytest.raises(ConfigError, match="correct <= guesses"):
        one_run_gdp_mu(101, 100, 1000, 0.95)
    with pytest.raises(ConfigError, match="guesses <= canaries"):
        one_run_gdp_mu(10, 100, 50, 0.95)
    with pytest.raises(ConfigError, match="confidence"):
        one_run_gdp_mu(10, 100, 1000, 1.0)
    with pytest.raises(ConfigError, match="delta"):
        one_run_gdp_eps(10, 100, 1000, 0.0, 0.95)


def _least_mass(mu: float, correct: int, guesses: int, canaries: int, tau: float) -> float:
    """The least Σ_j P[C = j] under the constraints of the module docstring (H_{i−1} ≥ f̄⁻¹(R_i)
    for every i, P[C ≥ correct] ≥ τ), a convex program solved from several starts."""
    levels = np.arange(guesses + 1)

    def right(p, i):
        return (p[i:] * levels[i:]).sum() / canaries

    def wrong(p, i):
        return (p[i:] * (guesses - levels[i:])).sum() / canaries

    constraints = [{"type": "ineq", "fun": lambda p: p[correct:].sum() - tau}]
    constraints += [{"type": "ineq", "fun": lambda p, i=i: wrong(p, i - 1) - gdp_inverse_power(right(p, i), mu)}
                    for i in range(1, guesses + 1)]
    rng = np.random.default_rng(0)
    best = math.inf
    for _ in range(4):
        result = minimize(lambda p: p.sum(), rng.random(guesses + 1) * 0.5, method="SLSQP",
                          bounds=[(0, None)] * (guesses + 1), constraints=constraints,
                          options={"maxiter": 500, "ftol": 1e-12})
        if result.success and all(c["fun"](result.x) > -1e-8 for c in constraints):
            best = min(best, result.fun)
    return best


@pytest.mark.parametrize("mu, correct, guesses, canaries", [(0.5, 9, 10, 40), (0.3, 7, 8, 32), (0.93, 7, 7, 29)])
def test_recursion_refutes_where_the_constraints_start_to_need_more_than_probability_one(mu, correct, guesses,
                                                                                        canaries):
    # τ* = the smallest P[C >= c] the recursion refutes (bisection on the confidence); the convex
    # program, solved independently, must need less than probability 1 just below τ* and more just
    # above: the recursion is its exact optimum, neither optimistic nor loose.
    def refuted(tau):
        return one_run_fdp_rejects(gdp_inverse_power, np.array([mu]), correct, guesses, canaries, 1 - tau)[0]

    low, high = 1e-3, 0.999
    assert not refuted(low) and refuted(high)
    while high - low > 1e-6:
        middle = (low + high) / 2
        low, high = (low, middle) if refuted(middle) else (middle, high)
    assert _least_mass(mu, correct, guesses, canaries, 0.98 * high) < 1 < _least_mass(mu, correct, guesses,
                                                                                         canaries, 1.02 * high)
