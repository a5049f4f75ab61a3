"""The verdicts the report opens with: per defense run and per audited claim, the claim (the
paper's equation, the ε it states beside the ε privaudit recomputes from it, δ, horizon), the
sound ε, the strongest empirical lower bound with its confidence, the tightness, and a status in
plain words.

Statuses, most severe first (the order the page lists them in), each claimed only as far as the rows
show it:
- **refuted**: an audit's verdict is "refuted" (its lower bound exceeds a claim that rests on no
  assumed constant, at the claim's own neighbouring relation, inside the theorem's range);
- **conditionally refuted**: the bound exceeds a claim evaluated with constants the paper never
  gives, for the range of each constant the verdict states (`privaudit.attacks.audit.verdict`);
- **understated**: the claim's ε (or δ) is below the sound accountant's for the mechanism the code
  runs — an accounting finding, not an attack;
- **no privacy**: the defense claims none; the strongest leakage the attacks found is quoted from
  their own sections' leads (`privaudit/reports/inversion.py`, `privaudit/reports/membership.py`);
- **outside range**: the claim lies outside its theorem's range in the run (a condition of the
  theorem or of a lemma its proof uses fails), so no audit can refute it;
- **outside threat model**: the only evidence comes from an active adversary (one that sent crafted
  messages) and the claim is stated against honest-but-curious agents or an eavesdropper
  (`privaudit.accounting.ClaimThreat`): a finding of what that adversary gains, never a refutation;
- **failed**: an audit of its own whose every attempt failed;
- **inconclusive**: audited, but no audit found evidence at its strength (every bound 0), or none
  could have refuted the claim with the runs it had — never shown as green;
- **consistent**: an audit with the power to refute found evidence short of the claim, and none
  refutes it (a lower bound never proves a claim);
- **not evaluable**: every audit says it cannot judge the claim, and why;
- **not audited**: a claim without an empirical bound in these results.

Analytic findings stand beside the status, in their own colour, and raise a verdict to the findings'
rank (`severity`), because they need no attack (a claim below the sound accountant whose verdict is
another, a refutation above all, carries "understated" as a finding, so neither fact hides the other): the claim's premise failed in the run, the claim lies outside its theorem's
range, no sound bound exists, or the claim is vacuous (`privaudit.accounting.FINDING_KINDS`).

Every verdict names the claim's threat model (`threat`: the training rows' `claim.threat`, else the
audit rows' `verdict.threat`). Evidence from an active adversary against a claim it lies outside
(an audit whose verdict is "outside threat model", or an active attack's inversion row, which plays no
game) stands beside the status as a finding of that kind, never deciding it while other audits
judge the claim; against a claim stated for any adversary an active audit is judged like any other,
and an active inversion's reconstructions are a note (a reconstruction is not a bound).

Audit rows reach a defense run's verdict when they are canary or reconstruction audits of it (their
`training` cell is one of the run's, else their `defense_label` is the run's label or its `[[defense]]`
table's label); mechanism audits and run audits matching no run are verdicts of their own, and a
defense run names the mechanism audits of its algorithm beside its verdict. Bounds, verdicts and
tightness are read from the audit rows, never recomputed; the tightness is the audit's own (its
bound over the sound value of the configuration it audited).

An inversion that leaked on a run with a DP claim holds the reconstruction game its leak triggered
(`reconstruction_audit`, `privaudit.campaign.inversion_findings.leak_bound`), an audit row read as
the `[[audit]]` tables' are (`audit_rows`): its bound (κ, trials, Clopper–Pearson confidence) and
verdict speak for the run, so a reconstruction that leaked never sits beside "not audited". The
leak alone is not a bound and refutes nothing; only the game's trials do, by the reconstruction
audit's own rule.
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.reports.audits import audit_failed, confidence_text, main_bound_text, number, samples_text, tightness_text
from privaudit.reports.inversion import row_type, strongest_reconstructions
from privaudit.reports.membership import strongest_memberships

MEANINGS = {
    "refuted": "an empirical lower bound exceeds the claim",
    "conditionally refuted": "an empirical lower bound exceeds the claim for the stated range of constants the "
                             "paper never gives",
    "understated": "the claim is below the sound accountant",
    "no privacy": "no privacy claimed",
    "outside range": "the claim lies outside its theorem's range; no audit can refute it",
    "outside threat model": "the evidence comes from an active adversary the claim's threat model excludes; a "
                            "finding, never a refutation",
    "failed": "every attempt of the audit failed",
    "inconclusive": "audited; no evidence at this strength either way",
    "consistent": "audited with the power to refute; no audit refutes the claim",
    "not evaluable": "the audit cannot judge the claim",
    "not audited": "no empirical bound; accounting only",
}
"""Each status with what it means, in the order of severity the summary and the verdicts list them:
refutations, then an understated claim, then what needs no audit to worry about (no privacy, a claim
outside its range, a failed audit), then what the audits left open, then what they support, then
what nobody audited."""

FINDINGS_RANK = list(MEANINGS).index("outside range")
"""Where a verdict with an analytic finding (a premise violated, a vacuous claim, ...) ranks at the
least: beside the other findings, above what the audits left open or support."""


def severity(entry: dict[str, Any]) -> int:
    """The rank of a verdict in the order the report lists them (0 first): its status's, raised to
    `FINDINGS_RANK` when it carries an analytic finding."""
    rank = list(MEANINGS).index(entry["status"]) if entry["status"] in MEANINGS else len(MEANINGS)
    return min(rank, FINDINGS_RANK) if entry["findings"] else rank


def _times(value: float, reference: float) -> str:
    """`value / reference` as a short multiplier ("1.8", "0.15", "1.2e+03")."""
    return f"{value / reference:.2g}"


def ratio_text(status: str, values: dict[str, Any]) -> str:
    """The number that decides the verdict, beside it: the empirical bound as a multiple of the
    claim ("ε_LB 0.44 = 1.8 × claimed") where an audit judged it, the sound ε (or δ, for a claim
    understated in δ) as a multiple of the claimed one where the claim is understated; "" where no
    number decides (no privacy, not audited, an understated claim of 0)."""
    claimed, sound, bound = values.get("claimed"), values.get("sound"), values.get("eps_lb")
    if status == "understated" and _finite(sound) is not None and _finite(claimed) and sound > claimed:
        return f"sound ε {number(sound)} = {_times(sound, claimed)} × claimed"
    delta_claimed, delta_sound = values.get("delta_claimed"), values.get("delta_sound")
    if status == "understated" and _finite(delta_sound) is not None and _finite(delta_claimed):
        return f"sound δ {number(delta_sound)} = {_times(delta_sound, delta_claimed)} × claimed"
    if status == "understated" and delta_sound == math.inf:
        return "sound δ ∞"
    if status in ("no privacy", "not audited", "failed", "not evaluable"):
        return ""
    if values.get("of_delta") and values.get("delta_lb") is not None:
        return f"δ_LB {number(values['delta_lb'])}"
    if bound is None:
        return ""
    if _finite(claimed):
        return f"ε_LB {number(bound)} = {_times(bound, claimed)} × claimed"
    if claimed == 0:
        return f"ε_LB {number(bound)} against a claimed 0"
    return f"ε_LB {number(bound)}"


OUTSIDE_THREAT = "outside threat model"
"""The audit verdict of an active adversary's evidence against a claim stated against passive ones
(`privaudit.attacks.audit.verdict`, which the report does not import)."""


def _status(row: dict[str, Any]) -> str | None:
    """An audit row's verdict status, if stored."""
    return (row.get("verdict") or {}).get("status")


