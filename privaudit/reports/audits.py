"""The report's "Empirical audits" section, from audit rows alone: per audit row, what was audited
and how, the lower bounds ε_LB (at δ) and δ_LB (at ε) with their confidence and sample size, the
estimate (named as one, never a bound), the values they are to be compared with (the exact value
for the pair of inputs the audit found, the sound accountant's, the claimed one and the one the
paper states), the verdict with its reason, and — when the row stores how the bound grew with the
samples drawn — a figure of that curve against those values.

The text helpers here are shared with the verdicts (`privaudit/reports/verdicts.py`), so both say the same
thing the same way. Nothing is recomputed: bounds, verdicts and tightness are read from the rows.
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.reports.figures import audit_curve
from privaudit.reports.inversion import row_type


def audit_failed(row: dict[str, Any]) -> bool:
    """Whether an audit ended without bounds (its status says why)."""
    return row.get("status") != "ok"


def _finite(value: Any) -> float | None:
    """A stored number, None when absent or not finite."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def number(value: Any) -> str:
    """A stored number to 4 significant digits; "—" when absent, "∞" when infinite (stored as a
    float or as the string "inf", as JSON has no infinity)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return "∞"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "∞" if value == math.inf else f"{value:.4g}"
    return "—"


def samples_text(row: dict[str, Any]) -> str:
    """How much the bound rests on: observations per input (mechanism), runs per world (canary,
    repeated runs), canaries in one training run (canary, one run) or trials (reconstruction)."""
    samples = row.get("samples")
    if not isinstance(samples, int):
        return "samples not stored"
    if row.get("kind") == "reconstruction":
        unit = "reconstruction trials"
    elif row.get("kind") != "canary":
        unit = "observations per input"
    else:
        unit = "canaries in one training run" if row.get("method") == "one_run" else "runs per world"
    return f"{samples:,} {unit}"


def confidence_text(row: dict[str, Any]) -> str:
    confidence = _finite(row.get("confidence"))
    return "confidence not stored" if confidence is None else f"{100 * confidence:.4g} % confidence"


def eps_bound_text(row: dict[str, Any]) -> str:
    """"ε ≥ 0.93 at δ = 1e-05", or "—" for a row without the bound."""
    if row.get("eps_lb") is None:
        return "—"
    return f"ε ≥ {number(row['eps_lb'])} at δ = {number(row.get('delta'))}"


def delta_bound_text(row: dict[str, Any]) -> str:
    """"δ ≥ 0.0098 at ε = 0", or "—" for a row without the bound."""
    if row.get("delta_lb") is None:
        return "—"
    return f"δ ≥ {number(row['delta_lb'])} at ε = {number(row.get('delta_lb_eps'))}"


def main_bound_text(row: dict[str, Any]) -> str:
    """The bound the row's tightness is of (ε unless it says δ), in words."""
    of_delta = (row.get("tightness") or {}).get("of") == "delta"
    return delta_bound_text(row) if of_delta else eps_bound_text(row)


def tightness_text(row: dict[str, Any]) -> str:
    """The stored tightness: the bound as a fraction of the sound value and of the pair's exact
    value; "—" when neither is known (no finite reference to divide by)."""
    tightness = row.get("tightness") or {}
    of = "δ" if tightness.get("of") == "delta" else "ε"
    parts = []
    if _finite(tightness.get("sound")) is not None:
        above = " (above it: the sound bound itself is contradicted)" if tightness["sound"] > 1 + 1e-9 else ""
        parts.append(f"{tightness['sound']:.3g} of the sound {of}{above}")
    if _finite(tightness.get("exact")) is not None:
        parts.append(f"{tightness['exact']:.3g} of the exact {of} for the pair")
    return "; ".join(parts) or "—"


def _exact_text(row: dict[str, Any]) -> str:
    exact = row.get("exact") or {}
    parts = [f"{name} {number(exact[key])}" for name, key in (("ε", "eps"), ("δ", "delta"))
             if exact.get(key) is not None]
    return ", ".join(parts) or "—"


def _curve_figure(row: dict[str, Any]) -> str | None:
    """The bound against samples — the curve's points and the row's own bound at its full sample
    size — with the exact, sound and claimed values as lines, when the row stores a curve."""
    of_delta = (row.get("tightness") or {}).get("of") == "delta"
    key = "delta_lb" if of_delta else "eps_lb"
    stored = [*(row.get("curve") or []), {"samples": row.get("samples"), key: row.get(key)}] if row.get("curve") else []
    points = sorted({float(point["samples"]): float(point[key]) for point in stored
                     if _finite(point.get("samples")) is not None and _finite(point.get(key)) is not None
                     and point["samples"] > 0}.items())
    if not points:
        return None
    exact = row.get("exact") or {}
    if of_delta:
        candidates = {"exact for the pair": exact.get("delta"), "sound": row.get("delta_sound")}
        ylabel = f"δ lower bound at ε = {number(row.get('delta_lb_eps'))}"
    else:
        candidates = {"exact for the pair": exact.get("eps"), "sound": row.get("eps_sound"),
                      "claimed": row.get("eps_claimed")}
        ylabel = f"ε lower bound at δ = {number(row.get('delta'))}"
    references = {label: float(value) for label, value in candidates.items() if _finite(value) is not None}
    title = f"{row.get('label', '?')} · {row.get('subject', '?')} · seed {row.get('seed', '?')}"
    return audit_curve(points, references, ylabel, title)


def audit_section(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Everything the "Empirical audits" section shows, or None without audit rows."""
    audits = [row for row in rows if row_type(row) == "audit"]
    if not audits:
        return None
    entries = []
    for row in audits:
        verdict = row.get("verdict") or {}
        label, subject = str(row.get("label", "?")), str(row.get("subject", "?"))
        uri = None if audit_failed(row) else _curve_figure(row)
        entries.append({
            "cell": row["cell"], "label": label, "subject": subject, "kind": str(row.get("kind", "?")),
            "defense": row.get("defense_label") or row.get("defense") or "—", "seed": row.get("seed"),
            "failed": audit_failed(row), "status": row.get("status") or "no status stored",
            "eps_lb": eps_bound_text(row), "delta_lb": delta_bound_text(row), "confidence": confidence_text(row),
            "samples": samples_text(row), "claimed": number(row.get("eps_claimed")),
            "stated": number(row.get("eps_stated")), "exact": _exact_text(row),
            "sound": number(row.get("eps_sound")), "tightness": tightness_text(row),
            "estimate": number(row.get("eps_estimate")), "estimate_method": row.get("estimate_method") or "",
            "attack": row.get("attack") or "",
            "verdict": {"status": verdict.get("status") or "—", "statement": verdict.get("statement"),
                        "reason": verdict.get("reason") or ""},
            "figure": None if uri is None else {"uri": uri, "title": f"{label} · {subject}"},
        })
    return {"entries": entries}
