"""The report's "Released model" section: what the final models leak when nobody heard the
training, beside what the transcript leaks (issue 38), from rows alone.

Per audited run, every canary audit of that run side by side: the transcript audits (a listener,
an eavesdropper, a neighbour) and the last-iterate audits (`released_model`, `released_average`:
the final model of one agent, or the average, and nothing else), each with what its attacker
received, its rigorous ε lower bound with its confidence and samples, the estimate (named as one),
the claim and the sound ε, and the verdict. The claim covers the transcript, so a last-iterate bound
can refute it but never support a smaller ε: the section says so, and the verdicts say it too
(`privaudit.attacks.audit.verdict.decide`'s `partial`). Where both kinds of bound exist for a run,
the section gives the largest last-iterate bound as a fraction of the largest transcript bound: how
much of what the audits found in the transcript they also found in the final model alone, at the
strength they ran. Lower bounds both, so the fraction is not a ratio of true privacy losses.

Per agent, membership inference on the released models (`[[membership]]` with a released threat:
LOSS, LiRA and RMIA against each victim's final model, or the one it is handed) beside the
last-iterate canary bounds whose victim is that agent: an attack's success rates and an audit's
rigorous bound, side by side, never merged into one number.

And each position audit run with `released = true`: its figure and table of the ε lower bound
over graph distance, from what each agent receives and from its own final model alone.

Nothing is recomputed.
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.reports.audits import audit_failed, confidence_text, eps_bound_text, number, samples_text
from privaudit.reports.inversion import row_type
from privaudit.reports.membership import method_title
from privaudit.reports.position import released_by_distance


def _received(row: dict[str, Any]) -> tuple[str, str]:
    """(scope, what the attacker received) of a canary audit row: "last iterate" and the release's
    words, or "transcript" and the threat with the channels it heard."""
    detail = row.get("detail") or {}
    released = detail.get("released")
    if isinstance(released, dict):
        return "last iterate", f"{released.get('threat', '?')}: {released.get('sees', '?')}"
    channels = detail.get("channels") or []
    heard = f" hears {', '.join(map(str, channels))}" if channels else ""
    return "transcript", f"{detail.get('threat', row.get('threat') or '?')}{heard}"


def _method(row: dict[str, Any]) -> str:
    detail = row.get("detail") or {}
    canary = detail.get("canary", "?")
    if "canaries" in detail:
        return f"one run, {detail['canaries']:,} {canary} canaries"
    return f"{canary} canary, {samples_text(row)}"


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    scope, received = _received(row)
    verdict = row.get("verdict") or {}
    return {"audit": str(row.get("label", "?")), "seed": row.get("seed"), "scope": scope, "received": received,
            "method": _method(row), "failed": audit_failed(row), "status": row.get("status") or "",
            "eps_lb": eps_bound_text(row), "confidence": confidence_text(row),
            "estimate": number(row.get("eps_estimate")), "sound": number(row.get("eps_sound")),
            "claimed": number(row.get("eps_claimed")), "verdict": verdict.get("status") or "—",
            "reason": verdict.get("reason") or ""}


def _best(rows: list[dict[str, Any]], scope: str) -> float | None:
    """The largest finite ε lower bound among the run's audits of `scope`; None without one."""
    found = [float(row["eps_lb"]) for row in rows if not audit_failed(row) and _received(row)[0] == scope
             and isinstance(row.get("eps_lb"), (int, float)) and not isinstance(row["eps_lb"], bool)
             and math.isfinite(row["eps_lb"])]
    return max(found) if found else None


def _comparison(rows: list[dict[str, Any]]) -> str | None:
    """The largest last-iterate bound against the largest transcript bound of one run, in words."""
    transcript, last = _best(rows, "transcript"), _best(rows, "last iterate")
    if transcript is None or last is None:
        return None
    if transcript == 0:
        return (f"largest ε lower bound: transcript 0 (not detected at this strength), last iterate {number(last)}")
    return (f"largest ε lower bound: transcript {number(transcript)}, last iterate {number(last)}, "
            f"{last / transcript:.2f} of it: the final model alone showed that share of what the transcript showed, "
            "at the strength these audits ran (lower bounds both, not a ratio of true losses)")


