"""One-training-run audits: lower bounds on privacy from the count of right guesses about canaries.

The game (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run", Alg. 1):
m canaries, each put in the training data independently with probability ½; after ONE run the
auditor scores every canary, guesses "in" for the k₊ highest scores and "out" for the k₋ lowest,
abstains on the rest, and counts the right guesses c out of c′ = k₊ + k₋. k₊ and k₋ are fixed
before the run, so the count needs no correction.

Two analyses of the same count, both rigorous bounds at the stated confidence:

- Steinke et al. 2023 test an (ε, δ)-DP claim: under it, P[C ≥ c] is at most a binomial tail
  plus a δ term (`one_run_p_value`); `one_run_eps` is the largest ε that tail refutes.
- Mahloujifar, Melis & Chaudhuri 2024 ("Auditing f-Differential Privacy in One Run",
  arXiv:2410.22235) test an f-DP claim (`one_run_fdp_rejects`, any symmetric trade-off function f); their
  main instance is μ-GDP, f = G_μ, G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (Dong, Roth & Su 2022).
  `one_run_gdp_mu` is the largest μ the count refutes, μ_LB; `one_run_gdp_eps` is the ε of
  μ_LB-GDP at δ (Dong, Roth & Su 2022, Cor. 2.13).

The f-DP bound, as computed here. Write f̄ = 1 − f (the largest power of a test at level α,
concave and increasing) and, per canary, R_i = E[C·1{C ≥ i}]/m (right guesses in outcomes with at
least i right) and H_i = E[(c′ − C)·1{C ≥ i}]/m (wrong guesses there). Flipping the coin of a
rightly guessed canary turns an outcome with ≥ i right into one where that canary is wrongly
guessed and ≥ i − 1 are right; f-DP for that one canary, averaged over canaries and the other
coins (concavity of f̄), gives R_i ≤ f̄(H_{i−1}), i.e.

    H_{i−1} ≥ f̄⁻¹(R_i),        and        R_0 + H_0 = c′/m   (every outcome has c′ guesses).

If P[C ≥ c] ≥ τ, then R_c ≥ τc/m; the least total probability consistent with these constraints
is met by the greedy recursion of Mahloujifar et al. (their bound with abstention; the
`audit_rh_with_cap` procedure of their reference code, facebookresearch/PrivacyGuard), started at
r_c = τc/m, h_c = τ(c′ − c)/m:

    h_i = max(h_{i+1}, f̄⁻¹(r_{i+1})),    r_i = r_{i+1} + i/(c′ − i) · (h_i − h_{i+1}),

(the mass added at level i has i right and c′ − i wrong guesses). If r_0 + h_0 > c′/m the
constraints need more than probability 1, so P[C ≥ c] < τ and the f-DP claim is refuted at
confidence 1 − τ. Checked here against a direct solution of that convex program (minimise Σ_j
P[C = j] subject to the constraints above, SLSQP, c′ ≤ 14, 30 random settings): the recursion
equals its optimum to 1e-11 relative — so it is exact for these constraints, and since f̄⁻¹ of
μ-GDP shrinks as μ grows, the refuted μ form an interval [0, μ_LB), which makes bisection valid.

Rounding, all towards a smaller bound: a claim is refuted only when r_0 + h_0 exceeds c′/m by a
relative 1e-9 (Φ and Φ⁻¹ are exact to ~1e-15 relative, over at most c′ steps); μ_LB is the
lower end of its final bracket (width ≤ 1e-6); ε_LB subtracts 1e-9 from the analytic GDP ε
(dp_accounting's root finder is exact to 1e-12).

What the numbers mean. μ_LB is hypothesis-free: with confidence 1 − τ the mechanism is not
μ-GDP for any μ < μ_LB. ε_LB(δ) is the ε at δ of μ_LB-GDP: a lower bound on the mechanism's own
ε(δ) only when its privacy curve is a GDP curve (the Gaussian mechanism; DP-SGD in the regime of
Dong, Roth & Su 2022's central limit theorem), the hypothesis Mahloujifar et al. audit. The same
recursion on the (ε, δ)-DP trade-off curve gives within ±0.03 of Steinke et al.'s ε_LB (m = 1000,
c′ = 100, c = 60…100, δ = 1e-5; +0.28 at c = c′ = 1000, m = 10⁴): the gain of the GDP audit
comes from the shape of the GDP curve, not from a sharper count. Measured, m = 1000, c′ = 100, δ = 1e-5, 95 %:

    c right of 100     60      70     80     90     95     100
    Steinke ε_LB       0.050   0.469  0.955  1.626  2.165  3.465
    GDP μ_LB           0.015   0.182  0.364  0.603  0.787  1.226
    GDP ε_LB           0.044   0.653  1.402  2.456  3.323  5.549

so the GDP ε_LB is the larger from c = 62 on, and slightly the smaller near chance, where the
count only probes the middle of the trade-off curve and a small μ's ε at δ = 1e-5 is small.
Only k = 2 (membership: in or out) is implemented; their k-ary reconstruction game multiplies
f̄⁻¹ by k − 1. Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from scipy.special import ndtr, ndtri
from scipy.stats import binom

from privaudit.errors import ConfigError

InversePower = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""f̄⁻¹ of a family of claims: (r, θ) ↦ f̄_θ⁻¹(r), elementwise over claims θ."""

