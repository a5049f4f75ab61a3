"""Exact laws of one release and their privacy curves (the audit's ground truth for tightness).

A mechanism's `law` is a list of independent factors (finite PMFs, Laplace, Gaussian or
Gaussian-mixture shifts); `privacy_curve` turns T releases of that product into a privacy curve
δ(ε) by PMF → PLD with dp_accounting, discretised pessimistically.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

from dp_accounting.pld import privacy_loss_distribution as pld

from privaudit.errors import ConfigError

_VALUE_INTERVAL = 1e-4
"""PLD discretisation of the exact curves (pessimistic: the curve errs upward by at most this
much of privacy loss per composed copy)."""
_PMF_POINTS = 1_000_000
"""Finite laws are discretised finer, down to 1e-6: their privacy losses are few, and the
pessimistic rounding of a small loss is a large relative error (ternary at r = 100: δ(0) = 0.01
read 0.01005 at 1e-4). The interval is the largest total finite loss over `_PMF_POINTS`."""
_GRID_POINTS = 2_000_000
"""The most points the composed privacy-loss grid may span before the discretisation coarsens (its
width in privacy loss over the interval). Laplace noise at ε = 1 over 10⁵ releases asked for 20 GB
at 1e-4 and was killed after 4 minutes; ε = 10¹⁰ asked for 1.4 PiB. One factor of 10⁶ points takes
about 3 s to build, of 10⁷ about 25 s; ε moved by 2e-9 between 1e-4 and 2e-4 at 10³ releases.
Coarser is still sound (pessimistic)."""
_MAX_INTERVAL = 100.0
"""The coarsest discretisation an exact curve is formed at: beyond it (a composed privacy loss
spanning more than 2 × 10⁸) the curve would say little, and dp_accounting's grid arithmetic
(e^interval) overflows near 700."""
_LAPLACE_LOSS = 700.0
"""The largest privacy loss of one Laplace factor dp_accounting's curve holds: beyond about 709,
e^−L underflows and its curve is wrong (at L = 1000 it gave δ(L) = 0.5 where the truth is 0)."""
_GAUSSIAN_SHIFTS = (1e-100, 1e4)
"""The Gaussian shifts, in standard deviations, dp_accounting's curve holds: below about 1e-150 its
privacy loss overflows (a shift of 1e-200 raised OverflowError), and beyond 10⁴ the grid's span
(μ² + 25μ) passes what `_MAX_INTERVAL` resolves."""
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
        with _accountant():
            return _number(self.distribution.get_epsilon_for_delta(delta))

    def delta(self, eps: float) -> float:
        """δ(ε), at most 1: the pessimistic discretisation can round a δ near 1 above it (1 + 8e-8 for
        a Laplace loss of 100), and every pair of laws is (ε, 1)-DP."""
        if self.distribution is None:
            return 1.0
        with _accountant():
            return min(1.0, _number(self.distribution.get_delta_for_epsilon(eps)))


@contextlib.contextmanager
def _accountant() -> Iterator[None]:
    """dp_accounting failing on a law beyond its arithmetic (an IndexError at a Laplace scale of ∞,
    a RecursionError inverting a mixture's loss at 1e-9 standard deviations) as a ConfigError,
    never a curve or a number."""
    try:
        yield
    except (ArithmeticError, RecursionError, ValueError, IndexError) as error:
        raise ConfigError(f"no exact privacy curve: dp_accounting fails on this law ({type(error).__name__}: "
                          f"{error})") from None


def _number(value: float) -> float:
    if math.isnan(value):
        raise ValueError("its curve holds NaN")
    return float(value)


def _singular(factor: Factor) -> bool:
    """Whether a finite factor's two laws have disjoint supports (TV 1)."""
    if not isinstance(factor, PmfFactor):
        return False
    upper = dict(factor.upper)
    return not any(p > 0 and upper.get(outcome, 0) > 0 for outcome, p in factor.lower)


def _finite_losses(factor: PmfFactor) -> list[float]:
    lower, upper = dict(factor.lower), dict(factor.upper)
    return [math.log(upper[o] / lower[o]) for o in lower if lower[o] > 0 and upper.get(o, 0) > 0]


def _width(factor: Factor) -> float:
    """How wide a span of privacy loss one copy of `factor` spreads dp_accounting's grid over: a
    finite law's losses and a Laplace shift's lie in [−L, L]; a Gaussian shift of μ standard
    deviations (the largest of a mixture's) spans about μ² + 20μ (its loss is μ²/2 ± μ·z with the
    tails cut at z ≈ 10: measured 20.5 at μ = 1, 295 at μ = 10, 11,949 at μ = 100)."""
    if isinstance(factor, PmfFactor):
        return 2 * max(map(abs, _finite_losses(factor)), default=0.0)
    if isinstance(factor, LaplaceFactor):
        return 2 * factor.shift / factor.scale
    shift = factor.shift if isinstance(factor, GaussianFactor) else max(map(abs, factor.shifts), default=0.0)
    mu = shift / factor.std
    return mu * mu + 25 * mu


def _interval(factors: Sequence[Factor], releases: int) -> float:
    """The PLD discretisation: `_MIXTURE_INTERVAL` with a mixture, finer for finite laws
    (`_PMF_POINTS`), `_VALUE_INTERVAL` otherwise; coarser where the composed grid would span more
    than `_GRID_POINTS` (a large privacy loss, many releases), so the work stays bounded and the
    curve sound."""
    span = sum(factor.count * releases * _width(factor) for factor in factors)
    if any(isinstance(factor, GaussianMixtureFactor) for factor in factors):
        base = _MIXTURE_INTERVAL
    elif factors and all(isinstance(factor, PmfFactor) for factor in factors):
        reach = sum(factor.count * releases * max(map(abs, _finite_losses(factor)), default=0.0) for factor in factors)
        base = min(_VALUE_INTERVAL, max(1e-6, reach / _PMF_POINTS))
    else:
        base = _VALUE_INTERVAL
    return max(base, span / _GRID_POINTS)


def _factor_problem(factor: Factor) -> str | None:
    """Why dp_accounting cannot form `factor`'s exact curve, or None."""
    if isinstance(factor, PmfFactor):
        return None
    if isinstance(factor, LaplaceFactor):
        if not (0 < factor.scale < math.inf and math.isfinite(factor.shift)):
            return f"its Laplace noise scale is {factor.scale:.4g} (for a shift of {factor.shift:.4g}), not a finite number > 0"
        loss = factor.shift / factor.scale
        return None if loss <= _LAPLACE_LOSS else (
            f"one release's privacy loss {loss:.4g} (shift over Laplace scale) exceeds {_LAPLACE_LOSS:g}, beyond which "
            "the exact accountant's e^−loss underflows")
    shift = factor.shift if isinstance(factor, GaussianFactor) else max(map(abs, factor.shifts), default=0.0)
    if not (0 < factor.std < math.inf and math.isfinite(shift)):
        return f"its Gaussian noise std is {factor.std:.4g} (for a shift of {shift:.4g}), not a finite number > 0"
    low, high = _GAUSSIAN_SHIFTS
    mu = shift / factor.std
    return None if shift == 0 or low <= mu <= high else (
        f"one release moves by {mu:.4g} standard deviations of its Gaussian noise, outside the {low:g} to {high:g} "
        "the exact accountant resolves")


def law_problem(factors: Sequence[Factor], releases: int) -> str | None:
    """Why `privacy_curve` cannot form the exact curve of `releases` releases of `factors` (a scale
    that is not a number, a privacy loss beyond the accountant's arithmetic, a composed loss too
    wide for `_MAX_INTERVAL`), in one phrase; None when it can."""
    for factor in factors:
        problem = _factor_problem(factor)
        if problem:
            return problem
    interval = _interval(factors, releases)
    if not interval <= _MAX_INTERVAL:
        return (f"the composed privacy loss of {releases:,} release(s) spans {interval * _GRID_POINTS:.4g}, more than "
                f"the exact accountant resolves ({_MAX_INTERVAL * _GRID_POINTS:.4g})")
    return None


def privacy_curve(factors: Sequence[Factor], releases: int) -> PrivacyCurve:
    """The exact privacy curve of `releases` independent releases whose single-release law is the
    product of `factors`: each factor's PLD (dp_accounting: PMF → PLD, or the Laplace, Gaussian
    and mixture-of-Gaussians mechanisms' own PLDs), self-composed count × releases times, then
    composed. Discretised pessimistically (`_interval`), so it errs upward by at most the
    discretisation of privacy loss per composed copy; otherwise exact. ConfigError (`law_problem`)
    where the accountant cannot form it: never a curve its arithmetic got wrong."""
    return _curve(tuple(factors), releases)


@functools.lru_cache(maxsize=8)
def _curve(factors: tuple[Factor, ...], releases: int) -> PrivacyCurve:
    """`privacy_curve`, kept for the few curves an audit asks for more than once (the claim, the
    sound bound and the parameters' check each form the worst pair's)."""
    if any(_singular(factor) for factor in factors):
        return PrivacyCurve(None, "mutually singular laws: δ = 1 at every ε")
    problem = law_problem(factors, releases)
    if problem:
        raise ConfigError(f"no exact privacy curve: {problem}")
    interval = _interval(factors, releases)
    curve = pld.identity(value_discretization_interval=interval)
    kinds = set()
    with _accountant():
        for factor in factors:
            copies = factor.count * releases
            single = _factor_pld(factor, interval)
            curve = curve.compose(single if copies == 1 else single.self_compose(copies))
            kinds.add(type(factor).__name__.removesuffix("Factor"))
    method = "dp_accounting PLD of " + (", ".join(sorted(kinds)) if kinds else "identical laws")
    return PrivacyCurve(curve, f"{method}, {releases} release(s), discretisation {interval:g}")
