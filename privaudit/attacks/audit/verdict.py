"""One rule that turns an audit's bound into a verdict on a claim, for every kind of audit.

A mechanism audit (`privaudit.attacks.audit.mechanism_audit`) and a canary audit (`privaudit.attacks.audit.canary_audit`, judged in
`privaudit.campaign.audit_findings`) each measure a bound and say whether it exceeds the claim,
at the claim's own neighbouring relation (`privaudit.accounting.Neighbours`). What that means
for the claim is decided here, the same way for both, so two audits of the same release cannot
disagree about the claim:

- **outside threat model**: the evidence comes from an active adversary (one that sends crafted
  messages: `privaudit.threats.ACTIVE_THREATS`) and the claim's theorem is stated against
  honest-but-curious agents or an eavesdropper (`privaudit.accounting.ClaimThreat`): a finding of
  what such an adversary gains, never a refutation, whatever the bound. A claim stated against any
  adversary (a clipped and noised release is private whatever point it is computed at) is judged
  by the rules below like any audit; a claim that states no threat model is judged as one against
  honest agents, the reading that cannot call a claim refuted for what its author never covered;
- **outside range**: the claim lies outside its theorem's range in this run (a condition of the
  theorem or of a lemma its proof uses fails): whatever the bound, no audit can refute it. What
  the bound would say were the theorem applied anyway is kept in the reason;
- **conditionally refuted**: the bound exceeds a claim evaluated with constants the paper never
  gives: refuted only for the constants' values stated (solved from the claim's law in each one,
  `conditions`), never unconditionally;
- **refuted**: the bound exceeds a claim that rests on no assumed constant;
- **inconclusive**: the audit could not have refuted the claim at its size, or found nothing;
- **consistent**: evidence short of the claim from an audit with the power to refute it.

An audit that saw less than the claim covers (a released-model threat: the last iterate, not the
transcript) is judged by the same rule, one way only: its bound above the claim refutes it (what
the claim covers includes what the audit saw), while a bound below it says nothing about the
rest, so its reason says that it never supports a smaller ε (`partial`).

Every verdict names the claim's threat model (`threat`), whichever adversary produced the evidence.

Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from privaudit.accounting import Claim

Status = Literal["refuted", "conditionally refuted", "outside threat model", "outside range", "consistent",
                 "inconclusive", "not evaluable"]

OUTSIDE_THREAT = "outside threat model"
"""The status of an active adversary's evidence against a claim stated against passive ones."""


@dataclass(frozen=True)
class Verdict:
    """The audit's answer about one claim, with the one-sentence reason, for a refutation resting
    on assumed constants the range of each for which it holds, and the claim's threat model in
    words (None where no claim is stated)."""

    status: Status
    statement: str | None
    reason: str
    conditions: tuple[str, ...] = field(default_factory=tuple)
    threat: str | None = None

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["conditions"] = list(self.conditions)
        return record


def conditions(claim: Claim, ratio: float) -> tuple[str, ...]:
    """For each constant the claim assumes, where a bound `ratio` times the claimed ε still
    exceeds the claim. The claimed ε scales as value**power (the others held), so the bound
    exceeds it while value**power < ratio · assumed**power: below assumed · ratio^(1/power) for a
    positive power, above it for a negative one. A constant with no power law keeps its assumed
    value, said in words."""
    found = []
    for constant in claim.constants:
        if constant.power is None or constant.power == 0 or not math.isfinite(ratio):
            found.append(f"{constant.name} = {constant.assumed:g} as assumed ({constant.effect})")
            continue
        edge = constant.assumed * ratio ** (1 / constant.power)
        side = "<" if constant.power > 0 else ">"
        found.append(f"{constant.name} {side} {edge:.3g} (assumed {constant.assumed:g})")
    return tuple(found)


def threat_words(claim: Claim) -> str:
    """The claim's threat model in words, or that it states none (judged as honest-but-curious)."""
    if claim.threat is None:
        return "none stated (judged as honest-but-curious agents)"
    return claim.threat.words()


def outside_threat(claim: Claim, active: str, measured: str) -> Verdict | None:
    """The verdict of evidence from an active adversary (`active`: what it did, in words) against
    a claim whose threat model does not cover it, or None when the claim covers any adversary."""
    if claim.threat is not None and claim.threat.covers_active:
        return None
    assumed = "states no threat model, so it is judged as stated against honest-but-curious agents" \
        if claim.threat is None else f"assumes {claim.threat.words()}"
    return Verdict(OUTSIDE_THREAT, None,
                   f"outside the claim's threat model: the evidence comes from {active}, while the claim {assumed}; "
                   f"a finding of what that adversary gains, never a refutation: {measured}")


def decide(claim: Claim | None, statement: str | None, *, exceeds: bool, found: bool, measured: str,
           ratio: float | None = None, powerless: str | None = None, partial: str | None = None,
           active: str | None = None) -> Verdict:
    """The verdict (module docstring) of an audit whose bound `exceeds` the claim or not, `found`
    any evidence at all (a bound above 0), in the words `measured`; `ratio` is the bound over the
    claimed ε (for the constants' ranges), `powerless` why the audit could not have refuted the
    claim at its size (None when it could), `partial` what the audit saw where it is less than the
    claim covers (its bound can refute the claim, never support a smaller ε), `active` what the
    adversary did where it sent crafted messages (None for a passive one). The verdict names the
    claim's threat model."""
    if partial is not None and not exceeds:
        measured += (f"; the audit saw {partial}, less than the claim covers: its bound can refute the claim but never "
                     "support a smaller ε")
    if claim is None:
        return Verdict("not evaluable", None, f"no DP claim is stated; {measured}")
    verdict = _judged(claim, statement, exceeds=exceeds, found=found, measured=measured, ratio=ratio,
                      powerless=powerless, active=active)
    return dataclasses.replace(verdict, statement=statement, threat=threat_words(claim))


def _judged(claim: Claim, statement: str | None, *, exceeds: bool, found: bool, measured: str,
            ratio: float | None, powerless: str | None, active: str | None) -> Verdict:
    """`decide`'s rule on a stated claim, before the verdict is told the claim's threat model."""
    if active is not None:
        outside_model = outside_threat(claim, active, measured)
        if outside_model is not None:
            return outside_model
        measured += f" (the evidence comes from {active}, inside the claim's threat model: any adversary)"
    ranges = conditions(claim, ratio) if exceeds and ratio is not None else ()
    outside = claim.outside()
    if outside:
        reason = f"outside its theorem's range, so no audit can refute it: {'; '.join(outside)}"
        if exceeds:
            reason += f". Were the theorem applied anyway, {measured}" + (
                f", for {', '.join(ranges)}" if ranges else "")
        return Verdict("outside range", statement, reason, ranges)
    if exceeds:
        if claim.constants:
            return Verdict("conditionally refuted", statement,
                           f"{measured}; this holds for {', '.join(ranges)}, constants the paper never gives", ranges)
        return Verdict("refuted", statement, measured)
    if powerless is not None:
        return Verdict("inconclusive", statement, f"{powerless}; {measured}")
    if not found:
        return Verdict("inconclusive", statement, f"no evidence at this strength: {measured}")
    return Verdict("consistent", statement, measured)
