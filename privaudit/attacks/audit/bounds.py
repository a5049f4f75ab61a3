"""The bounds every audit shares: the smallest ε (or δ) a test's observed error rates force.

A mechanism is (ε, δ)-DP for an adjacency when, for every neighbouring pair (x, x′) and every
test S ("the output came from x′"), with FPR α = P[M(x) ∈ S] and FNR β = P[M(x′) ∉ S],

    α + e^ε β ≥ 1 − δ   and   e^ε α + β ≥ 1 − δ

(the hypothesis-testing form of DP: Wasserman & Zhou 2010; Kairouz, Oh & Viswanath 2015). A
test whose rates are bounded above by ᾱ ≥ α and β̄ ≥ β therefore forces

    ε ≥ ε_LB(δ) = max(log((1 − δ − β̄)/ᾱ), log((1 − δ − ᾱ)/β̄), 0)
    δ ≥ δ_LB(ε) = max(1 − β̄ − e^ε ᾱ, 1 − ᾱ − e^ε β̄, 0)

— lower bounds because they decrease in ᾱ and β̄ (Jagielski et al. 2020; Nasr et al. 2021;
Lu et al. 2022). ᾱ and β̄ are one-sided Clopper–Pearson upper bounds, each at level
√C, on samples of M(x) and of M(x′) drawn independently: both hold at once with probability
≥ √C·√C = C, and then both bounds above hold — so each reported bound holds at confidence C.

A test is a threshold on a scalar score, either side; `choose_test` picks it on held-out scores and
`bound_test` counts its rates on fresh ones, so only that one test meets the samples it is bounded on.
The mechanism audit (`privaudit.attacks.audit.mechanism_audit`) and the canary audits
(`privaudit.attacks.audit.canary_statistics`) both bound their tests here. Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy.stats import beta as beta_law

Target = Literal["eps", "delta"]

SELECT_FRACTION = 0.25
"""Share of each side's samples that chooses the test; the rest estimate its rates."""

_MAX_THRESHOLDS = 4096


