"""The "Participants who lie" section (issue 39): per defense run that a participant who lies
attacked, what it obtained by lying beside what the same agents obtained by listening to the same
runs, and the claim's threat model, which says what the lie is evidence of.

Read from rows, never recomputed. An active inversion row carries its passive twin (its `active`
record: the same agents, honest, on the same seed and batch); an active canary audit is an audit row
with an `active` record, set beside the passive audits of the same training run with the same canary
kind (the same table with another threat, as `privaudit/presets/active.toml` writes them). Against a
claim stated for any adversary the active bound is judged like any audit (a clipped and noised
release is private wherever it is computed); against one stated for honest-but-curious agents or an
eavesdropper it is a finding outside the claim's threat model, never a refutation
(`privaudit.reports.verdicts`).
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any

from privaudit.reports.audits import audit_failed, number
from privaudit.reports.inversion import row_type

ANY_ADVERSARY = "any adversary"


def _value(record: dict[str, Any], key: str) -> float | None:
    """A side's batch score `metrics[key]`, None when absent or NaN (nothing was reconstructed)."""
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    value = metrics.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return None
    return float(value)


def _db(value: float) -> str:
    return "∞ dB" if math.isinf(value) else f"{value:.1f} dB"


def _inversion_side(sides: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """One side of an active attack's trials over seeds (`records[s]` the `active` record of seed s,
    `sides[s]` its side), in words: records recovered per seed, each of that seed's batch (a Poisson
    batch differs from seed to seed), median batch PSNR and SSIM, seeds judged leaking."""
    psnr = [v for v in (_value(side, "psnr") for side in sides) if v is not None]
    ssim = [v for v in (_value(side, "ssim") for side in sides) if v is not None]
    leaks = [side["leak"]["leak"] for side in sides if isinstance(side.get("leak"), dict)]
    return {"label": sides[0].get("label", "?"),
            "recovered": ", ".join(f"{side.get('recovered', '?')}/{record.get('records', '?')}"
                                   for side, record in zip(sides, records)),
            "threshold": f"{records[0].get('threshold_db', '?')}",
            "psnr": _db(median(psnr)) if psnr else "—", "ssim": f"{median(ssim):.3f}" if ssim else "—",
            "leak": f"{sum(leaks)} of {len(leaks)}" if leaks else "—"}


def _inversions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per active inversion table and round on this run: its side and the passive side over seeds."""
    cells: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("status") == "ok" and isinstance(row.get("active"), dict):
            cells.setdefault((str(row.get("label", "?")), row.get("round")), []).append(row)
    shown = []
    for (label, round_), found in cells.items():
        records = [row["active"] for row in sorted(found, key=lambda r: r.get("seed", 0))]
        first = records[0]
        shown.append({"name": label, "round": round_, "liar": first.get("liar"), "victim": first.get("victim"),
                      "agents": ", ".join(map(str, first.get("agents") or [])),
                      "assumptions": first.get("assumptions") or [],
                      "sides": [_inversion_side([record[side] for record in records], records)
                                for side in ("active", "passive")]})
    return shown


def _canary(row: dict[str, Any]) -> str:
    """The canary kind an audit row's table named."""
    config = row.get("config") if isinstance(row.get("config"), dict) else {}
    table = config.get("audit") if isinstance(config.get("audit"), dict) else config
    return str(table.get("canary") or "?")


def _threat(row: dict[str, Any]) -> str:
    config = row.get("config") if isinstance(row.get("config"), dict) else {}
    table = config.get("audit") if isinstance(config.get("audit"), dict) else config
    return str(table.get("threat") or "?")


def _audit_line(row: dict[str, Any]) -> dict[str, Any]:
    """One audit of the comparison in words: who it was, its bound, estimate, sound and claimed ε
    and its verdict."""
    active = row.get("active") if isinstance(row.get("active"), dict) else None
    pooled = [str(agent) for agent in (active or {}).get("agents") or []]
    who = (f"agent {active.get('liar')} lies to agent {active.get('victim')}"
           + (f" (agents {', '.join(pooled)} pool what they hear)" if len(pooled) > 1 else "") if active
           else f"{_threat(row).replace('_', ' ')}, listening")
    verdict = row.get("verdict") if isinstance(row.get("verdict"), dict) else {}
    failed = audit_failed(row)
    return {"who": who, "active": active is not None, "label": str(row.get("label", "?")), "seed": row.get("seed"),
            "bound": str(row.get("status")) if failed else number(row.get("eps_lb")),
            "confidence": number(row.get("confidence")), "estimate": number(row.get("eps_estimate")),
            "sound": number(row.get("eps_sound")), "claimed": number(row.get("eps_claimed")),
            "verdict": str(verdict.get("status", "—")), "failed": failed,
            "eps_lb": None if failed else row.get("eps_lb")}


def _audits(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per canary kind with an active audit on this run: the active audits beside the passive ones,
    seed by seed, and their means compared in words."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row_type(row) == "audit" and row.get("kind") == "canary":
            kinds.setdefault(_canary(row), []).append(row)
    compared = []
    for canary, found in kinds.items():
        lines = [_audit_line(row) for row in sorted(found, key=lambda r: (r.get("active") is None, r.get("seed", 0)))]
        if not any(line["active"] for line in lines):
            continue
        compared.append({"canary": canary, "lines": lines, "difference": _difference(lines)})
    return compared


RATIO_FLOOR = 0.1
"""The passive mean below which no ratio is printed: a ratio over a bound this near 0 (one seed's
0.008 against 0.3) says nothing of either attacker."""


def _difference(lines: list[dict[str, Any]]) -> str:
    """The active and passive bounds' means in one sentence: lower bounds both, never a ratio of
    true losses."""
    means = {}
    for side in (True, False):
        bounds = [float(line["eps_lb"]) for line in lines if line["active"] is side
                  and isinstance(line["eps_lb"], (int, float))]
        means[side] = sum(bounds) / len(bounds) if bounds else None
    active, passive = means[True], means[False]
    if active is None:
        return "The active audits ended without a bound."
    if passive is None:
        return f"Lying, the attacker certifies ε ≥ {active:.3g} on average; no passive audit of this canary to compare."
    if active == 0 and passive == 0:
        return ("Neither lying nor listening to the same runs certified any ε > 0: not detected at this strength, "
                "either way.")
    ratio = f" ({active / passive:.2g}×)" if passive >= RATIO_FLOOR else ""
    return (f"Lying, the attacker certifies ε ≥ {active:.3g} on average; listening to the same runs, ε ≥ {passive:.3g}"
            f"{ratio}. Both are lower bounds at their confidence: they compare what each attacker could certify, "
            "not the true losses.")


def active_section(rows: list[dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """Everything the "Participants who lie" section shows (`runs`: the training rows of each defense
    run by label, as `privaudit.reports.html.runs_of` groups them), or None when no participant lied."""
    entries = []
    for label, seeds in runs.items():
        cells = {row["cell"] for row in seeds}
        attached = [row for row in rows if row.get("training") in cells]
        inversions = _inversions([row for row in attached if row_type(row) == "inversion"])
        audits = _audits(attached)
        if not inversions and not audits:
            continue
        claim = seeds[0].get("claim") if isinstance(seeds[0].get("claim"), dict) else {}
        threat = claim.get("threat") if isinstance(claim.get("threat"), dict) else {}
        claims = claim.get("eps_claimed") is not None
        kind = str(threat.get("kind") or ("not stated" if claims else "none: the run claims no privacy"))
        note = ("Active evidence is judged against this claim." if kind == ANY_ADVERSARY
                else "Active evidence lies outside this claim's threat model: reported, never a refutation." if claims
                else "Nothing is claimed: the lie shows what a participant obtains, not a claim's failure.")
        entries.append({"label": label, "threat": kind, "source": str(threat.get("source") or ""), "note": note,
                        "inversions": inversions, "audits": audits})
    return {"entries": entries} if entries else None
