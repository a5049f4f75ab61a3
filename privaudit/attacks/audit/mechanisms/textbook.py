"""Textbook mechanisms: Laplace, Gaussian and randomized response.

Their claims are the textbook theorems (Dwork & Roth 2014; Warner 1965) with basic composition
over T releases; their sound bounds are closed forms or exact curves, so they check that the
audit recovers known ε.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from privaudit.attacks.audit.mechanisms.adjacency import Pair, Setting, l1_reach, norm_name
from privaudit.attacks.audit.mechanisms.base import Mechanism, MechanismParams, register
from privaudit.attacks.audit.mechanisms.claims import MechanismClaim, Sound, _from_curve, _pure
from privaudit.attacks.audit.mechanisms.laws import Factor, PmfFactor, privacy_curve
from privaudit.attacks.audit.mechanisms.location import (GaussianLocation, _laplace_factors, _laplace_log_ratio, _location_pairs,
                                               _unit)
from privaudit.accounting import Claim


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
class Gaussian(GaussianLocation):
    name = "gaussian"
    title = "Gaussian mechanism"
    Params = GaussianParams

    @property
    def input_sigma(self) -> float:
        return self.params.sigma

    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + self.params.sigma * rng.standard_normal((n, len(x)))

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
        curve, reach = self.worst_curve(setting)
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
