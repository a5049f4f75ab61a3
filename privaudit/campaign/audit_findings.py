"""Audit findings: the results rows of a campaign's `[[audit]]` tables.

A mechanism audit (`attacks.audit.audit`) samples one release in isolation; a canary audit
(`attacks.canary.audit_game`) trains a defense many times with and without a canary record. Both
end in an ε lower bound at a stated confidence, which a row sets beside the claim and the sound ε
with a verdict, in one shape for both kinds (the report reads only these common fields; the
audit's own record is kept under `detail`):

    kind, method, subject, defense, defense_label, status, eps_lb, delta_lb, delta_lb_eps, delta,
    confidence, samples, eps_claimed, eps_stated, eps_sound, delta_sound, eps_estimate, estimate_method,
    exact, verdict, tightness, curve, attack, detail

Three kinds of number stay apart in it: the rigorous bounds (eps_lb, delta_lb, with their
confidence), the estimate (eps_estimate, named by estimate_method, never a bound), and the claim
(eps_claimed, the paper's formula recomputed; eps_stated, the number the paper prints) beside the
sound accountant's eps_sound. `attack` says in words what the audit did (canary, channels heard,
adjacency, how the test was chosen).

A canary audit's verdict compares ε_LB with the ε the paper's formula gives (`eps_claimed`) at
the claim's δ: a bound above it refutes the claim at the stated confidence; a defense that claims
no privacy has nothing to refute, and its bound stands alone.

A canary audit's game is built here from a campaign cell or a `[[defense]]` table
(`game_for_cell`, `game_for_table`): `attacks.canary` takes a set-up and a defense's parameters,
and only this layer knows how a campaign turns into them.
"""

from __future__ import annotations

import math
import time
from typing import Any

from attacks.audit import audit, perfect_test_eps
from attacks.canary import Game, audit_game, make_game, one_run_game
from attacks.one_run import one_run_eps
from attacks.canary_statistics import SELECT_FRACTION
from attacks.mechanisms import MECHANISMS
from privaudit import __version__
from privaudit.campaign.cells import AuditCell, Cell, build_setup, expand
from privaudit.campaign.config import AuditConfig, parse_campaign
from privaudit.errors import ConfigError


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def mechanism_finding(cell: AuditCell) -> dict[str, Any]:
    """The audit of `cell.table.mechanism` at the table's samples, then again at each size of its
    `curve` (each an independent audit with the same seed), for the tightness figure."""
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
        "eps_stated": None,
        "eps_sound": _finite(report.sound.eps),
        "eps_estimate": None,
        "estimate_method": None,
        "delta_sound": _finite(report.sound.delta),
        "exact": record["exact"],
        "verdict": record["verdict"],
        "tightness": record["tightness"],
        "curve": curve,
        "attack": f"{report.title} sampled on the pair {record['pair']['label']}, {record['releases']} release(s)",
        "detail": record,
    }


def game_options(table: AuditConfig) -> dict[str, Any]:
    """The canary game's options that a `[[audit]]` table sets (`attacks.canary.make_game`)."""
    return {"victim": table.victim, "threat": table.threat, "observer": table.observer, "links": table.links,
            "canary": table.canary, "canary_label": table.canary_label, "canary_scale": table.canary_scale,
            "scenarios": table.channels}


def game_for_cell(cell: Cell, count: int = 1, **options: Any) -> Game:
    """The canary game of one training cell (its data, run shape, hyperparameters and seed), with
    `count` canaries and `attacks.canary.make_game`'s options; every problem is a one-line
    ConfigError."""
    return make_game(build_setup(cell), cell.run.kind, cell.params, cell.run.rounds, count=count, **options)


def game_for_table(defense: dict[str, Any], data: dict[str, Any] | None = None, *, seed: int = 0, count: int = 1,
                   **options: Any) -> Game:
    """The canary game of a `[[defense]]` table and a `[data]` table, as a campaign file writes
    them; every problem is a one-line ConfigError."""
    campaign = parse_campaign({"campaign": {"name": "canary", "seeds": [seed]}, "data": data or {},
                               "defense": [defense]})
    cells = expand(campaign)
    if len(cells) != 1:
        raise ConfigError(f"a canary audit runs one configuration; the defense table expands to {len(cells)}")
    return game_for_cell(cells[0], count, **options)


