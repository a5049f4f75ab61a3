"""Estimates of ε(δ) from canary scores under a Gaussian-DP model — estimates, never bounds.

Given scores of runs without the canary (`scores_out`) and with it (`scores_in`), higher meaning
"in", `gdp_estimate` fits the μ of a μ-GDP pair (Dong, Roth & Su 2022) and reports the ε at δ of
μ-GDP: an estimate in the style of Nasr et al. 2023 ("Tight Auditing of Differentially Private
Machine Learning"), for white-box canary scores whose laws look Gaussian. It is an estimate:
nothing makes it a lower or an upper bound, and it is only as good as the GDP model of the
scores. It measures the runs and nothing else: no accountant caps it, so it exceeds the sound ε
when the runs leak more than the accountant allows (a defense whose noise is smaller than it
states). The project's bounds live in `privaudit.attacks.audit.mechanism_audit` and `privaudit.attacks.audit.one_run`.

The rule, and why. μ̂ is the standardised mean difference (x̄_in − x̄_out)/s_pooled: for a μ-GDP
pair seen through its log-likelihood ratio, whose laws are N(−μ²/2, μ²) and N(μ²/2, μ²), or
through any increasing affine map of it (N(0, 1) against N(μ, 1)), that is μ. Its standard
error under the model is se² = 1/n_in + 1/n_out + μ̂²/(2(n_in + n_out)) (the large-sample
variance of a standardised difference under normality; Hedges & Olkin 1985). μ̂ is kept when
μ̂ > z·se and replaced by 0 otherwise, z = the 0.995 quantile of Student's t with n_in + n_out − 2
degrees of freedom: with se's first term alone, μ̂/se is exactly the two-sample t statistic, which
under the null (both samples from one Gaussian law) is t-distributed, so a null sample gives a
positive estimate with probability ≤ 0.005, and 20 null seeds give two or more positives with
probability ≤ 0.0045. For other laws the difference of two equal-size samples' means is still
exactly symmetric about 0, and the rate stays near 0.005 (measured below). Nothing maximises over
thresholds, which is what made jax_privacy's `epsilon_from_gdp` return ε ≈ 3.9 on identical
score laws.

Rules compared (measured, 200 seeds per cell, 60 at n = 64000; N(0, 1) against N(μ, 1)): the
standardised mean difference; Φ⁻¹ of the rates at the pooled median, μ̂ = Φ⁻¹(TPR) − Φ⁻¹(FPR);
and the AUC, μ̂ = √2 Φ⁻¹(AUC) with DeLong's variance — each either kept-or-zeroed as above or
shrunk to max(0, μ̂ − z·se). The mean difference had the smallest spread everywhere (sd at n =
1000, μ = 1: 0.046, AUC 0.047, median 0.055; at μ = 4: 0.078, 0.118, 0.129). Shrinking costs a
bias of about −z·se, keep-or-zero none once μ clears the test; RMSE of the mean difference:

    n per side          1000            4000            16000           64000
    μ = 0.5   shrunk    0.119           0.062           0.031           0.016
              kept      0.044           0.023           0.011           0.005
    μ = 1     shrunk    0.126           0.066           0.034           0.017
              kept      0.047           0.025           0.012           0.005
    μ = 2     shrunk    0.149           0.074           0.038           0.019
              kept      0.052           0.027           0.014           0.007

so the estimate keeps or zeroes. Its bias: within ±0.01 in μ for μ ≥ 0.2 at n = 1000 (μ ≥ 0.1
at n = 4000); near the test's edge (μ ≈ z√(2/n), 0.115 at n = 1000) it is 0 about half the
time: bias −0.04 at μ = 0.1, n = 1000. Null rates of a positive estimate, measured: Gaussian
scores 0.0052 / 0.0043 / 0.0070 at n = 200 / 2000 / 20000 per side (20000 / 4000 / 1000 seeds),
the skewed law of the tests (the sum of 30 rounds of the subsampled Gaussian's log-likelihood
ratio, q = 0.2, σ = 1, both sides without the canary) 0.0038 / 0.0050 / 0.0060.

Model error is the estimate's other bias. The sum of T per-round log-likelihood ratios of the
Poisson-subsampled Gaussian is no Gaussian shift pair (skew 0.44, and sd 1.38 with the canary
against 1.06 without, at q = 0.2, σ = 1, T = 30): there μ̂ = 1.18 and ε = 5.3 at δ = 1e-5
(10⁵ runs per side), where the exact ε (PLD) is 7.9 and the CLT's μ = q√T·√(e^{1/σ²} − 1) =
1.44 gives 6.7. So for such skewed score laws the model error biases the estimate low; it can
still exceed the sound ε, and does when the runs leak more than the accountant allows.

Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from privaudit.attacks.audit.one_run import gdp_eps
from privaudit.errors import ConfigError

NULL_RATE = 0.005
"""Chance that scores from one law give a positive estimate (Gaussian scores: at most this)."""
METHOD = ("GDP estimate (standardised mean difference, kept when its one-sided t-test rejects mu = 0 at 0.005, "
          "else 0), not a bound and not capped at the sound epsilon")


@dataclass(frozen=True)
class GdpEstimate:
    """An estimate of ε(δ) under a μ-GDP model of the scores (module docstring): the raw μ̂, the
    μ̂ used (μ̂ or 0), its standard error, the ε estimate at δ (never capped), the samples per
    side and the method."""

    mu_estimate_raw: float
    mu_estimate: float
    mu_standard_error: float
    eps_estimate: float
    delta: float
    samples_out: int
    samples_in: int
    method: str = METHOD

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def standardised_mean_difference(scores_out: np.ndarray, scores_in: np.ndarray) -> tuple[float, float]:
    """(μ̂, se): (x̄_in − x̄_out)/s_pooled and its normal-theory standard error (module docstring),
    μ of a μ-GDP pair observed through its log-likelihood ratio."""
    n_out, n_in = len(scores_out), len(scores_in)
    pooled = ((n_out - 1) * np.var(scores_out, ddof=1) + (n_in - 1) * np.var(scores_in, ddof=1)) / (n_out + n_in - 2)
    if pooled <= 0:
        raise ConfigError("the scores do not vary: a GDP estimate needs scores with a spread")
    mu = float((np.mean(scores_in) - np.mean(scores_out)) / math.sqrt(pooled))
    return mu, math.sqrt(1 / n_out + 1 / n_in + mu * mu / (2 * (n_out + n_in)))


def gdp_estimate(scores_out: np.ndarray, scores_in: np.ndarray, delta: float) -> GdpEstimate:
    """The estimate of ε(δ) (module docstring): μ̂ kept when μ̂ > z·se (z the t quantile that makes
    a null sample positive with probability `NULL_RATE`), else 0; then ε of μ-GDP at δ
    (`privaudit.attacks.audit.one_run.gdp_eps`), whatever the accountant says."""
    scores_out = np.asarray(scores_out, dtype=np.float64).ravel()
    scores_in = np.asarray(scores_in, dtype=np.float64).ravel()
    if min(len(scores_out), len(scores_in)) < 2:
        raise ConfigError(f"a GDP estimate needs at least 2 scores per side, got {len(scores_out)} without the "
                          f"canary and {len(scores_in)} with it")
    if not 0 < delta < 1:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    raw, error = standardised_mean_difference(scores_out, scores_in)
    z = float(student_t.ppf(1 - NULL_RATE, len(scores_out) + len(scores_in) - 2))
    mu = raw if raw > z * error else 0.0
    return GdpEstimate(raw, mu, error, gdp_eps(mu, delta), delta, len(scores_out), len(scores_in))


def subsampled_gaussian_log_likelihood_ratio(y: Any, q: float, sigma: float) -> np.ndarray:
    """log p_in(y)/p_out(y) of one round of the Poisson-subsampled Gaussian mechanism, y in units of
    the noise σC: out N(0, 1), in (1 − q)·N(0, 1) + q·N(1/σ, 1) (the canary sampled with
    probability q moves the mean by C, i.e. 1/σ noise units), so

        log(1 − q + q·exp(y/σ − 1/(2σ²)))

    (Mironov, Talwar & Zhang 2019; the privacy loss of Abadi et al. 2016's DP-SGD step). The
    per-round statistic of the Neyman–Pearson test; summed over independent rounds it is the
    optimal statistic for the whole run. Computed as a log-sum-exp, so no overflow at large y."""
    y = np.asarray(y, dtype=np.float64)
    if not 0 < q <= 1 or not sigma > 0:
        raise ConfigError(f"the subsampled Gaussian needs 0 < q <= 1 and sigma > 0, got q={q}, sigma={sigma}")
    shifted = math.log(q) + y / sigma - 1 / (2 * sigma * sigma)
    return shifted if q == 1 else np.logaddexp(math.log1p(-q), shifted)
