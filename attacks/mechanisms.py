"""Mechanisms as samplers with known parameters, for the empirical DP audit (`attacks/audit.py`).

A mechanism M takes an input vector x ∈ R^dim and releases one random output per call; the audit
draws M(x) and M(x′) many times for a neighbouring pair and bounds how well any test can tell
them apart. Each mechanism here says, beside its vectorised sampler:

* `statistic`: a per-release summary of the output that the audit thresholds (a sufficient
  statistic for the pair where one is known — the log-likelihood ratio of a location family, the
  level counts of a quantizer); summaries of T releases add up, because releases are independent.
  `finite` says the summary takes finitely many values (the audit then estimates the
  likelihood-ratio event on it). Without a statistic the audit thresholds the output itself in
  dimension 1 and learns a classifier (DP-Sniper) otherwise.
* `candidates`: neighbouring pairs at distance ≤ 1 under the ℓ1, ℓ2 or ℓ∞ adjacency, boundary
  pairs first (the worst case where it is known), which the neighbour search scores.
* `law`: the exact law of one release of M(x) against M(x′) as independent factors (finite PMFs,
  Laplace, Gaussian or Gaussian-mixture shifts), whose privacy curve `privacy_curve` builds by
  PMF → PLD with dp_accounting; the ground truth for tightness.
* `claim`: the claim its paper or textbook makes (`privaudit.accounting.Claim`), with the ε and δ
  it asserts for this audit's adjacency and horizon, or why it cannot be evaluated.
* `sound`: a sound (ε, δ) over every pair of the adjacency, from `worst_case_delta`, a closed form
  or a dp_accounting accountant.

Inputs are in the unit of the mechanism's sensitivity: "‖x − x′‖_p ≤ 1" is the adjacency of
the claim (one record replaced, for the defenses' releases). Registered mechanisms (`MECHANISMS`):

    laplace              Laplace(1/ε) noise per coordinate (Dwork & Roth 2014, Thm 3.6)
    gaussian             N(0, σ²) noise per coordinate (Dwork & Roth 2014, Thm A.1)
    rr                   randomized response on bits, each kept w.p. e^ε/(1 + e^ε) (Warner 1965)
    onebit               1-bit stochastic quantizer: ±r, P(+r) = (x + r)/(2r); no paper claims DP for it
    ternary              seed 004's ternary quantizer (Definition 2; Theorem 3, Remarks 6 and 10)
    dpdl_cross_gradient  seed 000's cross-gradient (Σ clip(g) + N(0, σ²C²))/B, one record replaced
    lt_admm_round        seed 002's round: τ smooth-clipped noisy steps on batches drawn from m_i
    tvss_state           seed 003 Alg. 1's first noisy state x_{i,1} + Lap(σ_1)
    tvss_gradient        seed 003 Alg. 2's noisy gradient g_i^k + Lap(σ_k)

Nothing here imports torch at module level (the ternary sampler and the defenses' formulas are
imported where used), so the audit statistics load without it.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy.stats import binom

from privaudit.accounting import Claim, epsilon
from privaudit.errors import ConfigError

NORMS: dict[str, float] = {"l1": 1.0, "l2": 2.0, "linf": math.inf}
"""The adjacencies an audit can use: ‖x − x′‖_p ≤ 1."""

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


def norm_name(norm: float) -> str:
    return {1.0: "ℓ1", 2.0: "ℓ2", math.inf: "ℓ∞"}[norm]


@dataclass(frozen=True)
class Pair:
    """Two neighbouring inputs x and x′ of a mechanism, with a short description."""

    x: np.ndarray
    x_prime: np.ndarray
    label: str

    def distance(self, norm: float) -> float:
        return float(np.linalg.norm(self.x_prime - self.x, ord=norm))

    def same_as(self, other: Pair) -> bool:
        return np.array_equal(self.x, other.x) and np.array_equal(self.x_prime, other.x_prime)

    def as_dict(self) -> dict[str, Any]:
        return {"x": self.x.tolist(), "x_prime": self.x_prime.tolist(), "label": self.label}


@dataclass(frozen=True)
class Setting:
    """What an audit fixes besides the mechanism: the adjacency ‖x − x′‖_norm ≤ 1, the input
    dimension, the number of releases of the same input the attacker sees together, and the δ at
    which ε is reported (also the δ of claims that take δ as an input)."""

    norm: float
    dim: int
    releases: int
    delta: float


# ---------------------------------------------------------------------------------------------
# Exact laws and their privacy curves


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


# ---------------------------------------------------------------------------------------------
# Claims and sound bounds


@dataclass(frozen=True)
class MechanismClaim:
    """A claim made for a mechanism, as the audit tests it.

    `claim` is the record `privaudit claims` prints; `statement` names what is audited. The
    claim asserts (`eps`, `delta`)-DP for inputs with ‖x − x′‖_`norm` ≤ 1 over the audit's
    horizon. `unevaluable` says why no verdict can be given (a constant the paper never gives);
    `reading`, when set, is an (ε, δ, how) that the claim would assert under a stated reading,
    reported beside the 'not evaluable' verdict.
    """

    claim: Claim
    statement: str
    eps: float | None
    delta: float | None
    norm: float
    unevaluable: str | None = None
    reading: tuple[float, float, str] | None = None


@dataclass(frozen=True)
class Sound:
    """A sound bound over every pair of the adjacency: ε at the setting's δ and δ at ε = `at`
    (None where the method gives none). `exact` when some pair attains it."""

    eps: float | None
    delta: float | None
    at: float
    exact: bool
    method: str


def _flat(delta_sound: float, setting: Setting, at: float, exact: bool, method: str) -> Sound:
    """The sound bound of a (0, δ_s) mechanism whose curve is flat: δ(ε) = δ_s at every ε ≥ 0."""
    eps = 0.0 if setting.delta >= delta_sound else math.inf
    return Sound(eps, delta_sound, at, exact, method)


def _from_curve(curve: PrivacyCurve, setting: Setting, at: float, exact: bool, method: str) -> Sound:
    return Sound(curve.epsilon(setting.delta), curve.delta(at), at, exact, f"{method} ({curve.method})")


def _pure(eps_pure: float, setting: Setting, at: float, method: str) -> Sound:
    """A pure ε bound: ε at every δ, and δ = 0 at any ε ≥ it (nothing known below it)."""
    return Sound(eps_pure, 0.0 if at >= eps_pure else None, at, False, method)


def l1_reach(norm: float, dim: int) -> float:
    """sup ‖v‖₁ over ‖v‖_norm ≤ 1 in dimension dim (Hölder): 1, √dim, dim."""
    return dim ** (1.0 - 1.0 / norm) if math.isfinite(norm) else float(dim)


def l2_reach(norm: float, dim: int) -> float:
    """sup ‖v‖₂ over ‖v‖_norm ≤ 1 in dimension dim: 1 for ℓ1 and ℓ2, √dim for ℓ∞."""
    return math.sqrt(dim) if norm == math.inf else 1.0


# ---------------------------------------------------------------------------------------------
# The mechanism interface and its registry


class MechanismParams(BaseModel):
    """Base of every mechanism's parameters; unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Mechanism(ABC):
    """A release with known parameters; subclasses register themselves in `MECHANISMS`."""

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type[MechanismParams]]
    finite: ClassVar[bool] = False
    primary: ClassVar[Literal["eps", "delta"]] = "eps"
    """Which bound the neighbour search maximises: ε at δ, or δ at the claim's ε (flat curves)."""

    def __init__(self, params: MechanismParams) -> None:
        self.params = params

    @abstractmethod
    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` independent releases of M(x): shape [n, dim]."""

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray | None:
        """A per-release summary [m, k] of outputs [m, dim] that the audit tests on, or None."""
        return None

    @abstractmethod
    def candidates(self, norm: float, dim: int) -> list[Pair]:
        """Neighbouring pairs at ‖x − x′‖_norm ≤ 1, the most distinguishable first where known."""

    @abstractmethod
    def law(self, pair: Pair) -> list[Factor] | None:
        """The exact law of one release of M(x) against M(x′), or None when none is available."""

    def claim(self, setting: Setting) -> MechanismClaim | None:
        """The claim stated for this mechanism, evaluated for the setting; None when none is."""
        return None

    @abstractmethod
    def sound(self, setting: Setting, at: float) -> Sound:
        """A sound bound over the adjacency, with δ at ε = `at`."""


MECHANISMS: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: make a mechanism available to `privaudit audit` under `cls.name`."""
    MECHANISMS[cls.name] = cls
    return cls


def build(name: str, params: dict[str, Any] | None = None) -> Mechanism:
    """The mechanism `name` with `params` (strings are converted); ConfigError in one line."""
    if name not in MECHANISMS:
        raise ConfigError(f"unknown mechanism '{name}' (choose from {', '.join(MECHANISMS)})")
    cls = MECHANISMS[name]
    try:
        return cls(cls.Params.model_validate(params or {}))
    except ValidationError as error:
        first = error.errors()[0]
        where = "".join(f"--param {part}: " for part in first["loc"][:1])
        if first["type"] == "extra_forbidden":
            what = f"unknown parameter (choose from {', '.join(cls.Params.model_fields)})"
        elif first["type"] == "value_error":
            what = str(first["ctx"]["error"])
        else:
            what = f"{first['msg']} (got {first.get('input')!r})"
        raise ConfigError(f"{name}: {where}{what}") from None


# ---------------------------------------------------------------------------------------------
# Shared pieces


def _unit(dim: int, k: int = 0) -> np.ndarray:
    vector = np.zeros(dim)
    vector[k] = 1.0
    return vector


def _location_pairs(norm: float, dim: int, symmetric: bool = False) -> list[Pair]:
    """Boundary shifts of a location mechanism from x = 0: one coordinate by 1 (the ℓ1 vertex),
    every coordinate by 1/√dim (ℓ2) or by 1 (ℓ∞); with `symmetric`, also x = −v/2, x′ = v/2."""
    zero = np.zeros(dim)
    shifts = [(_unit(dim), "one coordinate moved by 1")]
    if dim > 1 and norm == 2:
        shifts.append((np.full(dim, dim ** -0.5), "every coordinate moved by 1/√dim"))
    if dim > 1 and norm == math.inf:
        shifts.append((np.ones(dim), "every coordinate moved by 1"))
    pairs = [Pair(zero, v, f"x = 0, x′: {text}") for v, text in shifts]
    if symmetric:
        pairs += [Pair(-v / 2, v / 2, f"x = −v/2, x′ = v/2, v: {text}") for v, text in shifts]
    return pairs


ROUNDING_DECIMALS = 9
"""Statistics that fold the output (|y − x| − |y − x′|) are rounded to this many decimals: in
floating point, y = x + noise and y = x′ + noise lie on different lattices of doubles, and a
folded statistic exposes those last bits (Mironov 2012) — a real weakness of the float sampler,
which would make the audit measure the implementation's low bits instead of the mechanism."""


def _laplace_log_ratio(outputs: np.ndarray, mean: np.ndarray, mean_prime: np.ndarray, scale: float) -> np.ndarray:
    """log p(y | x′) − log p(y | x) of independent Laplace(scale) coordinates: the exact
    log-likelihood ratio, a sufficient statistic for the pair (rounded: `ROUNDING_DECIMALS`)."""
    moved = mean != mean_prime
    y = outputs[:, moved]
    ratio = (np.abs(y - mean[moved]) - np.abs(y - mean_prime[moved])).sum(axis=1) / scale
    return np.round(ratio, ROUNDING_DECIMALS)[:, None]


def _projection(outputs: np.ndarray, mean: np.ndarray, mean_prime: np.ndarray) -> np.ndarray:
    """⟨y − mean, mean′ − mean⟩: for spherical Gaussian noise, an increasing function of the
    log-likelihood ratio, hence a sufficient statistic for the pair."""
    return ((outputs - mean) @ (mean_prime - mean))[:, None]


def _laplace_factors(scale: float, shift: np.ndarray) -> list[Factor]:
    """Independent Laplace coordinates moved by |shift_c|; equal shifts are grouped."""
    moved = np.abs(shift[shift != 0])
    values, counts = np.unique(moved, return_counts=True)
    return [LaplaceFactor(scale, float(v), int(c)) for v, c in zip(values, counts)]


def _group(factors: list[PmfFactor]) -> list[Factor]:
    """Merge identical PMF factors into one with a count (the composition is then a self-composition)."""
    merged: dict[tuple, int] = {}
    for factor in factors:
        key = (factor.lower, factor.upper)
        merged[key] = merged.get(key, 0) + factor.count
    return [PmfFactor(lower, upper, count) for (lower, upper), count in merged.items()]


def _dedupe(pairs: list[Pair]) -> list[Pair]:
    kept: list[Pair] = []
    for pair in pairs:
        if not any(pair.same_as(other) for other in kept):
            kept.append(pair)
    return kept


def _within(pairs: list[Pair], norm: float, bound: float | None = None) -> list[Pair]:
    """The pairs at distance ≤ 1 under `norm` whose coordinates lie in [−bound, bound]."""
    return [p for p in pairs if p.distance(norm) <= 1 + 1e-12
            and (bound is None or max(np.abs(p.x).max(), np.abs(p.x_prime).max()) <= bound)]


def _horizon_text(releases: int) -> str:
    return "one release" if releases == 1 else f"{releases} releases of the same input"


# ---------------------------------------------------------------------------------------------
# Textbook mechanisms


def _pure_claim(mechanism: Mechanism, setting: Setting, adjacency: str, equation: str, reading: str) -> MechanismClaim:
    """The textbook claim of a pure ε-DP mechanism with parameter `eps`: Tε over T releases
    (basic composition, Dwork & Roth 2014 Thm 3.16), beside the mechanism's sound ε."""
    eps = mechanism.params.eps
    claimed = setting.releases * eps
    sound = mechanism.sound(setting, claimed)
    record = Claim(
        defense=mechanism.name, notion="ε-DP (pure)", adjacency=adjacency, eps_claimed=claimed, eps_stated=None,
        eps_sound=sound.eps, delta=0.0, horizon=setting.releases,
        equation=f"{equation}; ε = {eps:g}, T = {setting.releases}", sound_method=sound.method,
    )
    return MechanismClaim(record, reading, claimed, 0.0, 1.0)


class LaplaceParams(MechanismParams):
    eps: float = Field(1.0, gt=0, description="ε for ℓ1 sensitivity 1: noise scale b = 1/ε per coordinate")


@register
class Laplace(Mechanism):
    name = "laplace"
    title = "Laplace mechanism"
    Params = LaplaceParams

    @property
    def scale(self) -> float:
        return 1.0 / self.params.eps

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.laplace(0.0, self.scale, size=(n, len(x)))

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        return _laplace_log_ratio(outputs, pair.x, pair.x_prime, self.scale)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        return _location_pairs(norm, dim)

    def law(self, pair: Pair) -> list[Factor]:
        return _laplace_factors(self.scale, pair.x_prime - pair.x)

    def claim(self, setting: Setting) -> MechanismClaim:
        return _pure_claim(self, setting, "‖x − x′‖₁ ≤ 1 (ℓ1 sensitivity 1)",
                           "Dwork & Roth 2014, Thm 3.6: Laplace noise of scale Δ₁/ε is ε-DP; Thm 3.16: "
                           "T releases are Tε-DP", "Thm 3.6 with basic composition")

    def sound(self, setting: Setting, at: float) -> Sound:
        reach = l1_reach(setting.norm, setting.dim)
        pure = setting.releases * reach * self.params.eps
        return _pure(pure, setting, at, f"pure ε = T·Δ₁·ε with Δ₁ = sup ‖x − x′‖₁ = {reach:.4g} under "
                                        f"{norm_name(setting.norm)} ≤ 1 in dimension {setting.dim}")


class GaussianParams(MechanismParams):
    sigma: float = Field(5.0, gt=0, description="noise standard deviation per coordinate (ℓ2 sensitivity 1); "
                         "the default 5 makes Thm A.1's ε ≈ 0.97 < 1 at δ = 1e-5")


@register
class Gaussian(Mechanism):
    name = "gaussian"
    title = "Gaussian mechanism"
    Params = GaussianParams

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + self.params.sigma * rng.standard_normal((n, len(x)))

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        return _projection(outputs, pair.x, pair.x_prime)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        return _location_pairs(norm, dim)

    def law(self, pair: Pair) -> list[Factor]:
        shift = pair.distance(2)
        return [GaussianFactor(self.params.sigma, shift)] if shift > 0 else []

    def claim(self, setting: Setting) -> MechanismClaim:
        """Dwork & Roth 2014, Thm A.1: σ ≥ cΔ₂/ε with c² > 2 ln(1.25/δ) gives (ε, δ)-DP for ε < 1,
        i.e. ε = √(2 ln(1.25/δ)) Δ₂/σ. T releases of the same input are one release with noise
        σ/√T (exactly: the mean of T Gaussian releases is sufficient), to which the theorem applies."""
        sigma, delta, releases = self.params.sigma, setting.delta, setting.releases
        claimed = math.sqrt(2 * math.log(1.25 / delta)) * math.sqrt(releases) / sigma if delta > 0 else math.inf
        sound = self.sound(setting, claimed if claimed < math.inf else 0.0)
        outside = None if claimed < 1 else (
            f"Thm A.1 covers ε < 1 only; at σ = {sigma:g}, δ = {delta:g} and T = {releases} its formula gives "
            f"ε = {claimed:.4g}, where the theorem claims nothing")
        record = Claim(
            defense=self.name, notion="(ε, δ)-DP", adjacency="‖x − x′‖₂ ≤ 1 (ℓ2 sensitivity 1)",
            eps_claimed=claimed, eps_stated=None, eps_sound=sound.eps, delta=delta, horizon=releases,
            equation="Dwork & Roth 2014, Thm A.1: ε = √(2 ln(1.25/δ)) Δ₂ √T / σ, for ε < 1 (T releases of "
                     "the same input = one release with noise σ/√T)",
            sound_method=sound.method,
        )
        return MechanismClaim(record, "Thm A.1", claimed if outside is None else None, delta, 2.0,
                              unevaluable=outside)

    def sound(self, setting: Setting, at: float) -> Sound:
        reach = l2_reach(setting.norm, setting.dim)
        curve = privacy_curve([GaussianFactor(self.params.sigma, reach)], setting.releases)
        return _from_curve(curve, setting, at, True, f"Gaussian privacy curve at ℓ2 sensitivity {reach:.4g} "
                           f"(sup ‖x − x′‖₂ under {norm_name(setting.norm)} ≤ 1), attained")


class ResponseParams(MechanismParams):
    eps: float = Field(1.0, gt=0, description="each bit is kept with probability e^ε/(1 + e^ε)")


@register
class RandomizedResponse(Mechanism):
    """Inputs are bits x ∈ {0, 1}^dim; each is released flipped with probability 1/(1 + e^ε)."""

    name = "rr"
    title = "randomized response"
    Params = ResponseParams
    finite = True

    @property
    def flip(self) -> float:
        return 1.0 / (1.0 + math.exp(self.params.eps))

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        flips = rng.random((n, len(x))) < self.flip
        return np.where(flips, 1.0 - x, x)

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        """How many of the bits where x and x′ differ are released as in x′ (sufficient: every such
        bit has the same law)."""
        moved = pair.x != pair.x_prime
        return (outputs[:, moved] == pair.x_prime[moved]).sum(axis=1, keepdims=True)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        zero = np.zeros(dim)
        pairs = [Pair(zero, _unit(dim), "one bit flipped")]
        if dim > 1 and norm == math.inf:
            pairs.append(Pair(zero, np.ones(dim), "every bit flipped"))
        return pairs

    def _bit(self) -> PmfFactor:
        keep = 1.0 - self.flip
        return PmfFactor(((0, keep), (1, self.flip)), ((0, self.flip), (1, keep)))

    def law(self, pair: Pair) -> list[Factor]:
        moved = int((pair.x != pair.x_prime).sum())
        bit = self._bit()
        return [PmfFactor(bit.lower, bit.upper, moved)] if moved else []

    def claim(self, setting: Setting) -> MechanismClaim:
        return _pure_claim(self, setting, "bit vectors differing in one bit (‖x − x′‖₁ ≤ 1)",
                           "Warner 1965; Dwork & Roth 2014 §3.2: keeping a bit with probability e^ε/(1 + e^ε) "
                           "is ε-DP; T releases are Tε-DP (Thm 3.16)", "randomized response with basic composition")

    def sound(self, setting: Setting, at: float) -> Sound:
        bits = setting.dim if setting.norm == math.inf else 1
        bit = self._bit()
        curve = privacy_curve([PmfFactor(bit.lower, bit.upper, bits)], setting.releases)
        return _from_curve(curve, setting, at, True, f"exact curve of {bits} flipped bit(s), the most "
                           f"{norm_name(setting.norm)} ≤ 1 allows between bit vectors")


# ---------------------------------------------------------------------------------------------
# Quantizers


class OneBitParams(MechanismParams):
    r: float = Field(4.0, gt=0, description="levels ±r; inputs must satisfy |x_c| ≤ r")


@register
class OneBit(Mechanism):
    """The unbiased 1-bit stochastic quantizer: r·(2b − 1) with b ~ Bernoulli((x + r)/(2r)).

    Its law is the ternary quantizer's with threshold 2r seen from −r: P(+r) moves by |Δ|/(2r),
    and at x = −r the output is the point mass −r. So `worst_case_delta(2r, …)` is its exact
    worst-case δ, attained at x = −r·1 against x′ = x + the ternary worst-case shift. No seed paper
    claims DP for it: it is here as a finite-output contrast with an exactly known curve.
    """

    name = "onebit"
    title = "1-bit stochastic quantizer"
    Params = OneBitParams
    finite = True
    primary = "delta"

    def _up(self, x: np.ndarray) -> np.ndarray:
        return (x + self.params.r) / (2 * self.params.r)

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        if np.abs(x).max() > self.params.r:
            raise ConfigError(f"onebit: inputs must lie in [−r, r] = [−{self.params.r:g}, {self.params.r:g}]")
        return np.where(rng.random((n, len(x))) < self._up(x), self.params.r, -self.params.r)

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        """How many coordinates where x and x′ differ are released at the level x′ favours."""
        direction = np.sign(pair.x_prime - pair.x)
        moved = direction != 0
        return (outputs[:, moved] * direction[moved] > 0).sum(axis=1, keepdims=True)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        from privaudit.quantizers import worst_case_delta

        r = self.params.r
        worst = worst_case_delta(2 * r, dim=dim, norm=norm)
        pairs = []
        if worst.exact:
            x, x_prime = worst.pair(dim)
            pairs.append(Pair(x - r, x_prime - r, "x = −r·1 (a point mass), x′ = x + the worst-case shift"))
        step = min(1.0, r)
        pairs += [Pair(np.zeros(dim), step * _unit(dim), "x = 0, x′ = e₁"),
                  Pair(-step / 2 * _unit(dim), step / 2 * _unit(dim), "x = −e₁/2, x′ = e₁/2")]
        return _dedupe(_within(pairs, norm, r))

    def law(self, pair: Pair) -> list[Factor]:
        r, factors = self.params.r, []
        for low, high in zip(self._up(pair.x), self._up(pair.x_prime)):
            if low != high:
                factors.append(PmfFactor(((r, low), (-r, 1 - low)), ((r, high), (-r, 1 - high))))
        return _group(factors)

    def sound(self, setting: Setting, at: float) -> Sound:
        from privaudit.quantizers import worst_case_delta

        worst = worst_case_delta(2 * self.params.r, dim=setting.dim, norm=setting.norm, draws=setting.releases)
        return _flat(worst.delta, setting, at, worst.exact,
                     "worst_case_delta with threshold 2r: flat (0, δ) curve" + ("" if worst.exact else ", a bound"))


class TernaryParams(MechanismParams):
    r: float = Field(4.0, gt=0, description="threshold r: levels {−r, 0, r}; Theorem 3's δ = 1/r")


@register
class Ternary(Mechanism):
    """Seed 004's ternary quantizer (Definition 2), sampled by `privaudit.quantizers.ternary`.

    The claims audited: Theorem 3, (0, 1/r)-DP per iteration for ‖x − y‖₁ ≤ 1; Remark 6, the
    same for any ℓp norm; Remark 10, a budget that grows "roughly" like √T over T iterations. The
    last gives no constant, so it is not evaluable; the reading δ_T = √T/r (constant 1, which
    gives Theorem 3 at T = 1) is evaluated beside it. The exact worst case is `worst_case_delta`.
    """

    name = "ternary"
    title = "ternary quantizer (Wang & Başar, seed 004)"
    Params = TernaryParams
    finite = True
    primary = "delta"

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from privaudit.quantizers import ternary

        generator = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
        source = torch.as_tensor(x, dtype=torch.float64).expand(n, -1)
        return ternary(source, self.params.r, generator).numpy()

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        """Over the coordinates where x and x′ differ: how many are sent at the non-zero level on
        the side x′ moved to, and how many on the other side (sufficient for the candidates)."""
        direction = np.sign(pair.x_prime - pair.x)
        moved = direction != 0
        signed = outputs[:, moved] * direction[moved]
        return np.stack([(signed > 0).sum(axis=1), (signed < 0).sum(axis=1)], axis=1)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        from privaudit.quantizers import worst_case_delta

        r = self.params.r
        worst = worst_case_delta(r, dim=dim, norm=norm)
        pairs = []
        if worst.exact:
            x, x_prime = worst.pair(dim)
            pairs.append(Pair(x, x_prime, f"worst case: x = 0, x′ moved by {worst.shift:.4g} on "
                                          f"{worst.coordinates} coordinate(s)"))
        step = min(1.0, r)
        pairs += [Pair(np.zeros(dim), step * _unit(dim), "x = 0, x′ = e₁"),
                  Pair(-step / 2 * _unit(dim), step / 2 * _unit(dim), "signs differ: x = −e₁/2, x′ = e₁/2"),
                  Pair(r * _unit(dim), (r - step) * _unit(dim), "at the top: x = r·e₁, x′ = (r − 1)·e₁")]
        return _dedupe(_within(pairs, norm, r))

    def law(self, pair: Pair) -> list[Factor]:
        from privaudit.quantizers import ternary_pmf

        levels = tuple(level * self.params.r for level in (-1, 0, 1))
        factors = []
        for low, high in zip(ternary_pmf(pair.x, self.params.r), ternary_pmf(pair.x_prime, self.params.r)):
            if not np.array_equal(low, high):
                factors.append(PmfFactor(tuple(zip(levels, low.tolist())), tuple(zip(levels, high.tolist()))))
        return _group(factors)

    def claim(self, setting: Setting) -> MechanismClaim:
        from privaudit.quantizers import worst_case_delta

        r, dim, releases, norm = self.params.r, setting.dim, setting.releases, setting.norm
        claimed = 1.0 / r
        sound = self.sound(setting, 0.0)
        per_norm = {p: worst_case_delta(r, dim=dim, norm=p).delta for p in (1.0, 2.0, math.inf)}
        statements = (
            f"Theorem 3 (one iteration, ‖x − y‖₁ ≤ 1): (0, 1/r) = (0, {claimed:.4g})-DP; exact worst-case "
            f"δ = {per_norm[1.0]:.4g}",
            f"Remark 6 (any ℓp norm): the same (0, {claimed:.4g}); exact worst-case δ in dimension {dim}: "
            f"ℓ2 {per_norm[2.0]:.4g}, ℓ∞ {per_norm[math.inf]:.4g}",
            f"Remark 10 (budget grows roughly like √T): over T = {releases} release(s) of the same input under "
            f"{norm_name(norm)} ≤ 1 the exact worst case is δ_T = {sound.delta:.4g} at every ε ≥ 0, against "
            f"√T/r = {min(1.0, math.sqrt(releases) * claimed):.4g}",
        )
        theorem = "Theorem 3" if norm == 1 else f"Remark 6 ({norm_name(norm)})"
        statement = theorem if releases == 1 else f"Remark 10 over {theorem}"
        record = Claim(
            defense=self.name, notion="(0, δ)-DP",
            adjacency=f"quantizer inputs with ‖x − y‖_{'∞' if norm == math.inf else int(norm)} ≤ 1 "
                      f"({'Theorem 3' if norm == 1 else 'Remark 6'})",
            eps_claimed=0.0, eps_stated=None, eps_sound=sound.eps, delta=claimed, horizon=releases,
            equation=f"Theorem 3: Definition 2's ternary quantizer is (0, 1/r)-DP per iteration; r = {r:g} → "
                     f"δ = {claimed:.4g}",
            sound_method=sound.method, delta_sound=sound.delta, statements=statements,
        )
        if releases == 1:
            return MechanismClaim(record, statement, 0.0, claimed, norm)
        reading = min(1.0, math.sqrt(releases) * claimed)
        return MechanismClaim(
            record, statement, 0.0, None, norm,
            unevaluable="Remark 10 says the budget grows 'roughly at a rate of √T' and gives no constant",
            reading=(0.0, reading, f"δ_T = √T/r = {reading:.4g} (constant 1, so that T = 1 gives Theorem 3)"),
        )

    def sound(self, setting: Setting, at: float) -> Sound:
        from privaudit.quantizers import worst_case_delta

        worst = worst_case_delta(self.params.r, dim=setting.dim, norm=setting.norm, draws=setting.releases)
        return _flat(worst.delta, setting, at, worst.exact,
                     "privaudit.quantizers.worst_case_delta: flat (0, δ) curve" + ("" if worst.exact else ", a bound"))


# ---------------------------------------------------------------------------------------------
# The defenses' single releases


class CrossGradientParams(MechanismParams):
    sigma: float = Field(1.0, gt=0, description="noise multiplier σ: noise std σC on the clipped batch sum")
    clip: float = Field(2.0, gt=0, description="per-sample ℓ2 clip norm C (paper: 2 on MNIST)")
    batch_size: int = Field(216, ge=1, description="B; the release is divided by B")


@register
class CrossGradient(Mechanism):
    """One DPDL cross-gradient (seed 000, eq. 10): (Σ_b clip(g_b) + z)/B, z ~ N(0, σ²C² I).

    The input x is the replaced record's clipped gradient in units of 2C (replacing one record of
    a fixed batch moves the clipped sum by at most 2C in ℓ2), so the release is (2C x + z)/B, a
    Gaussian with noise multiplier σ/2. Theorem 1 claims (ε, δ) for the whole sampled run through
    constants c₁, c₂ and h the paper never gives: no verdict can be given on one release.
    """

    name = "dpdl_cross_gradient"
    title = "DPDL cross-gradient release (seed 000)"
    Params = CrossGradientParams

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        p = self.params
        return (2 * p.clip * x + p.sigma * p.clip * rng.standard_normal((n, len(x)))) / p.batch_size

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        return _projection(outputs, pair.x, pair.x_prime)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        return _location_pairs(norm, dim)

    def law(self, pair: Pair) -> list[Factor]:
        shift = pair.distance(2)
        return [GaussianFactor(self.params.sigma / 2, shift)] if shift > 0 else []

    def claim(self, setting: Setting) -> MechanismClaim:
        sound = self.sound(setting, 0.0)
        record = Claim(
            defense=self.name, notion="(ε, δ)-DP", adjacency="one record of the agent's batch replaced (ℓ2 "
            "clipping to C: the clipped sum moves by ≤ 2C)", eps_claimed=None, eps_stated=None,
            eps_sound=sound.eps, delta=setting.delta, horizon=setting.releases,
            equation="Theorem 1, eq. 23: σ ≥ (2/√w_min + 15αN/8 + α w_max (h+1)² N/(2h)) c₂ q √(T ln(1/δ)) / "
                     "(√(|N_i|/w_max) ε), for ε ≤ c₁q²T",
            sound_method=sound.method,
            assumptions=(f"σ = {self.params.sigma:g}, C = {self.params.clip:g}, B = {self.params.batch_size}; "
                         "the record is in the batch (no sampling)",),
        )
        return MechanismClaim(
            record, "Theorem 1", None, setting.delta, 2.0,
            unevaluable="Theorem 1 needs c₁, c₂ and h, which the paper never gives, and covers the whole run "
                        "with sampling rate q, not one release of a batch that holds the record")

    def sound(self, setting: Setting, at: float) -> Sound:
        reach = l2_reach(setting.norm, setting.dim)
        curve = privacy_curve([GaussianFactor(self.params.sigma / 2, reach)], setting.releases)
        return _from_curve(curve, setting, at, True, f"Gaussian release, noise multiplier σ/2 against "
                           f"sensitivity 2C·{reach:.4g}")


class RoundParams(MechanismParams):
    sigma_e: float = Field(0.5, gt=0, description="std σ_e of the noise added to each clipped gradient")
    zeta: float = Field(1.0, gt=0, description="smooth clipping threshold ζ of the batch mean")
    tau: int = Field(4, ge=1, description="local steps τ per round")
    batch_size: int = Field(8, ge=1, description="|B_i|, drawn without replacement at every step")
    samples: int = Field(1000, ge=1, description="m_i, the agent's local dataset size")
    gamma: float = Field(0.1, gt=0, description="local step size γ; the release is γ Σ_t g_i(φ^t)")

    @model_validator(mode="after")
    def _batch_fits(self) -> RoundParams:
        if self.batch_size > self.samples:
            raise ValueError(f"batch_size {self.batch_size} exceeds samples m_i = {self.samples}")
        return self


@register
class AdmmRound(Mechanism):
    """One LT-ADMM-DP round as an eavesdropper on all of agent i's links recovers it (seed 002):
    γ Σ_{t<τ} (smooth-clip(batch mean_t) + e_t), e_t ~ N(0, σ_e² I).

    The input x is the replaced record's effect on a smooth-clipped batch mean, in units of 2ζ
    (both clipped means have norm < ζ: the supremum of the move, not attained but approached).
    Each step's batch holds the record with probability |B|/m_i, independently, so the release is
    γ(K·2ζ x + N(0, τσ_e² I)) with K ~ Binomial(τ, |B|/m_i). The claim is Theorem 2's eq. 9 with K
    = the releases audited; the sound ε is the RDP accountant on the τT sampled Gaussian steps.
    """

    name = "lt_admm_round"
    title = "LT-ADMM-DP round (seed 002)"
    Params = RoundParams

    @property
    def rate(self) -> float:
        return self.params.batch_size / self.params.samples

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        p = self.params
        hits = rng.binomial(p.tau, self.rate, size=(n, 1))
        noise = p.sigma_e * math.sqrt(p.tau) * rng.standard_normal((n, len(x)))
        return p.gamma * (hits * (2 * p.zeta * x) + noise)

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        return _projection(outputs, pair.x, pair.x_prime)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        return _location_pairs(norm, dim, symmetric=True)

    def law(self, pair: Pair) -> list[Factor] | None:
        """Exact for x = 0 (the record replaced by one without effect): N(0, τσ_e²) against the
        Binomial mixture of shifts k·2ζ‖x′‖₂ (a 1-D problem along x′); None otherwise."""
        if np.any(pair.x != 0):
            return None
        p = self.params
        shift = 2 * p.zeta * pair.distance(2)
        if shift == 0:
            return []
        hits = np.arange(p.tau + 1)
        probs = binom.pmf(hits, p.tau, self.rate)
        return [GaussianMixtureFactor(p.sigma_e * math.sqrt(p.tau), tuple((hits * shift).tolist()),
                                      tuple(probs.tolist()))]

    def claim(self, setting: Setting) -> MechanismClaim:
        from defenses.lt_admm_dp import PAPER_EPS_STATED, PAPER_SETTING, theorem2_epsilon

        p = self.params
        if setting.delta == 0:
            raise ConfigError("lt_admm_round: Theorem 2 (eq. 9) needs δ > 0 (it has log(1/δ)); set --delta")
        claimed = theorem2_epsilon(setting.releases, p.tau, p.zeta, p.batch_size, p.sigma_e, p.samples, setting.delta)
        inputs = {"rounds": setting.releases, "tau": p.tau, "zeta": p.zeta, "batch_size": p.batch_size,
                  "sigma_e": p.sigma_e, "delta": setting.delta, "samples": p.samples}
        stated = PAPER_EPS_STATED if all(math.isclose(inputs[k], v) for k, v in PAPER_SETTING.items()) else None
        sound = self.sound(setting, claimed)
        record = Claim(
            defense=self.name, notion="(ε, δ)-DP",
            adjacency="one datapoint of agent i's local dataset replaced (ℓ2: a smooth-clipped mean moves by < 2ζ)",
            eps_claimed=claimed, eps_stated=stated, eps_sound=sound.eps, delta=setting.delta,
            horizon=setting.releases,
            equation=f"Theorem 2, eq. (9): ε_i = 2Kτζ²|B|²/(σ_e² m_i²) + (2ζ|B|/(σ_e m_i)) √(2Kτ log(1/δ)), "
                     f"K = {setting.releases} round(s), natural log",
            sound_method=sound.method,
            assumptions=("the eavesdropper sees each round's γ Σ_t g_i(φ^t) (all of agent i's links); the record's "
                         "effect on every step's clipped mean is its supremum 2ζ, in the same direction",),
        )
        return MechanismClaim(record, "Theorem 2, eq. 9", claimed, setting.delta, 2.0)

    def sound(self, setting: Setting, at: float) -> Sound:
        return _round_sound(self.params, setting, at)


@functools.cache
def _round_sound(params: RoundParams, setting: Setting, at: float) -> Sound:
    """The RDP accountant on seed 002's τT sampled Gaussian steps (cached: the claim and the
    audit both ask for it, and the sampled-without-replacement RDP takes seconds)."""
    from dp_accounting import rdp
    from dp_accounting.privacy_accountant import NeighboringRelation

    noise = params.sigma_e / (2 * params.zeta * l2_reach(setting.norm, setting.dim))
    step = dp_accounting.SampledWithoutReplacementDpEvent(params.samples, params.batch_size,
                                                          dp_accounting.GaussianDpEvent(noise))
    event = dp_accounting.SelfComposedDpEvent(step, params.tau * setting.releases)
    eps = epsilon(event, setting.delta, "rdp", "replace_one")
    engine = rdp.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    engine.compose(event)
    return Sound(eps, float(engine.get_delta(at)), at, False,
                 f"RDP accountant (replace-one) on {params.tau * setting.releases} steps of "
                 f"SampledWithoutReplacement(m_i = {params.samples}, |B| = {params.batch_size}, Gaussian(σ_e/2ζ)); "
                 "the round's sum is post-processing of those steps")


class _ScheduleParams(MechanismParams):
    """Seed 003's constants (the defense's parameters, `defenses/tvss.py`)."""

    clip: float = Field(0.2, gt=0, description="C: per-sample ℓ1 clip")
    a1: float = Field(0.5, gt=0, description="a₁ in α_k = a₁/(k+a₂)^α")
    a2: float = Field(1.0, gt=0, description="a₂: offset of k in every schedule")
    a3: float = Field(1.0, gt=0, description="a₃ in γ_k = ⌈a₃(k+a₂)^γ⌉")
    sigma_scale: float = Field(1.0, gt=0, description="s in σ_k = s·(k+a₂)^η")
    local_size: int | None = Field(None, ge=1, description="|D_i|: γ_k is capped at it (default: uncapped)")


class StateParams(_ScheduleParams):
    """Defaults: §V's first worked example (Algorithm 1)."""

    alpha: float = Field(0.9, gt=0, le=1, description="α: decay of the gradient step α_k")
    beta: float = Field(0.6, gt=0, le=1, description="β: decay of the consensus weight β_k")
    gamma: float = Field(1.1, ge=0, description="γ: growth of the sample size γ_k")
    eta: float = Field(0.05, ge=0, description="η: growth of the Laplace scale σ_k")


class GradientParams(_ScheduleParams):
    """Defaults: §V's second worked example (Algorithm 2)."""

    alpha: float = Field(0.8, gt=0, le=1, description="α: decay of the gradient step α_k")
    beta: float = Field(0.5, gt=0, le=1, description="β: decay of the consensus weight β_k")
    gamma: float = Field(1.2, ge=0, description="γ: growth of the sample size γ_k")
    eta: float = Field(0.1, ge=0, description="η: growth of the Laplace scale σ_k")
    k: int = Field(1, ge=1, description="the iteration whose noisy gradient is released (Theorem 5 sums k ≥ 1)")


class _NoisyRelease(Mechanism):
    """A Wang & Zhang release: unit·x + Laplace(σ) per coordinate, with `unit` the replace-one ℓ1
    sensitivity (inputs in its units) and σ the schedule's Laplace scale. The claim's per-release ε
    is the paper's sensitivity over σ; the sound one is `unit`/σ, attained (`defenses/tvss.py`)."""

    statement: ClassVar[str]
    equation: ClassVar[str]

    def schedule(self):
        from defenses.tvss import Schedule

        p = self.params
        return Schedule(p.a1, p.a2, p.a3, p.alpha, p.beta, p.gamma, p.eta, p.sigma_scale)

    @abstractmethod
    def scale(self) -> float:
        """σ of the release."""

    @abstractmethod
    def unit(self) -> float:
        """The release's ℓ1 sensitivity when one sample is replaced (sound, attained)."""

    @abstractmethod
    def claimed_eps(self) -> float:
        """The paper's ε for this one release."""

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.unit() * x + rng.laplace(0.0, self.scale(), size=(n, len(x)))

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        return _laplace_log_ratio(outputs, self.unit() * pair.x, self.unit() * pair.x_prime, self.scale())

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        return _location_pairs(norm, dim)

    def law(self, pair: Pair) -> list[Factor]:
        return _laplace_factors(self.scale(), self.unit() * (pair.x_prime - pair.x))

    def claim(self, setting: Setting) -> MechanismClaim:
        claimed = setting.releases * self.claimed_eps()
        sound = self.sound(setting, claimed)
        record = Claim(
            defense=self.name, notion="ε-DP (pure, Laplace)",
            adjacency="one sample of agent i's data replaced (Definition 1); per-sample gradients clipped to ℓ1 "
                      f"norm C, so the release moves by ≤ {self.unit():.4g} in ℓ1 (the input unit)",
            eps_claimed=claimed, eps_stated=None, eps_sound=sound.eps, delta=0.0, horizon=setting.releases,
            equation=f"{self.equation} = {self.claimed_eps():.4g} per release; {_horizon_text(setting.releases)} "
                     "compose additively",
            sound_method=sound.method,
            assumptions=("per-sample gradients clipped to ℓ1 norm C (the paper assumes the bound; "
                         "defenses/tvss.py enforces it)", "⌈x⌉ read as the usual ceiling"),
        )
        return MechanismClaim(record, self.statement, claimed, 0.0, 1.0)

    def sound(self, setting: Setting, at: float) -> Sound:
        reach = l1_reach(setting.norm, setting.dim)
        pure = setting.releases * reach * self.unit() / self.scale()
        return _pure(pure, setting, at, f"pure ε = T·Δ₁/σ with Δ₁ = {reach:.4g}·{self.unit():.4g} (replace-one "
                                        f"ℓ1 sensitivity, attained) and σ = {self.scale():.4g}")


@register
class NoisyState(_NoisyRelease):
    """Seed 003 Alg. 1's first data-dependent broadcast y_{i,1} = x_{i,1} + n_{i,1}.

    Given the noisy states released at k = 0, x_{i,1} differs between neighbouring datasets by
    α₀(ḡ − ḡ′), one of γ₀ ℓ1-clipped gradients replaced at the public x_0: at most 2Cα₀/γ₀ in ℓ1,
    attained. Lemma 1 gives Δ_1 = Cα₀/γ₀. Later states' sound sensitivities are bounds only
    (`output_sound_sensitivities`), so they are not audited here.
    """

    name = "tvss_state"
    title = "Wang & Zhang Alg. 1 noisy state y_{i,1} (seed 003)"
    Params = StateParams
    statement = "Lemma 1 + Theorem 1, term k = 1"
    equation = "Lemma 1 + Theorem 1: ε_1 = Δ_1/σ_1 with Δ_1 = Cα₀/γ₀"

    def scale(self) -> float:
        return float(self.schedule().scale(1))

    def unit(self) -> float:
        from defenses.tvss import output_sound_sensitivities

        return float(output_sound_sensitivities(self.schedule(), self.params.clip, 1, self.params.local_size)[1])

    def claimed_eps(self) -> float:
        from defenses.tvss import output_claim

        return output_claim(self.schedule(), self.params.clip, 2, self.params.local_size).value


@register
class NoisyGradient(_NoisyRelease):
    """Seed 003 Alg. 2's noisy gradient g_i^k + n_{i,k} at iteration k ≥ 1: one of min(γ_k, |D_i|)
    ℓ1-clipped gradients replaced at the public x_{i,k} moves the mean by ≤ 2C/min(γ_k, |D_i|),
    attained; Theorem 5's summand is C/(γ_k σ_k)."""

    name = "tvss_gradient"
    title = "Wang & Zhang Alg. 2 noisy gradient (seed 003)"
    Params = GradientParams
    statement = "Theorem 5, term k"
    equation = "Theorem 5: ε_k = C/(γ_k σ_k)"

    def scale(self) -> float:
        return float(self.schedule().scale(self.params.k))

    def unit(self) -> float:
        from defenses.tvss import gradient_sound_sensitivities

        k = self.params.k
        return float(gradient_sound_sensitivities(self.schedule(), self.params.clip, k + 1, self.params.local_size)[k])

    def claimed_eps(self) -> float:
        from defenses.tvss import gradient_claim

        k = self.params.k
        return gradient_claim(self.schedule(), self.params.clip, k + 1, self.params.local_size, first=k).value