def canary_audit(defense: dict[str, Any], data: dict[str, Any] | None = None, *, runs: int = 200,
                 confidence: float = 0.95, delta: float | None = None, seed: int = 0, null: bool = False,
                 protocol: str = "auto", worlds: int | None = None, **options: Any) -> dict[str, Any]:
    """The repeated-runs canary audit of one defense table (`game_for_table`, then
    `attacks.canary.audit_game`)."""
    game = game_for_table(defense, data, seed=seed, **options)
    return audit_game(game, runs=runs, confidence=confidence, delta=delta, seed=seed, null=null, protocol=protocol,
                      worlds=worlds)


def one_run_audit(defense: dict[str, Any], data: dict[str, Any] | None = None, *, canaries: int = 200,
                  guesses: int = 20, confidence: float = 0.95, delta: float | None = None, seed: int = 0,
                  **options: Any) -> dict[str, Any]:
    """The one-run audit of one defense table (`game_for_table` with `canaries` canaries, then
    `attacks.canary.one_run_game`)."""
    game = game_for_table(defense, data, seed=seed, count=canaries, **options)
    return one_run_game(game, guesses=guesses, confidence=confidence, delta=delta, seed=seed)


def _game(cell: AuditCell) -> Game:
    table = cell.table
    return game_for_cell(cell.training, table.canaries if table.method == "one_run" else 1, **game_options(table))


def check_audit(cell: AuditCell) -> None:
    """Build a canary audit's game, so a victim, threat or channel its run cannot serve fails
    before anything runs, as a ConfigError naming the cell; a mechanism audit needs no check here."""
    if cell.training is None:
        return
    try:
        _game(cell)
    except ConfigError as error:
        raise ConfigError(f"{cell.where}: {error}") from None


def _ceiling(record: dict[str, Any]) -> float | None:
    """The ε_LB an error-free attack would reach with what this audit's bound counts: for repeated
    runs, every run (the threshold fixed from the law) or the part not held out; for one run
    (Steinke, Nasr & Jagielski 2023), every guess correct. None when the record says neither."""
    if isinstance(record.get("guesses"), int) and isinstance(record.get("canaries"), int):
        return one_run_eps(record["guesses"], record["guesses"], record["canaries"], record["delta"],
                           record["confidence"])
    runs = record.get("runs_per_side")
    if not isinstance(runs, int):
        return None
    trials = runs if record.get("protocol") == "model" else runs - max(2, int(runs * SELECT_FRACTION))
    return perfect_test_eps(trials, record["confidence"], record["delta"])


def _counted(record: dict[str, Any]) -> str:
    """What the audit's bound counts, in words."""
    if isinstance(record.get("guesses"), int):
        return f"its {record['guesses']} guesses among {record['canaries']} canaries"
    return f"its {record['runs_per_side']:,} runs per side"


def canary_verdict(record: dict[str, Any]) -> dict[str, Any]:
    """Refuted when the canary's ε_LB exceeds the ε the paper's formula claims at the same δ (for a
    (0, δ) claim: when δ_LB at ε = 0 exceeds the claimed δ). Consistent only when the audit had
    the power to refute and found evidence short of it; inconclusive when it found none (a bound
    of 0) or when even an error-free test on its runs could not exceed the claim. Not evaluable
    when the defense claims no privacy, or when the audited channel's unit is not the claim's
    (module docstring)."""
    eps_lb, claimed, delta = record["eps_lb"], record["eps_claimed"], record["delta"]
    confidence = f"{record['confidence']:.0%} confidence"
    forced = f"the canary forces ε ≥ {eps_lb:.4g} at δ = {delta:.3g} ({confidence})"
    if claimed is None:
        return {"status": "not evaluable", "statement": None, "reason": f"no DP claim is made; {forced}"}
    if record.get("unaudited"):
        return {"status": "not evaluable", "statement": None, "reason": f"{record['unaudited']}; {forced}"}
    if record.get("delta_lb") is not None:
        delta_lb = record["delta_lb"]
        status = "refuted" if delta_lb > delta else "consistent" if delta_lb > 0 else "inconclusive"
        reason = (f"the canary forces δ ≥ {delta_lb:.4g} at ε = {claimed:.4g} ({confidence}), "
                  f"{'above' if status == 'refuted' else 'not above'} the claimed δ = {delta:.3g}")
        return {"status": status, "statement": f"({claimed:.4g}, {delta:.3g})-DP",
                "reason": reason if status != "inconclusive" else f"no evidence at this strength: {reason}"}
    statement = f"(ε = {claimed:.4g}, δ = {delta:.3g})-DP"
    if eps_lb > claimed:
        return {"status": "refuted", "statement": statement, "reason": f"{forced}, above the claimed ε = {claimed:.4g}"}
    ceiling = _ceiling(record)
    if ceiling is not None and ceiling <= claimed:
        return {"status": "inconclusive", "statement": statement,
                "reason": f"this audit cannot refute ε = {claimed:.4g}: even an error-free attack on {_counted(record)} "
                          f"certifies at most ε ≥ {ceiling:.4g}; {forced}"}
    if eps_lb <= 0:
        return {"status": "inconclusive", "statement": statement,
                "reason": f"no evidence at this strength: {forced}"
                          + (f" (an error-free test would reach ε ≥ {ceiling:.4g})" if ceiling is not None else "")}
    return {"status": "consistent", "statement": statement, "reason": f"{forced}, not above the claimed ε = {claimed:.4g}"}


