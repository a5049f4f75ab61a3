"""Audit findings: the results rows of a campaign's `[[audit]]` tables.

A mechanism audit (`attacks.audit.audit`) samples one release in isolation; a canary audit
(`attacks.canary.audit_game`) trains a defense many times with and without a canary record. Both
end in an ε lower bound at a stated confidence, which a row sets beside the claim and the sound ε
with a verdict, in one shape for both kinds (the report reads only these common fields; the
audit's own record is kept under `detail`):

    kind, method, subject, defense, defense_label, status, eps_lb, delta_lb, delta_lb_eps, delta,
    confidence, samples, eps_claimed, eps_sound, delta_sound, exact, verdict, tightness, curve, detail

A canary audit's verdict compares ε_LB with the ε the paper's formula gives (`eps_claimed`) at
the claim's δ: a bound above it refutes the claim at the stated confidence; a defense that claims
no privacy has nothing to refute, and its bound stands alone.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from privaudit import __version__

if TYPE_CHECKING:
    from privaudit.campaign import AuditCell


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def mechanism_finding(cell: AuditCell) -> dict[str, Any]:
    """The audit of `cell.table.mechanism` at the table's samples, then again at each size of its
    `curve` (each an independent audit with the same seed), for the tightness figure."""
    from attacks.audit import audit
    from attacks.mechanisms import MECHANISMS

    table = cell.table
    delta = 1e-5 if table.delta is None else table.delta

    def run(samples: int | None) -> Any:
        return audit(table.mechanism, table.params, adjacency=table.adjacency, dim=table.dim,
                     releases=table.releases, samples=samples, confidence=table.confidence, delta=delta,
                     seed=cell.seed)

    report = run(table.samples)
    record = report.as_dict()
    curve = [{"samples": point.samples, "eps_lb": point.eps_bound.value, "delta_lb": point.delta_bound.value}
             for point in map(run, sorted(set(table.curve)))]
    claim = record["claim"]
    return {
        "subject": report.title,
        "defense": MECHANISMS[table.mechanism].defense,
        "defense_label": None,
        "eps_lb": record["eps_lb"],
        "delta_lb": record["delta_lb"],
        "delta_lb_eps": record["delta_lb_eps"],
        "delta": delta,
        "confidence": table.confidence,
        "samples": report.samples,
        "eps_claimed": None if claim is None else claim["audited_eps"],
        "eps_sound": _finite(report.sound.eps),
        "delta_sound": _finite(report.sound.delta),
        "exact": record["exact"],
        "verdict": record["verdict"],
        "tightness": record["tightness"],
        "curve": curve,
        "detail": record,
    }


def canary_verdict(record: dict[str, Any]) -> dict[str, Any]:
    """Refuted when the canary's ε_LB exceeds the ε the paper's formula claims at the same δ;
    consistent otherwise; not evaluable when the defense claims no privacy (module docstring)."""
    eps_lb, claimed, delta = record["eps_lb"], record["eps_claimed"], record["delta"]
    confidence = f"{record['confidence']:.0%} confidence"
    if claimed is None:
        return {"status": "not evaluable", "statement": None,
                "reason": f"no DP claim is made; the canary forces ε ≥ {eps_lb:.4g} at δ = {delta:.3g} ({confidence})"}
    status = "refuted" if eps_lb > claimed else "consistent"
    return {"status": status, "statement": f"(ε = {claimed:.4g}, δ = {delta:.3g})-DP",
            "reason": f"the canary forces ε ≥ {eps_lb:.4g} at δ = {delta:.3g} ({confidence}), "
                      f"{'above' if status == 'refuted' else 'not above'} the claimed ε = {claimed:.4g}"}


def canary_finding(cell: AuditCell) -> dict[str, Any]:
    """The canary audit of the training cell `cell.training` (its data, run shape, hyperparameters
    and seed): `cell.table.runs` runs per world, or one run with `cell.table.canaries` canaries."""
    from attacks.canary import audit_game, game_for_cell, one_run_game

    table, training = cell.table, cell.training
    game = game_for_cell(training, victim=table.victim, threat=table.threat, canary_label=table.canary_label,
                         canary_scale=table.canary_scale)
    if table.method == "repeated":
        record = audit_game(game, runs=table.runs, confidence=table.confidence, delta=table.delta,
                            seed=training.seed)
    else:
        record = one_run_game(game, canaries=table.canaries, guesses=table.guesses, confidence=table.confidence,
                              delta=table.delta, seed=training.seed, canary_scale=table.canary_scale)
    sound = _finite(record["eps_sound"])
    return {
        "subject": training.label,
        "defense": training.run.kind,
        "defense_label": training.label,
        "eps_lb": record["eps_lb"],
        "delta_lb": None,
        "delta_lb_eps": None,
        "delta": record["delta"],
        "confidence": table.confidence,
        "samples": table.runs if table.method == "repeated" else table.canaries,
        "eps_claimed": record["eps_claimed"],
        "eps_sound": sound,
        "delta_sound": None,
        "exact": None,
        "verdict": canary_verdict(record),
        "tightness": {"of": "eps", "sound": record["eps_lb"] / sound if sound else None, "exact": None},
        "curve": [],
        "detail": record,
    }


def audit_headline(row: dict[str, Any]) -> str:
    """One line for the campaign log: the bound, its confidence and the verdict."""
    if row["status"] != "ok":
        return row["status"]
    bound = (f"δ_LB {row['delta_lb']:.4g} at ε = {row['delta_lb_eps']:.3g}" if row["tightness"]["of"] == "delta"
             else f"ε_LB {row['eps_lb']:.4g} at δ = {row['delta']:.3g}")
    return f"{bound} ({row['confidence']:.0%}), {row['verdict']['status']}"


_EMPTY = {"eps_lb": None, "delta_lb": None, "delta_lb_eps": None, "eps_claimed": None, "eps_sound": None,
          "delta_sound": None, "exact": None, "tightness": None, "curve": [], "detail": None}


def audit_row(cell: AuditCell) -> dict[str, Any]:
    """The results row of one audit cell; an audit that fails on a value (a non-finite score, a
    mechanism that cannot be sampled) gives a `failed: …` row and the campaign goes on."""
    started = time.perf_counter()
    table = cell.table
    try:
        found = mechanism_finding(cell) if table.kind == "mechanism" else canary_finding(cell)
        found["status"] = "ok"
    except (ValueError, FloatingPointError) as error:
        reason = error.args[0] if error.args else type(error).__name__
        found = {**_EMPTY, "subject": table.mechanism or cell.training.label, "defense": None,
                 "defense_label": None if cell.training is None else cell.training.label,
                 "delta": table.delta, "confidence": table.confidence, "samples": None,
                 "verdict": {"status": "not evaluable", "statement": None, "reason": f"the audit failed: {reason}"},
                 "status": f"failed: {reason}"}
    return {
        "type": "audit",
        "cell": cell.id,
        "group": cell.group,
        "training": None if cell.training is None else cell.training.id,
        "label": cell.label,
        "kind": table.kind,
        "method": table.method if table.kind == "canary" else None,
        "seed": cell.seed,
        **found,
        "wall_s": time.perf_counter() - started,
        "config": cell.describe(),
        "version": __version__,
    }
