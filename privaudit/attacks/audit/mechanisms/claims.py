"""What is asserted and what is true: the claim a paper or textbook makes for a mechanism
(`MechanismClaim`), and a sound (ε, δ) over every pair of the adjacency (`Sound`), with the
helpers that build the sound bounds every mechanism shares (flat (0, δ) curves, exact curves,
pure ε).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privaudit.attacks.audit.mechanisms.adjacency import Setting
from privaudit.attacks.audit.mechanisms.laws import PrivacyCurve
from privaudit.accounting import Claim


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