_REJECT_MARGIN = 1e-9
_MU_TOLERANCE = 1e-6
_EPS_ROUNDING = 1e-9
_GRID = 33
_MU_CEILING = 1024.0


# ---------------------------------------------------------------------------------------------
# Steinke, Nasr & Jagielski 2023: an (ε, δ)-DP claim


def one_run_p_value(eps: float, correct: int, guesses: int, canaries: int, delta: float) -> float:
    """P[at least `correct` right out of `guesses`] under (ε, δ)-DP, m = `canaries` each included
    with probability ½ (Steinke, Nasr & Jagielski 2023: their theorem for (ε, δ)-DP, in the form
    their Appendix D evaluates):

        P[Bin(r, q) ≥ v] + 2mδ · max_{1≤i≤v} P[v − i ≤ Bin(r, q) < v] / i,   q = e^ε/(1 + e^ε),

    the binomial tail of r guesses each right with the accuracy of ε-DP randomized response, plus
    the δ term. Increasing in ε: a larger ε allows more right guesses."""
    q = 1 / (1 + math.exp(-eps))
    tail = float(binom.sf(correct - 1, guesses, q))
    if correct == 0 or delta == 0:
        return min(tail, 1.0)
    below = np.cumsum(binom.pmf(correct - np.arange(1, correct + 1), guesses, q))
    return min(tail + 2 * canaries * delta * float((below / np.arange(1, correct + 1)).max()), 1.0)


def one_run_eps(correct: int, guesses: int, canaries: int, delta: float, confidence: float) -> float:
    """The largest ε the outcome refutes at `confidence`: sup{ε : p-value(ε) < 1 − confidence}
    (bisection to 1e-6 on `one_run_p_value`, which increases in ε); 0 when even ε = 0 stands."""
    alpha = 1 - confidence
    if one_run_p_value(0.0, correct, guesses, canaries, delta) >= alpha:
        return 0.0
    low, high = 0.0, 1.0
    while one_run_p_value(high, correct, guesses, canaries, delta) < alpha and high < 100:
        low, high = high, 2 * high
    while high - low > 1e-6:
        middle = (low + high) / 2
        refuted = one_run_p_value(middle, correct, guesses, canaries, delta) < alpha
        low, high = (middle, high) if refuted else (low, middle)
    return low


# ---------------------------------------------------------------------------------------------
# Mahloujifar, Melis & Chaudhuri 2024: an f-DP claim


def _check_counts(correct: int, guesses: int, canaries: int, confidence: float) -> None:
    if not 0 <= correct <= guesses <= canaries or guesses < 1:
        raise ConfigError(f"one-run counts must satisfy 0 <= correct <= guesses <= canaries and guesses >= 1, got "
                          f"correct={correct}, guesses={guesses}, canaries={canaries}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")


