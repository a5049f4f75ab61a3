"""One rule that turns an audit's bound into a verdict on a claim, for every kind of audit.

A mechanism audit (`privaudit.attacks.audit.mechanism_audit`) and a canary audit (`privaudit.attacks.audit.canary_audit`, judged in
`privaudit.campaign.audit_findings`) each measure a bound and say whether it exceeds the claim,
at the claim's own neighbouring relation (`privaudit.accounting.Neighbours`). What that means
for the claim is decided here, the same way for both, so two audits of the same release cannot
disagree about the claim:

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

Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from privaudit.accounting import Claim

Status = Literal["refuted", "conditionally refuted", "outside range", "consistent", "inconclusive",
                 "not evaluable"]


@dataclass(frozen=True)
class Verdict:
    """The audit's answer about one claim, with the one-sentence reason and, for a refutation
    resting on assumed constants, the range of each for which it holds."""

    status: Status
    statement: str | None
    reason: str
    conditions: tuple[str, ...] = field(default_factory=tuple)

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


def decide(claim: Claim | None, statement: str | None, *, exceeds: bool, found: bool, measured: str,
           ratio: float | None = None, powerless: str | None = None, partial: str | None = None) -> Verdict:
    """The verdict (module docstring) of an audit whose bound `exceeds` the claim or not, `found`
    any evidence at all (a bound above 0), in the words `measured`; `ratio` is the bound over the
    claimed ε (for the constants' ranges), `powerless` why the audit could not have refuted the
    claim at its size (None when it could), `partial` what the audit saw where it is less than the
    claim covers (its bound can refute the claim, never support a smaller ε)."""
    if partial is not None and not exceeds:
        measured += (f"; the audit saw {partial}, less than the claim covers: its bound can refute the claim but never "
                     "support a smaller ε")
    if claim is None:
        return Verdict("not evaluable", None, f"no DP claim is stated; {measured}")
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
