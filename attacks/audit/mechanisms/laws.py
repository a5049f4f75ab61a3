"""Exact laws of one release and their privacy curves (the audit's ground truth for tightness).

A mechanism's `law` is a list of independent factors (finite PMFs, Laplace, Gaussian or
Gaussian-mixture shifts); `privacy_curve` turns T releases of that product into a privacy curve
δ(ε) by PMF → PLD with dp_accounting, discretised pessimistically.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from dp_accounting.pld import privacy_loss_distribution as pld

_VALUE_INTERVAL = 1e-4
"""PLD discretisation of the exact curves (pessimistic: the curve errs upward by at most this
much of privacy loss per composed copy)."""
_PMF_POINTS = 1_000_000
"""Finite laws are discretised finer, down to 1e-6: their privacy losses are few, and the
pessimistic rounding of a small loss is a large relative error (ternary at r = 100: δ(0) = 0.01
read 0.01005 at 1e-4). The interval is the largest total finite loss over `_PMF_POINTS`."""
_MIXTURE_INTERVAL = 1e-2
"""The coarser discretisation of curves with a Gaussian-mixture factor: dp_accounting inverts the
mixture's privacy loss point by point, ~1 s at 1e-2 and ~16 s at 1e-3 (seed 002's round: ε at
δ = 1e-5 moved by 3e-6 between the two)."""


@dataclass(frozen=True)
class PmfFactor:
    """One coordinate of one release with a finite law: outcome → probability under x (`lower`)
    and under x′ (`upper`); `count` independent copies."""

    lower: tuple[tuple[Hashable, float], ...]
    upper: tuple[tuple[Hashable, float], ...]
    count: int = 1


@dataclass(frozen=True)
class LaplaceFactor:
    """Laplace noise of scale `scale` on a coordinate whose mean moves by `shift`."""

    scale: float
    shift: float
    count: int = 1


@dataclass(frozen=True)
class GaussianFactor:
    """Gaussian noise of standard deviation `std` on a direction whose mean moves by `shift`."""

    std: float
    shift: float
    count: int = 1


@dataclass(frozen=True)
class GaussianMixtureFactor:
    """N(0, std²) against Σ_i probs_i N(shifts_i, std²): a sampled Gaussian release."""

    std: float
    shifts: tuple[float, ...]
    probs: tuple[float, ...]
    count: int = 1


Factor = PmfFactor | LaplaceFactor | GaussianFactor | GaussianMixtureFactor


def _log_pmf(law: tuple[tuple[Hashable, float], ...]) -> dict[Hashable, float]:
    return {outcome: math.log(p) for outcome, p in law if p > 0}


def _factor_pld(factor: Factor, interval: float) -> pld.PrivacyLossDistribution:
    if isinstance(factor, PmfFactor):
        return pld.from_two_probability_mass_functions(_log_pmf(factor.lower), _log_pmf(factor.upper),
                                                       value_discretization_interval=interval, symmetric=False)
    if isinstance(factor, LaplaceFactor):
        return pld.from_laplace_mechanism(factor.scale, sensitivity=factor.shift,
                                          value_discretization_interval=interval)
    if isinstance(factor, GaussianFactor):
        return pld.from_gaussian_mechanism(factor.std, sensitivity=factor.shift, value_discretization_interval=interval)
    return pld.from_mixture_gaussian_mechanism(factor.std, list(factor.shifts), list(factor.probs),
                                               value_discretization_interval=interval)


@dataclass(frozen=True)
class PrivacyCurve:
    """The privacy curve δ(ε) of a pair, both directions (M(x) vs M(x′) and back), from a PLD;
    `distribution` None means mutually singular laws (δ = 1 at every ε), which a PLD cannot hold."""

    distribution: pld.PrivacyLossDistribution | None
    method: str

    def epsilon(self, delta: float) -> float:
        if self.distribution is None:
            return math.inf
        return float(self.distribution.get_epsilon_for_delta(delta))

    def delta(self, eps: float) -> float:
        if self.distribution is None:
            return 1.0
        return float(self.distribution.get_delta_for_epsilon(eps))


def _singular(factor: Factor) -> bool:
    """Whether a finite factor's two laws have disjoint supports (TV 1)."""
    if not isinstance(factor, PmfFactor):
        return False
    upper = dict(factor.upper)
    return not any(p > 0 and upper.get(outcome, 0) > 0 for outcome, p in factor.lower)


def _finite_losses(factor: PmfFactor) -> list[float]:
    lower, upper = dict(factor.lower), dict(factor.upper)
    return [math.log(upper[o] / lower[o]) for o in lower if lower[o] > 0 and upper.get(o, 0) > 0]


def _interval(factors: Sequence[Factor], releases: int) -> float:
    """The PLD discretisation: `_MIXTURE_INTERVAL` with a mixture, finer for finite laws
    (`_PMF_POINTS`), `_VALUE_INTERVAL` otherwise."""
    if any(isinstance(factor, GaussianMixtureFactor) for factor in factors):
        return _MIXTURE_INTERVAL
    if factors and all(isinstance(factor, PmfFactor) for factor in factors):
        reach = sum(factor.count * releases * max(map(abs, _finite_losses(factor)), default=0.0) for factor in factors)
        return min(_VALUE_INTERVAL, max(1e-6, reach / _PMF_POINTS))
    return _VALUE_INTERVAL


def privacy_curve(factors: Sequence[Factor], releases: int) -> PrivacyCurve:
    """The exact privacy curve of `releases` independent releases whose single-release law is the
    product of `factors`: each factor's PLD (dp_accounting: PMF → PLD, or the Laplace, Gaussian
    and mixture-of-Gaussians mechanisms' own PLDs), self-composed count × releases times, then
    composed. Discretised pessimistically (`_interval`), so it errs upward by at most the
    discretisation of privacy loss per composed copy; otherwise exact."""
    if any(_singular(factor) for factor in factors):
        return PrivacyCurve(None, "mutually singular laws: δ = 1 at every ε")
    interval = _interval(factors, releases)
    curve = pld.identity(value_discretization_interval=interval)
    kinds = set()
    for factor in factors:
        copies = factor.count * releases
        single = _factor_pld(factor, interval)
        curve = curve.compose(single if copies == 1 else single.self_compose(copies))
        kinds.add(type(factor).__name__.removesuffix("Factor"))
    method = "dp_accounting PLD of " + (", ".join(sorted(kinds)) if kinds else "identical laws")
    return PrivacyCurve(curve, f"{method}, {releases} release(s), discretisation {interval:g}")
