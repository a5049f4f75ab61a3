"""Claims and sound accounting.

A defense states two things about privacy, kept apart on purpose:

* its **claim**: what its paper asserts, evaluated literally for the run's parameters, with every
  assumption needed to evaluate it written down (see SPEC.md, rule 1);
* its **mechanism**: what the code really releases, described as a dp_accounting `DpEvent`
  (composed over rounds and neighbours), so that a standard accountant gives a **sound** ε.

This module holds the `Claim` record and the accountant calls. It imports no torch, so the
accounting and the audit statistics can be used on their own.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import Any, Literal

import dp_accounting
from dp_accounting import pld, privacy_accountant, rdp

# dp_accounting logs one warning per RDP order it cannot evaluate and then excludes that order,
# which is the sound behaviour; the warnings would flood every campaign log.
logging.getLogger("absl").setLevel(logging.ERROR)

Accountant = Literal["rdp", "pld"]
Relation = Literal["add_remove", "replace_one"]
_RELATIONS = {
    "add_remove": privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": privacy_accountant.NeighboringRelation.REPLACE_ONE,
}


@dataclass(frozen=True)
class Claim:
    """A defense's privacy claim for one run, beside the sound ε of the mechanism it runs.

    `eps_claimed` is the paper's formula recomputed for the run; `eps_stated` is a number the
    paper prints for this configuration (None when it prints none); `eps_sound` comes from a
    standard accountant on the real mechanism (None when no sound bound exists, with the reason
    in `sound_method`). A mismatch between any two of them is a finding, never corrected.
    Where the notion is (0, δ)-DP, `delta` is the claimed δ and `delta_sound` the sound one.
    `statements` lists further claims the paper makes about the same mechanism (another norm,
    a growth rate over the horizon), each to be audited on its own.
    """

    defense: str
    notion: str
    adjacency: str
    eps_claimed: float | None
    eps_stated: float | None
    eps_sound: float | None
    delta: float | None
    horizon: int | str | None
    equation: str
    sound_method: str
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    delta_sound: float | None = None
    statements: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def no_privacy(cls, defense: str, horizon: int | str | None, equation: str, reason: str) -> Claim:
        """The claim of an algorithm that adds no DP noise: nothing claimed, no sound bound."""
        return cls(defense=defense, notion="none", adjacency="none", eps_claimed=None, eps_stated=None,
                   eps_sound=None, delta=None, horizon=horizon, equation=equation, sound_method=reason)

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["assumptions"] = list(self.assumptions)
        record["statements"] = list(self.statements)
        return record


def epsilon(event: dp_accounting.DpEvent, delta: float, accountant: Accountant = "pld",
            relation: Relation = "add_remove") -> float:
    """ε at `delta` of the composed `event` under the given adjacency of one agent's dataset.

    "pld" (privacy loss distributions, pessimistic discretisation) is the tightest sound bound
    dp_accounting offers for Gaussian and Laplace events; "rdp" is the moments accountant most
    DP-SGD papers report (Mironov 2017; Abadi et al. 2016), kept for comparison with them.
    Sampling without replacement is analysed by dp_accounting only under "replace_one" and by
    the RDP accountant only. Pure ε-DP (Laplace) composes additively: see `pure_epsilon`.
    """
    if accountant == "rdp":
        engine = rdp.RdpAccountant(neighboring_relation=_RELATIONS[relation])
    elif accountant == "pld":
        engine = pld.PLDAccountant(neighboring_relation=_RELATIONS[relation])
    else:
        raise ValueError(f"unknown accountant '{accountant}' (choose from rdp, pld)")
    if not engine.supports(event):
        raise ValueError(f"the {accountant} accountant does not support {type(event).__name__} "
                         f"under {relation} adjacency")
    engine.compose(event)
    return float(engine.get_epsilon(delta))


def pure_epsilon(sensitivities: Sequence[float], scales: Sequence[float]) -> float:
    """ε of releasing each query with ℓ1 sensitivity Δ_k through Laplace noise of scale b_k:
    pure ε-DP composes additively, ε = Σ_k Δ_k / b_k (Dwork & Roth 2014, Thm 3.6 and 3.16)."""
    if len(sensitivities) != len(scales):
        raise ValueError("one Laplace scale per sensitivity is needed")
    return float(sum(delta / scale for delta, scale in zip(sensitivities, scales)))


def subsampled_gaussian(sampling_rate: float, noise_multiplier: float, steps: int) -> dp_accounting.DpEvent:
    """`steps` compositions of the Poisson-subsampled Gaussian mechanism (DP-SGD's release)."""
    step = dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier))
    return dp_accounting.SelfComposedDpEvent(step, steps)