RUN_AUDITS = ("canary", "reconstruction", "position")
"""Audit kinds that audit one defense run (their rows name its training cell)."""
_RELATIVE = 1e-6
"""Two accounted values closer than this (relative) are the same number printed twice."""


def _finite(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _below(claimed: Any, sound: Any) -> bool:
    """Whether a claimed value is below the sound one (an infinite sound value counts)."""
    if _finite(claimed) is None or not isinstance(sound, (int, float)) or isinstance(sound, bool):
        return False
    return sound == math.inf or (math.isfinite(sound) and claimed < sound * (1 - _RELATIVE))


def _over_seeds(values: list[Any]) -> str:
    """One stored value, or the range over seeds when they differ; "—" when none is stored."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return "—"
    low, high = min(numbers), max(numbers)
    if math.isclose(low, high, rel_tol=_RELATIVE):
        return number(low)
    return f"{number(low)}–{number(high)}"


def _bound_value(row: dict[str, Any]) -> float | None:
    """A row's bound of the kind its tightness is of (δ_LB for a δ audit, else ε_LB), if finite."""
    return _finite(row.get("delta_lb" if (row.get("tightness") or {}).get("of") == "delta" else "eps_lb"))


class _Evidence:
    """The audit rows speaking for one verdict (every seed of every linked audit)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        ended = [row for row in rows if not audit_failed(row)]
        self.outside_threat = [row for row in ended if _status(row) == OUTSIDE_THREAT]
        judged = [row for row in ended if _status(row) != OUTSIDE_THREAT]
        self.ok = judged or ended
        self.failed = [row for row in rows if audit_failed(row)]
        self.bounded = [row for row in self.ok if _bound_value(row) is not None]
        self.by_status: dict[str, list[dict[str, Any]]] = {}
        for row in self.ok:
            self.by_status.setdefault((row.get("verdict") or {}).get("status") or "not evaluable", []).append(row)

    def best(self, rows: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """The row with the largest bound among `rows` (default: every audit that ended)."""
        candidates = [row for row in (self.ok if rows is None else rows) if _bound_value(row) is not None]
        return max(candidates, key=_bound_value) if candidates else None

    def bound(self) -> dict[str, str] | None:
        """The strongest bound in words: the value, its confidence and samples, and — when it is
        the largest of several — that picking it is a selection, with the union-bound confidence."""
        best = self.best()
        if best is None:
            return None
        note = ""
        if len(self.bounded) > 1:
            count = len(self.bounded)
            levels = [_finite(row.get("confidence")) for row in self.bounded]
            together = None if None in levels else 1 - sum(1 - level for level in levels)
            note = f"largest of {count} audit bounds, each at its own confidence"
            if together is not None and together > 0:
                note += f"; all {count} hold together with ≥ {100 * together:.3g} % confidence (union bound)"
        return {"value": main_bound_text(best), "confidence": confidence_text(best),
                "samples": samples_text(best), "audit": f"{best.get('label', '?')} · {best.get('subject', '?')}",
                "note": note}

    def tightness(self) -> str:
        best = self.best()
        return "—" if best is None else tightness_text(best)

    def conditions(self) -> list[str]:
        """The constants' ranges the strongest refutation (or outside-range verdict) rests on."""
        for status in ("conditionally refuted", "outside range"):
            rows = self.by_status.get(status, [])
            if rows:
                best = self.best(rows) or rows[0]
                return [str(c) for c in (best.get("verdict") or {}).get("conditions") or []]
        return []


def _seeds(rows: list[dict[str, Any]]) -> str:
    """How many seeds the rows come from, in words: a verdict resting on one seed's bound says so."""
    count = len({row.get("seed") for row in rows})
    return "one seed" if count == 1 else f"{count} seeds"


def _refuting(evidence: _Evidence, status: str, opening: str) -> tuple[str, str] | None:
    """(status, sentence) when some audit's verdict is `status` (a refutation, conditional or
    not): the strongest one's reason, how many audits and seeds it rests on, and — when other
    audits did not refute — the chance that one of them refutes a true claim (union bound)."""
    refuting = evidence.by_status.get(status, [])
    if not refuting:
        return None
    strongest = evidence.best(refuting) or refuting[0]
    share = (f"{len(refuting)} of {len(evidence.ok)} audits" if len(evidence.ok) > 1 else "its audit") + \
        f" ({_seeds(evidence.ok)} run)"
    sentence = f"{opening} by {share}: {(strongest.get('verdict') or {}).get('reason') or 'no reason stored'}"
    levels = [_finite(row.get("confidence")) for row in evidence.ok]
    if len(refuting) < len(evidence.ok) and None not in levels:
        chance = sum(1 - level for level in levels)
        sentence += (f". With {len(evidence.ok)} audits, the chance that one refutes a true claim is at most "
                     f"{100 * min(chance, 1):.3g} % (union bound)")
    elif len(refuting) > 1:
        sentence += f". Each of the {len(refuting)} audits refutes it on its own, at its own confidence"
    return status, sentence


def _audit_status(evidence: _Evidence) -> tuple[str, str] | None:
    """(status, sentence) the audits alone give, or None when no audit ended with a bound."""
    refuted = _refuting(evidence, "refuted", "Refuted") or \
        _refuting(evidence, "conditionally refuted", "Refuted only for constants the paper never gives,")
    if refuted:
        return refuted
    outside = evidence.by_status.get("outside range", [])
    outside_model = evidence.by_status.get(OUTSIDE_THREAT, [])
    if outside_model and not outside:
        best = evidence.best(outside_model) or outside_model[0]
        return OUTSIDE_THREAT, (f"Only an active adversary's audits ({_seeds(evidence.ok)} run) speak for this claim: "
                                f"{(best.get('verdict') or {}).get('reason') or 'no reason stored'}")
    if outside:
        best = evidence.best(outside) or outside[0]
        return "outside range", (f"Its audits ({_seeds(evidence.ok)} run) cannot judge the claim here: "
                                 f"{(best.get('verdict') or {}).get('reason') or 'no reason stored'}")
    consistent = [row for row in evidence.by_status.get("consistent", []) if (_bound_value(row) or 0) > 0]
    inconclusive = evidence.by_status.get("inconclusive", []) + [
        row for row in evidence.by_status.get("consistent", []) if (_bound_value(row) or 0) <= 0]
    if consistent:
        best = evidence.best(consistent) or consistent[0]
        reason = (best.get("verdict") or {}).get("reason") or f"the strongest finds {main_bound_text(best)}"
        return "consistent", (f"No audit refutes the claim ({_seeds(evidence.ok)} run): {reason.rstrip('.')}. "
                              "A lower bound can contradict a claim, never prove it.")
    if inconclusive:
        best = evidence.best(inconclusive) or inconclusive[0]
        reason = (best.get("verdict") or {}).get("reason") or f"the strongest finds {main_bound_text(best)}"
        return "inconclusive", (f"Inconclusive: the audits found no evidence at this strength ({reason.rstrip('.')}). "
                                "That is not evidence of privacy.")
    if evidence.ok:
        reason = (evidence.ok[0].get("verdict") or {}).get("reason") or "no reason stored"
        return "not evaluable", f"The audit cannot judge the claim: {reason}"
    return None


def _failed_text(evidence: _Evidence) -> str:
    if not evidence.failed:
        return ""
    return (f" {len(evidence.failed)} audit attempt{'s' if len(evidence.failed) > 1 else ''} failed "
            f"({evidence.failed[0].get('status') or 'no reason stored'}).")


def _understated(claims: list[dict[str, Any]]) -> str | None:
    """The sentence saying the claim is below the sound accountant, or None when it is not (in
    any seed). Compares ε when both are stated, else δ (a (0, δ) claim)."""
    eps = [c for c in claims if _below(c.get("eps_claimed"), c.get("eps_sound"))]
    delta = [c for c in claims if _below(c.get("delta"), c.get("delta_sound"))]
    found, name, sound_key, claimed_key = (eps, "ε", "eps_sound", "eps_claimed") if eps else \
        (delta, "δ", "delta_sound", "delta")
    if not found:
        return None
    claimed = _over_seeds([c[claimed_key] for c in found])
    sound = _over_seeds([c[sound_key] for c in found])
    seeds = f" in {len(found)} of {len(claims)} seeds" if len(found) < len(claims) else ""
    where = f" at ε = {_over_seeds([c.get('eps_claimed') for c in found])}" if name == "δ" else ""
    return (f"The claim is below the sound accountant{seeds}: the paper's formula gives {name} = {claimed}{where}, "
            f"a standard accountant on the mechanism the code runs gives {name} = {sound}, so the claim "
            "understates the privacy loss. This is an accounting finding, not an attack.")


def _claim_cell(claims: list[dict[str, Any]]) -> dict[str, str]:
    first = claims[0]
    stated = [c.get("eps_stated") for c in claims]
    claimed = [c.get("eps_claimed") for c in claims]
    differs = any(_finite(s) is not None and _finite(c) is not None and not math.isclose(s, c, rel_tol=1e-2)
                  for s, c in zip(stated, claimed))
    return {"notion": str(first.get("notion", "?")), "equation": str(first.get("equation", "")),
            "stated": _over_seeds(stated), "recomputed": _over_seeds(claimed),
            "differs": "the recomputed ε differs from the paper's number" if differs else "",
            "delta": _over_seeds([c.get("delta") for c in claims]), "horizon": str(first.get("horizon", "—"))}


def _sound_cell(claims: list[dict[str, Any]]) -> dict[str, str]:
    delta_sound = _over_seeds([c.get("delta_sound") for c in claims])
    return {"eps": _over_seeds([c.get("eps_sound") for c in claims]),
            "delta": "" if delta_sound == "—" else delta_sound,
            "method": str(claims[0].get("sound_method", ""))}


def _findings(claims: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The analytic findings of a run's claims, each kind once, saying in how many seeds it holds
    when not in all of them (the first seed's sentence speaks for the others)."""
    by_kind: dict[str, list[str]] = {}
    for claim in claims:
        for finding in claim.get("findings") or []:
            by_kind.setdefault(str(finding.get("kind", "?")), []).append(str(finding.get("text", "")))
    found = []
    for kind, texts in by_kind.items():
        seeds = "" if len(texts) == len(claims) else f" (in {len(texts)} of {len(claims)} seeds)"
        found.append({"kind": kind, "text": texts[0] + seeds})
    return found


def _median(values: list[Any]) -> float | None:
    """The median of the finite values over seeds (an infinite one counts as infinite), None when
    there is none: the one number per verdict the overview figure places."""
    numbers = sorted(float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                     and not math.isnan(v))
    return numbers[len(numbers) // 2] if numbers else None


def _values(claimed: list[Any], stated: list[Any], sound: list[Any], best: dict[str, Any] | None,
            deltas: tuple[list[Any], list[Any]] = ([], [])) -> dict[str, Any]:
    """The verdict's values as numbers, for the overview figure and the summary records: claimed
    (recomputed), stated and sound ε (medians over seeds); the strongest audit's bound, ε_LB for an
    ε bound or δ_LB for a δ one (the other None), and whether it is of δ; its ε estimate; and the
    claimed and sound δ (`deltas`, medians), which decide a (0, δ) claim."""
    best = best or {}
    of_delta = (best.get("tightness") or {}).get("of") == "delta"
    return {"claimed": _median(claimed), "stated": _median(stated), "sound": _median(sound),
            "eps_lb": None if of_delta else _finite(best.get("eps_lb")),
            "estimate": _finite(best.get("eps_estimate")), "of_delta": of_delta,
            "delta_lb": _finite(best.get("delta_lb")) if of_delta else None,
            "delta_claimed": _median(deltas[0]), "delta_sound": _median(deltas[1])}


def _short(status: str, values: dict[str, Any], claim: dict[str, str], sound: dict[str, str],
           bound: dict[str, str] | None, conditions: list[str] | None = None) -> str:
    """The verdict in one short sentence beside its badge (so without repeating the status),
    numbers included; the full reasoning goes into the row's details."""
    found = bound["value"] if bound else "no bound"
    if status == "refuted":
        delta = "" if claim["delta"] == "—" else f", δ {claim['delta']}"
        return f"The audit finds {found}, beyond the claim (ε {claim['recomputed']}{delta})."
    if status == "conditionally refuted":
        return (f"For {'; '.join(conditions) or 'the assumed constants'}: the audit finds {found}, "
                f"beyond the claim's ε {claim['recomputed']} at the assumed values.")
    if status == "outside range":
        would = (f" Were it applied anyway, the bound would exceed it for {'; '.join(conditions)}."
                 if conditions else "")
        return (f"The claim (ε {claim['recomputed']}) does not apply to this run, "
                f"whatever the audit finds ({found}).{would}")
    if status == OUTSIDE_THREAT:
        return (f"An active adversary's evidence ({found}), outside the claim's threat model: it cannot refute the "
                f"claim (ε {claim['recomputed']}).")
    if status == "understated":
        delta = f", δ {sound['delta']}" if sound.get("delta") else ""
        return f"Claims ε {claim['recomputed']}; a sound accountant gives ε {sound['eps']}{delta}."
    if status == "no privacy":
        return "What the attacks recover is in the details and below."
    if status == "consistent":
        return f"So far the audit finds {found}, within the claim (ε {claim['recomputed']})."
    if status == "inconclusive":
        if values["eps_lb"] or values["delta_lb"]:
            return (f"The audit finds {found}, but at its strength it could not have refuted "
                    f"the claim (ε {claim['recomputed']}).")
        return f"No evidence at this strength ({found})."
    if status == "not evaluable":
        return "The audit cannot judge this claim (details)."
    if status == "failed":
        return "Every attempt of the audit failed (details)."
    return f"Accounting only (claimed ε {claim['recomputed']}, sound ε {sound['eps']})."


def claim_threat(claims: list[dict[str, Any]]) -> str:
    """The run's claimed threat model in words (`privaudit.accounting.ClaimThreat`, as the training
    rows store it), or why none is named."""
    threat = claims[0].get("threat")
    if isinstance(threat, dict) and threat.get("kind"):
        return f"{threat['kind']} ({threat.get('source') or 'no source stored'})"
    if claims[0].get("notion") == "none":
        return "none: no privacy is claimed"
    return "not stated in these rows (written before claims named one)"


def _covers_active(claims: list[dict[str, Any]]) -> bool:
    """Whether the run's claim is stated against any adversary, one that sends crafted messages too."""
    threat = claims[0].get("threat")
    return isinstance(threat, dict) and threat.get("kind") == "any adversary"


def _active_text(row: dict[str, Any]) -> str:
    """An active attack's inversion row in words: records recovered by it and by the passive attack
    on the same run (`privaudit.rows.ActiveRecord`)."""
    record = row["active"]
    sides = {side: record.get(side) or {} for side in ("active", "passive")}
    return (f"the active attack {row.get('label', '?')} (seed {row.get('seed', '?')}, agent {record.get('liar', '?')} "
            f"lying to agent {record.get('victim', '?')}) recovered {sides['active'].get('recovered', '?')} of "
            f"{record.get('records', '?')} records ≥ {record.get('threshold_db', '?')} dB, the passive attack on the "
            f"same run {sides['passive'].get('recovered', '?')}")


def _outside_audits(evidence: _Evidence, status: str) -> list[dict[str, str]]:
    """The strongest audit outside the claim's threat model as a finding, where other audits
    decided the status (`_Evidence.outside_threat`)."""
    if not evidence.outside_threat or status == OUTSIDE_THREAT:
        return []
    best = evidence.best(evidence.outside_threat) or evidence.outside_threat[0]
    return [{"kind": OUTSIDE_THREAT, "text": (best.get("verdict") or {}).get("reason") or "no reason stored"}]


def _threat_findings(claims: list[dict[str, Any]], evidence: _Evidence, status: str,
                     active: list[dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    """The findings and notes of an active adversary's evidence on a run: audits outside the claim's
    threat model that did not decide the status, and active inversions (which play no game), each a
    finding outside the threat model, or a note where the claim covers any adversary."""
    if all(claim.get("notion") == "none" for claim in claims):
        return [], []
    findings = _outside_audits(evidence, status)
    if not active:
        return findings, []
    said = "; ".join(_active_text(row) for row in active)
    if _covers_active(claims):
        return findings, [f"Active attack, inside the claim's threat model (any adversary): {said}. A reconstruction "
                          "is not a bound: only a reconstruction game's trials judge the claim."]
    findings.append({"kind": OUTSIDE_THREAT, "text": (
        f"outside the claim's threat model ({claim_threat(claims)}): {said}; a finding of what an adversary that "
        "sends crafted messages gains, never a refutation")})
    return findings, []


def _run_verdict(label: str, runs: list[dict[str, Any]], evidence: _Evidence, related: list[dict[str, Any]],
                 leakage: list[str], active: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The verdict of one defense run (all its seeds); `active` its active attacks' inversion rows."""
    claims = [row.get("claim") or {} for row in runs]
    audited = _audit_status(evidence)
    understated = _understated(claims)
    if all(claim.get("notion") == "none" for claim in claims):
        status = "no privacy"
        why = claims[0].get("sound_method") or claims[0].get("equation") or "no reason stored"
        sentence = f"No privacy is claimed ({why})"
        sentence += (": the strongest leakage found is listed below." if leakage or evidence.bounded else
                     "; no attack in these results measured what leaks.")
    elif audited is not None and audited[0] == "refuted":
        status, sentence = audited
    elif understated is not None:
        status = "understated"
        sentence = understated + (" " + audited[1] if audited is not None else " No empirical audit in these results.")
    elif audited is not None:
        status, sentence = audited
    else:
        status = "not audited"
        sentence = "No empirical bound in these results: the claim stands on accounting alone."
        if all(_finite(c.get("eps_sound")) is None and _finite(c.get("delta_sound")) is None for c in claims):
            sentence += f" No sound bound either: {claims[0].get('sound_method', 'no reason stored')}."
    sentence += _failed_text(evidence)
    notes = list(leakage)
    for audit in related:
        verdict = (audit.get("verdict") or {}).get("status") or audit.get("status") or "?"
        notes.append(f"Mechanism audit of the same algorithm: {audit.get('label', '?')} · "
                     f"{audit.get('subject', '?')} ({verdict}; see its own verdict).")
    findings = _findings(claims)
    if understated is not None and status != "understated":
        findings.insert(0, {"kind": "understated", "text": understated})
    threat_found, threat_notes = _threat_findings(claims, evidence, status, active or [])
    findings += threat_found
    notes += threat_notes
    claim, sound, bound = _claim_cell(claims), _sound_cell(claims), evidence.bound()
    values = _values([c.get("eps_claimed") for c in claims], [c.get("eps_stated") for c in claims],
                     [c.get("eps_sound") for c in claims], evidence.best(),
                     ([c.get("delta") for c in claims], [c.get("delta_sound") for c in claims]))
    return {"subject": label, "kind": "defense run", "detail": str(runs[0].get("title", "")),
            "seeds": ", ".join(str(row.get("seed")) for row in runs), "claim": claim, "sound": sound,
            "bound": bound, "tightness": evidence.tightness(), "status": status, "sentence": sentence,
            "short": _short(status, values, claim, sound, bound, evidence.conditions()), "values": values,
            "ratio": ratio_text(status, values), "threat": claim_threat(claims),
            "assumptions": [str(a) for a in claims[0].get("assumptions") or []], "group": runs[0].get("group"),
            "notes": notes, "findings": findings, "conditions": evidence.conditions()}


def _audit_verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of one audit of its own (all its seeds): a mechanism audit, or a canary audit
    of no run in these results."""
    evidence = _Evidence(rows)
    first = rows[0]
    audited = _audit_status(evidence)
    claims = [{"eps_claimed": row.get("eps_claimed"), "eps_sound": row.get("eps_sound")} for row in evidence.ok]
    understated = _understated(claims) if claims else None
    if audited is None:
        status, sentence = "failed", f"Every attempt of the audit failed: {first.get('status') or 'no reason stored'}"
    elif audited[0] != "refuted" and understated is not None:
        status, sentence = "understated", understated + " " + audited[1]
    else:
        status, sentence = audited
    if audited is not None:
        sentence += _failed_text(evidence)
    statement = next(((row.get("verdict") or {}).get("statement") for row in rows
                      if (row.get("verdict") or {}).get("statement")), None)
    kind = str(first.get("kind", "?"))
    speaks = first.get("defense_label") or first.get("defense")
    threat = next(((row.get("verdict") or {}).get("threat") for row in rows if (row.get("verdict") or {}).get("threat")),
                  "not stated in these rows")
    delta_sound = _over_seeds([row.get("delta_sound") for row in rows])
    claim = {"notion": "", "equation": statement or "no claim stated", "stated": _over_seeds(
                 [row.get("eps_stated") for row in rows]),
             "recomputed": _over_seeds([row.get("eps_claimed") for row in rows]), "differs": "",
             "delta": "—", "horizon": "—"}
    sound = {"eps": _over_seeds([row.get("eps_sound") for row in rows]),
             "delta": "" if delta_sound == "—" else delta_sound, "method": ""}
    bound = evidence.bound()
    values = _values([row.get("eps_claimed") for row in rows], [row.get("eps_stated") for row in rows],
                     [row.get("eps_sound") for row in rows], evidence.best())
    return {"subject": str(first.get("subject", "?")), "kind": f"{kind} audit",
            "detail": f"{first.get('label', '?')}" + (f" (for {speaks})" if speaks else ""),
            "seeds": ", ".join(str(row.get("seed")) for row in rows), "claim": claim, "sound": sound,
            "bound": bound, "tightness": evidence.tightness(), "status": status, "sentence": sentence,
            "short": _short(status, values, claim, sound, bound, evidence.conditions()), "values": values,
            "ratio": ratio_text(status, values), "threat": threat, "assumptions": [], "group": None, "notes": [],
            "findings": _findings(evidence.ok) + _outside_audits(evidence, status),
            "conditions": evidence.conditions()}


def _link(audits: dict[str, list[dict[str, Any]]], runs: dict[str, list[dict[str, Any]]]) -> tuple[
        dict[str, list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """Canary and reconstruction audits onto the runs they speak for: the run holding the training
    cell the audit names, else the run with its `defense_label`, else the runs of the table with
    that label; the audits left over are verdicts of their own."""
    linked: dict[str, list[dict[str, Any]]] = {label: [] for label in runs}
    run_of_cell = {row["cell"]: label for label, seeds in runs.items() for row in seeds}
    alone = []
    for rows in audits.values():
        speaks = rows[0].get("defense_label")
        matches = []
        of_run = rows[0].get("kind") in RUN_AUDITS
        if of_run:
            matches = list(dict.fromkeys(run_of_cell[row["training"]] for row in rows
                                         if row.get("training") in run_of_cell))
        if not matches and of_run and speaks:
            matches = [label for label, seeds in runs.items() if seeds[0].get("label") == speaks] or \
                      [label for label, seeds in runs.items()
                       if ((seeds[0].get("config") or {}).get("run") or {}).get("label") == speaks]
        for label in matches:
            linked[label].extend(rows)
        if not matches:
            alone.append(rows)
    return linked, alone


def audit_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every audit row of the results: the `[[audit]]` tables' and the reconstruction games that
    leaking inversions played, which their inversion rows hold (`reconstruction_audit`,
    `privaudit.campaign.inversion_findings.leak_bound`): each is a reconstruction audit of the run
    its inversion attacked, read as one."""
    found = []
    for row in rows:
        if row_type(row) == "audit":
            found.append(row)
        elif row_type(row) == "inversion" and isinstance(row.get("reconstruction_audit"), dict):
            found.append(row["reconstruction_audit"])
    return found


def verdict_section(rows: list[dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The verdicts: one per defense run (`runs`, as `privaudit.reports.html.runs_of` groups them) and one
    per audit of its own, most severe first (`severity`), with the summary paragraph's counts and,
    per status, its subjects with the number that decides each (`ratio_text`)."""
    audits: dict[str, list[dict[str, Any]]] = {}
    for row in audit_rows(rows):
        audits.setdefault(str(row.get("group", row["cell"])), []).append(row)
    linked, alone = _link(audits, runs)
    reconstructions = strongest_reconstructions(rows)
    memberships = strongest_memberships(rows)
    mechanisms = [group[0] for group in alone if group[0].get("kind") == "mechanism"]
    entries = []
    for label, seeds in runs.items():
        group = seeds[0].get("group")
        leakage = ([f"Reconstruction: {reconstructions[group]}"] if group in reconstructions else []) + \
                  ([f"Membership: {memberships[group]}"] if group in memberships else [])
        related = [audit for audit in mechanisms
                   if audit.get("defense") and audit.get("defense") == seeds[0].get("defense")]
        cells = {row["cell"] for row in seeds}
        active = [row for row in rows if row_type(row) == "inversion" and isinstance(row.get("active"), dict)
                  and row.get("training") in cells]
        entries.append(_run_verdict(label, seeds, _Evidence(linked[label]), related, leakage, active))
    entries.extend(_audit_verdict(group) for group in alone)
    entries.sort(key=severity)
    for entry in entries:
        entry["css"] = entry["status"].replace(" ", "-")
    audited_runs = sum(any(not audit_failed(row) for row in linked[label]) for label in runs)
    runs_text = f"{len(runs)} defense run{'s' if len(runs) != 1 else ''}"
    summary = (f"{runs_text}, {audited_runs} of them audited empirically"
               + (f", and {len(alone)} audit{'s' if len(alone) != 1 else ''} with a verdict of "
                  f"{'their' if len(alone) != 1 else 'its'} own" if alone else "") + ".")
    groups = [{"status": status, "css": status.replace(" ", "-"), "meaning": meaning,
               "subjects": [{"subject": entry["subject"], "ratio": entry["ratio"]}
                            for entry in entries if entry["status"] == status]}
              for status, meaning in MEANINGS.items()]
    analytic = [{"kind": kind, "subjects": [entry["subject"] for entry in entries
                                            if any(f["kind"] == kind for f in entry["findings"])]}
                for kind in dict.fromkeys(f["kind"] for entry in entries for f in entry["findings"])]
    return {"summary": summary, "analytic": analytic,
            "groups": [group for group in groups if group["subjects"]], "entries": entries}


def verdict_summary(rows: list[dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The verdicts as plain records, for a terminal or a script (`privaudit run`'s closing table,
    `privaudit report --format json`): per verdict of `verdict_section`, in its order, the subject,
    kind, status and sentence, the claim's threat model, the claimed (recomputed), stated and sound ε as the report prints
    them (over seeds), the strongest bound in words, and that bound as a number with the ε estimate
    of its audit row (`eps_lb` for an ε bound, `delta_lb` for a δ one; None when there is none),
    and the kinds of its analytic findings."""
    return [{"subject": entry["subject"], "kind": entry["kind"], "status": entry["status"],
             "eps_claimed": entry["claim"]["recomputed"], "eps_stated": entry["claim"]["stated"],
             "eps_sound": entry["sound"]["eps"], "bound": (entry["bound"] or {}).get("value"),
             "eps_lb": entry["values"]["eps_lb"], "delta_lb": entry["values"]["delta_lb"],
             "eps_estimate": entry["values"]["estimate"], "sentence": entry["sentence"], "threat": entry["threat"],
             "findings": [finding["kind"] for finding in entry["findings"]]}
            for entry in verdict_section(rows, runs)["entries"]]