def one_run_fdp_rejects(inverse_power: InversePower, claims: np.ndarray, correct: int, guesses: int, canaries: int,
                        confidence: float) -> np.ndarray:
    """Which f-DP claims, f_θ for θ in `claims`, the count refutes at `confidence` (module
    docstring: the recursion of Mahloujifar et al. 2024 from r_c = τc/m, h_c = τ(c′ − c)/m,
    refuting where r_0 + h_0 > c′/m), all claims advanced together; `inverse_power` is f̄_θ⁻¹.
    r and h only grow, so once r + h passes c′/m the claim stays refuted (f̄⁻¹ is then read at
    min(r, 1)); the recursion stops once no h moves (then nothing moves again)."""
    _check_counts(correct, guesses, canaries, confidence)
    tau = 1 - confidence
    limit = guesses / canaries * (1 + _REJECT_MARGIN)
    claims = np.asarray(claims, dtype=np.float64)
    right = np.full(claims.shape, tau * correct / canaries)
    wrong = np.full(claims.shape, tau * (guesses - correct) / canaries)
    for level in range(correct - 1, -1, -1):
        grown = np.maximum(wrong, inverse_power(np.minimum(right, 1.0), claims))
        if np.array_equal(grown, wrong):
            break
        right = right + level / (guesses - level) * (grown - wrong)
        wrong = grown
    return right + wrong > limit


def gdp_inverse_power(power: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """f̄⁻¹ of μ-GDP: the level α whose best power is `power`, Φ(Φ⁻¹(power) − μ) (inverting
    1 − G_μ(α) = Φ(Φ⁻¹(α) + μ))."""
    return ndtr(ndtri(power) - mu)


def _largest_refuted(refutes: Callable[[np.ndarray], np.ndarray]) -> float:
    """sup of the refuted parameters when they form an interval [0, x): x's bracket is found by
    doubling, then narrowed on grids of `_GRID` points to `_MU_TOLERANCE`; its lower end (a
    refuted point) is returned; 0 when 0 stands."""
    if not refutes(np.zeros(1))[0]:
        return 0.0
    low, high = 0.0, 1.0
    while refutes(np.array([high]))[0]:
        if high >= _MU_CEILING:
            return high
        low, high = high, 2 * high
    while high - low > _MU_TOLERANCE:
        grid = np.linspace(low, high, _GRID)
        refuted = refutes(grid)
        refuted[0], refuted[-1] = True, False
        first_standing = int(np.argmin(refuted))
        low, high = grid[first_standing - 1], grid[first_standing]
    return float(low)


def one_run_gdp_mu(correct: int, guesses: int, canaries: int, confidence: float) -> float:
    """μ_LB: the largest μ whose μ-GDP claim the count refutes at `confidence` (Mahloujifar et
    al. 2024 with f = G_μ; module docstring), to 1e-6 and rounded down; 0 when even μ = 0 (no
    information about any canary) stands."""
    _check_counts(correct, guesses, canaries, confidence)
    return _largest_refuted(lambda mu: one_run_fdp_rejects(gdp_inverse_power, mu, correct, guesses, canaries,
                                                           confidence))


def gdp_eps(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ: the root of δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su
    2022, Cor. 2.13), which is the analytic Gaussian mechanism of noise 1/μ (Balle & Wang 2018;
    dp_accounting's `get_epsilon_gaussian`)."""
    if mu <= 0:
        return 0.0
    return float(get_epsilon_gaussian(1 / mu, delta))


def one_run_gdp_eps(correct: int, guesses: int, canaries: int, delta: float, confidence: float) -> float:
    """ε_LB(δ) = ε of μ_LB-GDP at δ (`one_run_gdp_mu`, `gdp_eps`), 1e-9 below the root: a lower
    bound on ε(δ) for a mechanism whose privacy curve is a GDP curve (module docstring)."""
    if not 0 < delta < 1:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    return max(gdp_eps(one_run_gdp_mu(correct, guesses, canaries, confidence), delta) - _EPS_ROUNDING, 0.0)