def _canary_attack(table: AuditConfig, record: dict[str, Any]) -> str:
    """What a canary audit did, in words, for the report."""
    if table.method == "one_run":
        how = (f"one training run, {record['canaries']} {record['canary']} canaries, {record['guesses']} guesses "
               f"({record['correct']} right)")
    else:
        how = (f"{table.runs:,} runs per world, {record['canary']} canary, threshold "
               + ("fixed in advance from the mechanism's law" if record["protocol"] == "model"
                  else "chosen on a held-out quarter of the runs"))
    return (f"{how}; {table.threat} hears {', '.join(record['channels'])}; {record['adjacency']}: "
            f"{record.get('pair') or 'canary present or absent'}")


def canary_finding(cell: AuditCell) -> dict[str, Any]:
    """The canary audit of the training cell `cell.training` (its data, run shape, hyperparameters
    and seed): `cell.table.runs` runs per world, or one run with `cell.table.canaries` canaries."""
    table, training = cell.table, cell.training
    game = _game(cell)
    if table.method == "repeated":
        record = audit_game(game, runs=table.runs, confidence=table.confidence, delta=table.delta,
                            seed=training.seed, protocol=table.protocol)
    else:
        record = one_run_game(game, guesses=table.guesses, confidence=table.confidence, delta=table.delta,
                              seed=training.seed)
    sound = _finite(record["eps_sound"])
    return {
        "subject": training.label,
        "defense": training.run.kind,
        "defense_label": training.label,
        "eps_lb": record["eps_lb"],
        "delta_lb": record.get("delta_lb"),
        "delta_lb_eps": record.get("delta_lb_eps"),
        "delta": record["delta"],
        "confidence": table.confidence,
        "samples": table.runs if table.method == "repeated" else table.canaries,
        "eps_claimed": record["eps_claimed"],
        "eps_stated": game.claim.eps_stated,
        "eps_sound": sound,
        "delta_sound": None,
        "eps_estimate": record.get("eps_estimate"),
        "estimate_method": record.get("estimate_method"),
        "exact": None,
        "verdict": canary_verdict(record),
        "tightness": {"of": "delta", "sound": None, "exact": None} if record.get("delta_lb") is not None else
        {"of": "eps", "sound": record["eps_lb"] / sound if sound else None, "exact": None},
        "curve": [],
        "attack": _canary_attack(table, record),
        "detail": record,
    }


def audit_headline(row: dict[str, Any]) -> str:
    """One line for the campaign log: the bound, its confidence and the verdict."""
    if row["status"] != "ok":
        return row["status"]
    bound = (f"δ_LB {row['delta_lb']:.4g} at ε = {row['delta_lb_eps']:.3g}" if row["tightness"]["of"] == "delta"
             else f"ε_LB {row['eps_lb']:.4g} at δ = {row['delta']:.3g}")
    return f"{bound} ({row['confidence']:.0%}), {row['verdict']['status']}"


_EMPTY = {"eps_lb": None, "delta_lb": None, "delta_lb_eps": None, "eps_claimed": None, "eps_stated": None,
          "eps_sound": None, "delta_sound": None, "eps_estimate": None, "estimate_method": None, "exact": None,
          "tightness": None, "curve": [], "attack": None, "detail": None}


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
