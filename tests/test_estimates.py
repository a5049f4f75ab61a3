"""The GDP estimate of `privaudit.attacks.audit.estimates`: exactly 0 on null scores, accurate on μ-GDP scores,
never capped (above the sound ε when the mechanism leaks more than it states), monotone; and the
subsampled Gaussian's per-round log-likelihood ratio."""

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from privaudit.attacks.audit.estimates import gdp_estimate, standardised_mean_difference, subsampled_gaussian_log_likelihood_ratio
from privaudit.attacks.audit.one_run import gdp_eps
from privaudit.accounting import epsilon, subsampled_gaussian
from privaudit.errors import ConfigError

DELTA = 1e-5


def skewed_null_scores(n: int, rng: np.random.Generator) -> np.ndarray:
    """n runs of the canary-free world scored by the optimal statistic of 30 rounds of the
    Poisson-subsampled Gaussian (q = 0.2, σ = 1): a skewed, non-Gaussian score law."""
    return subsampled_gaussian_log_likelihood_ratio(rng.standard_normal((n, 30)), 0.2, 1.0).sum(axis=1)


def gdp_scores(mu: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihood ratio of a μ-GDP pair in both worlds: N(−μ²/2, μ²) and N(μ²/2, μ²)."""
    return mu * rng.standard_normal(n) - mu * mu / 2, mu * rng.standard_normal(n) + mu * mu / 2


@pytest.mark.parametrize("n", [200, 2000, 20_000])
@pytest.mark.parametrize("law", ["gaussian", "skewed"])
def test_null_scores_give_exactly_zero_in_19_of_20_seeds(n, law):
    # Each null seed is positive with probability ~0.005 (module docstring: <= 0.005 for Gaussian
    # scores, 0.0038-0.0060 measured on the skewed law), so 2 or more of 20 happens with
    # probability P(Bin(20, 0.005) >= 2) = 0.0045. A rule maximising over thresholds, or one
    # without the test (z = 0), is positive in about half the seeds.
    rng = np.random.default_rng(n)
    draw = (lambda: rng.standard_normal(n)) if law == "gaussian" else (lambda: skewed_null_scores(n, rng))
    estimates = [gdp_estimate(draw(), draw(), DELTA) for _ in range(20)]
    assert sum(e.eps_estimate == 0.0 and e.mu_estimate == 0.0 for e in estimates) >= 19


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_estimate_recovers_mu_of_gdp_scores(mu):
    # n = 20000 per side: se(μ̂) = sqrt(2/n + μ²/(4n)) <= 0.013, so 0.05 is about 4 standard errors.
    rng = np.random.default_rng(7)
    for _ in range(3):
        estimate = gdp_estimate(*gdp_scores(mu, 20_000, rng), DELTA)
        assert estimate.mu_estimate == estimate.mu_estimate_raw == pytest.approx(mu, abs=0.05)
        assert estimate.mu_standard_error == pytest.approx(math.sqrt(2 / 20_000 + mu * mu / 80_000), rel=0.1)
        assert estimate.eps_estimate == pytest.approx(gdp_eps(estimate.mu_estimate, DELTA))
        assert estimate.samples_out == estimate.samples_in == 20_000


def test_estimate_does_not_depend_on_the_scale_or_origin_of_scores():
    rng = np.random.default_rng(8)
    out, inside = gdp_scores(1.0, 5000, rng)
    assert standardised_mean_difference(3 * out - 7, 3 * inside - 7) == pytest.approx(
        standardised_mean_difference(out, inside))


def test_estimate_exceeds_the_sound_eps_when_the_noise_is_half_what_is_stated():
    """30 rounds of the Poisson-subsampled Gaussian stated at σ = 1 (q = 0.2; sound ε 7.93 at δ =
    1e-5 by PLD) whose real noise is σ = 0.5 (true ε 29.8), scored by the attacker's statistic for
    the stated σ: the estimate reads the runs, so it lands above the sound ε (10.5 here, 11.1-12.2
    on five other draws of 500 runs per side; biased low against the true ε, as the skewed score
    law makes it). At the stated noise it stays below (4.9 here, 5.2-5.4 on five other draws). A
    cap at the sound ε could never report more than 7.93."""
    rng = np.random.default_rng(12)
    sound = epsilon(subsampled_gaussian(0.2, 1.0, 30), DELTA, "pld")

    def scores(noise: float, canary: bool) -> np.ndarray:
        sampled = rng.random((500, 30)) < 0.2 if canary else 0.0
        return subsampled_gaussian_log_likelihood_ratio(noise * rng.standard_normal((500, 30)) + sampled, 0.2,
                                                        1.0).sum(axis=1)

    leaky = gdp_estimate(scores(0.5, False), scores(0.5, True), DELTA)
    honest = gdp_estimate(scores(1.0, False), scores(1.0, True), DELTA)
    assert sound == pytest.approx(7.93, abs=0.01)
    assert leaky.eps_estimate > 1.25 * sound
    assert 0 < honest.eps_estimate < sound


def test_estimate_grows_with_separation():
    rng = np.random.default_rng(10)
    out, inside = rng.standard_normal(2000), rng.standard_normal(2000)
    values = [gdp_estimate(out, inside + shift, DELTA).eps_estimate for shift in np.linspace(0.0, 1.0, 21)]
    assert all(a <= b for a, b in zip(values, values[1:]))
    assert values[0] == 0.0 and values[-1] > 3.0


def test_identical_scores_give_zero_and_the_record_names_an_estimate():
    scores = np.random.default_rng(11).standard_normal(500)
    estimate = gdp_estimate(scores, scores.copy(), DELTA)
    assert estimate.mu_estimate_raw == 0.0 and estimate.eps_estimate == 0.0
    record = estimate.as_dict()
    assert "estimate" in record["method"] and "not a bound" in record["method"]
    assert not any("bound" in key for key in record)


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(ConfigError, match="at least 2 scores"):
        gdp_estimate([1.0], [1.0, 2.0], DELTA)
    with pytest.raises(ConfigError, match="do not vary"):
        gdp_estimate([1.0, 1.0], [1.0, 1.0], DELTA)
    with pytest.raises(ConfigError, match="delta"):
        gdp_estimate([0.0, 1.0], [1.0, 2.0], 0.0)


@pytest.mark.parametrize("q, sigma", [(0.2, 1.0), (0.01, 0.5), (1.0, 2.0)])
def test_log_likelihood_ratio_is_the_ratio_of_the_mixture_densities(q, sigma):
    y = np.linspace(-6.0, 8.0, 141)
    direct = np.log(((1 - q) * norm.pdf(y) + q * norm.pdf(y, loc=1 / sigma)) / norm.pdf(y))
    np.testing.assert_allclose(subsampled_gaussian_log_likelihood_ratio(y, q, sigma), direct, rtol=1e-12, atol=1e-12)


def test_log_likelihood_ratio_integrates_to_one_and_stays_finite():
    # E_out[p_in/p_out] = 1 for any likelihood ratio; y = 1e4 would overflow exp(y/σ) if formed.
    mass, _ = quad(lambda y: math.exp(float(subsampled_gaussian_log_likelihood_ratio(y, 0.2, 1.0)) + norm.logpdf(y)),
                   -40.0, 40.0)
    assert mass == pytest.approx(1.0, abs=1e-8)
    assert np.isfinite(subsampled_gaussian_log_likelihood_ratio(1e4, 0.2, 0.5))
    with pytest.raises(ConfigError, match="sigma"):
        subsampled_gaussian_log_likelihood_ratio(0.0, 0.2, 0.0)