def _lowest_tpr(metrics: dict[str, Any]) -> str:
    """"TPR 0.031 at FPR 0.001": the row's TPR at its lowest false-positive rate, "—" without one."""
    rates = sorted((float(key.removeprefix("tpr@")), key) for key in metrics
                   if key.startswith("tpr@") and not key.endswith("_ci") and isinstance(metrics[key], (int, float)))
    return "—" if not rates else f"TPR {number(metrics[rates[0][1]])} at FPR {rates[0][0]:g}"


def _methods(rows: list[dict[str, Any]]) -> list[str]:
    """The membership methods the rows store, in the order first met."""
    return list(dict.fromkeys(name for row in rows for name in (row.get("metrics") or {})))


def _membership(row: dict[str, Any], methods: list[str]) -> list[dict[str, Any]]:
    """Each victim's membership on its released model in one membership row: its own metrics where
    the row pools several victims (`by_victim`), else the row's."""
    releases = {release.get("victim"): release for release in row.get("released") or [] if isinstance(release, dict)}
    own = {entry.get("victim"): entry.get("metrics") or {} for entry in row.get("by_victim") or []
           if isinstance(entry, dict)}
    victims = row.get("victims") or list(releases)
    found = []
    for victim in victims:
        metrics = own.get(victim) if len(victims) > 1 else row.get("metrics") or {}
        metrics = metrics or {}
        found.append({"agent": victim, "attack": str(row.get("label", "?")), "seed": row.get("seed"),
                      "held": (releases.get(victim) or {}).get("words", "?"),
                      "failed": str(row.get("status", "")) != "ok", "status": row.get("status") or "",
                      "methods": {method_title(name): {"auc": number((metrics.get(name) or {}).get("auc")),
                                                       "tpr": _lowest_tpr(metrics.get(name) or {})}
                                  for name in methods}})
    return found


def _agents(audits: list[dict[str, Any]], memberships: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per agent, its membership on released models and the last-iterate canary bounds with it as the
    victim."""
    bounds: dict[Any, list[str]] = {}
    for row in audits:
        if _received(row)[0] == "last iterate" and not audit_failed(row):
            victim = (row.get("detail") or {}).get("victim")
            bounds.setdefault(victim, []).append(f"{row.get('label', '?')}: {eps_bound_text(row)}")
    found = []
    methods = _methods(memberships)
    for row in memberships:
        for entry in _membership(row, methods):
            found.append({**entry, "bounds": bounds.pop(entry["agent"], [])})
    found.extend({"agent": agent, "attack": None, "bounds": listed} for agent, listed in bounds.items())
    return found


def released_section(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """{"positions": each position audit scored on the released models too, its figure and table
    over distance (`privaudit.reports.position.released_by_distance`); "runs": per run with a
    last-iterate canary audit or membership on released models, its canary audits (transcript and
    last iterate) side by side with the comparison, and per agent its membership beside its
    last-iterate bounds}; None without any of them."""
    positions = [found for row in rows if (found := released_by_distance(row)) is not None]
    runs = _runs(rows)
    return {"positions": positions, "runs": runs} if positions or runs else None


def _runs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`released_section`'s "runs"."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        if row_type(row) == "audit" and row.get("kind") == "canary":
            runs.setdefault(str(row.get("subject", "?")), {"audits": [], "membership": []})["audits"].append(row)
        elif row_type(row) == "membership" and row.get("released"):
            subject = str(row.get("defense_label", "?"))
            runs.setdefault(subject, {"audits": [], "membership": []})["membership"].append(row)
    found = []
    for subject, held in runs.items():
        audits, memberships = held["audits"], held["membership"]
        if not memberships and not any(_received(row)[0] == "last iterate" for row in audits):
            continue
        ordered = sorted(audits, key=lambda row: (_received(row)[0] != "transcript", str(row.get("label")),
                                                  row.get("seed") or 0))
        found.append({"subject": subject, "entries": [_entry(row) for row in ordered],
                      "comparison": _comparison(audits), "agents": _agents(audits, memberships),
                      "methods": [method_title(name) for name in _methods(memberships)]})
    return found
