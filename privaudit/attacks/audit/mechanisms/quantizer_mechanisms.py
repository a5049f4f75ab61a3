"""Stochastic quantizers with finite outputs: the 1-bit quantizer and seed 004's ternary quantizer.

Both have flat (0, δ) curves whose exact worst case is `privaudit.quantizers.worst_case_delta`;
the ternary sampler and that formula are imported where used (the sampler needs torch).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from privaudit.attacks.audit.mechanisms.adjacency import Pair, Setting, norm_name
from privaudit.attacks.audit.mechanisms.base import Mechanism, MechanismParams, register
from privaudit.attacks.audit.mechanisms.claims import MechanismClaim, Sound, _flat
from privaudit.attacks.audit.mechanisms.laws import Factor, PmfFactor
from privaudit.attacks.audit.mechanisms.location import _unit
from privaudit.accounting import Claim, Neighbours
from privaudit.errors import ConfigError


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


def _theorem3_delta(r: float) -> float:
    """Theorem 3's δ = 1/r as the probability it bounds: at r ≤ 1 the formula gives δ ≥ 1, which
    claims no privacy, the same as δ = 1 (every mechanism is (0, 1)-DP), so the claim holds 1 and
    says it is vacuous (`privaudit.accounting.Claim.analytic`), never a δ that is no probability."""
    return min(1.0, 1.0 / r)


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
    defense = "ternary"
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
        from privaudit.defenses.ternary import THREAT as TERNARY_THREAT
        from privaudit.quantizers import worst_case_delta

        r, dim, releases, norm = self.params.r, setting.dim, setting.releases, setting.norm
        claimed = _theorem3_delta(r)
        sound = self.sound(setting, 0.0)
        per_norm = {p: worst_case_delta(r, dim=dim, norm=p).delta for p in (1.0, 2.0, math.inf)}
        held = f"(0, {claimed:.4g})" if claimed < 1 else "(0, 1) (1/r ≥ 1: no privacy)"
        statements = (
            f"Theorem 3 (one iteration, ‖x − y‖₁ ≤ 1): (0, 1/r) = {held.replace(')', ')-DP', 1)}; exact worst-case "
            f"δ = {per_norm[1.0]:.4g}",
            f"Remark 6 (any ℓp norm): the same {held}; exact worst-case δ in dimension {dim}: "
            f"ℓ2 {per_norm[2.0]:.4g}, ℓ∞ {per_norm[math.inf]:.4g}",
            f"Remark 10 (budget grows roughly like √T): over T = {releases} release(s) of the same input under "
            f"{norm_name(norm)} ≤ 1 the exact worst case is δ_T = {sound.delta:.4g} at every ε ≥ 0, against "
            f"√T/r = {min(1.0, math.sqrt(releases) * claimed):.4g}",
        )
        theorem = "Theorem 3" if norm == 1 else f"Remark 6 ({norm_name(norm)})"
        statement = theorem if releases == 1 else f"Remark 10 over {theorem}"
        record = Claim(
            defense=self.name, notion="(0, δ)-DP",
            neighbours=Neighbours("replace-one", "state", f"{'Theorem 3' if norm == 1 else 'Remark 6'}: two quantizer "
                                  "inputs at distance ≤ 1", None),
            threat=TERNARY_THREAT,
            adjacency=f"quantizer inputs with ‖x − y‖_{'∞' if norm == math.inf else int(norm)} ≤ 1 "
                      f"({'Theorem 3' if norm == 1 else 'Remark 6'})",
            eps_claimed=0.0, eps_stated=None, eps_sound=sound.eps, delta=claimed, horizon=releases,
            equation=f"Theorem 3: Definition 2's ternary quantizer is (0, 1/r)-DP per iteration; r = {r:g} → "
                     + (f"δ = {claimed:.4g}" if claimed < 1 else f"1/r = {1 / r:.4g} ≥ 1: δ = 1, no privacy claimed"),
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