def clopper_pearson_upper(successes: Any, trials: Any, level: float) -> np.ndarray:
    """One-sided upper confidence bound at `level` on a binomial rate (Clopper & Pearson 1934):
    the p with P(Bin(trials, p) ≤ successes) = 1 − level, i.e. the `level` quantile of
    Beta(successes + 1, trials − successes); 1 when every trial succeeded."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    bound = beta_law.ppf(level, k + 1, np.maximum(n - k, 1.0))
    return np.where(k >= n, 1.0, bound)


def eps_lower_bound(fpr_upper: Any, fnr_upper: Any, delta: float) -> np.ndarray:
    """ε_LB(δ) = max(log((1 − δ − β̄)/ᾱ), log((1 − δ − ᾱ)/β̄), 0) from upper bounds ᾱ, β̄ on a
    test's FPR and FNR (module docstring)."""
    a, b = np.asarray(fpr_upper, dtype=np.float64), np.asarray(fnr_upper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        forward = np.log(np.maximum(1.0 - delta - b, 0.0) / a)
        backward = np.log(np.maximum(1.0 - delta - a, 0.0) / b)
    return np.maximum(np.nan_to_num(np.maximum(forward, backward), nan=0.0, neginf=0.0), 0.0)


def delta_lower_bound(fpr_upper: Any, fnr_upper: Any, eps: float) -> np.ndarray:
    """δ_LB(ε) = max(1 − β̄ − e^ε ᾱ, 1 − ᾱ − e^ε β̄, 0) (module docstring)."""
    a, b = np.asarray(fpr_upper, dtype=np.float64), np.asarray(fnr_upper, dtype=np.float64)
    try:
        growth = math.exp(eps)
    except OverflowError:
        # e^ε is beyond floats (ε > 709.78: a claim of ε = 720 is legitimate, if meaningless):
        # e^ε·rate in logs, infinite where it is, so the bound is 0 but for a vanishing rate
        with np.errstate(divide="ignore", over="ignore"):
            return np.maximum(np.maximum(1.0 - b - np.exp(np.log(a) + eps), 1.0 - a - np.exp(np.log(b) + eps)),
                              0.0)
    return np.maximum(np.maximum(1.0 - b - growth * a, 1.0 - a - growth * b), 0.0)


def perfect_test_eps(trials: int, confidence: float, delta: float) -> float:
    """The ε_LB a test that never errs reaches on `trials` fresh runs per side, each rate bounded
    at √confidence as `bound_test` does: the most an audit of that size can ever show. A claim
    at or above it cannot be refuted by such an audit, whatever the attack."""
    upper = clopper_pearson_upper(0, trials, math.sqrt(confidence))
    return float(eps_lower_bound(upper, upper, delta))


def _objective(target: Target, at: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if target == "eps":
        return lambda a, b: eps_lower_bound(a, b, at)
    return lambda a, b: delta_lower_bound(a, b, at)


@dataclass(frozen=True)
class Bound:
    """A lower bound on ε (at δ = `at`) or on δ (at ε = `at`) from one test, with its evidence:
    the test says "x′" when score > threshold (orientation 1) or score ≤ threshold (orientation
    −1); its observed rates on `samples` fresh draws per input and their Clopper–Pearson upper
    bounds."""

    target: Target
    at: float
    value: float
    method: str
    orientation: int
    threshold: float
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    samples: int
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _threshold_grid(pooled: np.ndarray) -> np.ndarray:
    """Candidate thresholds: every distinct held-out score when there are few, else a grid of
    order statistics dense in both tails (where the large-ε tests live); −∞ (everything) first."""
    values = np.unique(pooled)
    if len(values) > _MAX_THRESHOLDS:
        last = len(values) - 1
        tails = np.geomspace(1, last / 2, _MAX_THRESHOLDS // 4)
        ranks = np.concatenate([np.linspace(0, last, _MAX_THRESHOLDS // 2), tails, last - tails])
        values = values[np.unique(ranks.astype(np.int64))]
    return np.concatenate([[-np.inf], values])


def _rates(scores_x: np.ndarray, scores_xp: np.ndarray, thresholds: np.ndarray,
           orientation: int) -> tuple[np.ndarray, np.ndarray]:
    """(false positives, false negatives) of the tests "x′ when score > t" (orientation 1) or
    "x′ when score ≤ t" (orientation −1), for every threshold t."""
    above_x = len(scores_x) - np.searchsorted(np.sort(scores_x), thresholds, side="right")
    above_xp = len(scores_xp) - np.searchsorted(np.sort(scores_xp), thresholds, side="right")
    if orientation == 1:
        return above_x, len(scores_xp) - above_xp
    return len(scores_x) - above_x, above_xp


def choose_test(scores_x: np.ndarray, scores_xp: np.ndarray, target: Target, at: float,
                confidence: float) -> tuple[int, float]:
    """The (orientation, threshold) whose bound, computed on these held-out scores exactly as it
    will be on the fresh ones, is largest."""
    _, orientation, threshold = best_test(scores_x, scores_xp, target, at, confidence)
    return orientation, threshold


def best_test(scores_x: np.ndarray, scores_xp: np.ndarray, target: Target, at: float,
              confidence: float) -> tuple[float, int, float]:
    """`choose_test`'s test with the bound it gives on these held-out scores (what a choice among
    several statistics compares), as (bound, orientation, threshold)."""
    thresholds = _threshold_grid(np.concatenate([scores_x, scores_xp]))
    level = math.sqrt(confidence)
    objective = _objective(target, at)
    best = (-1.0, 1, -np.inf)
    for orientation in (1, -1):
        false_pos, false_neg = _rates(scores_x, scores_xp, thresholds, orientation)
        values = objective(clopper_pearson_upper(false_pos, len(scores_x), level),
                           clopper_pearson_upper(false_neg, len(scores_xp), level))
        j = int(np.argmax(values))
        if values[j] > best[0]:
            best = (float(values[j]), orientation, float(thresholds[j]))
    return best


def bound_test(scores_x: np.ndarray, scores_xp: np.ndarray, orientation: int, threshold: float,
               target: Target, at: float, confidence: float, method: str) -> Bound:
    """The bound one fixed test gives on fresh scores: Clopper–Pearson at √confidence per rate."""
    false_pos, false_neg = (int(v[0]) for v in _rates(scores_x, scores_xp, np.array([threshold]), orientation))
    level = math.sqrt(confidence)
    fpr_upper = float(clopper_pearson_upper(false_pos, len(scores_x), level))
    fnr_upper = float(clopper_pearson_upper(false_neg, len(scores_xp), level))
    value = float(_objective(target, at)(np.array(fpr_upper), np.array(fnr_upper)))
    return Bound(target, at, value, method, orientation, threshold, false_pos / len(scores_x),
                 false_neg / len(scores_xp), fpr_upper, fnr_upper, len(scores_x), confidence)
