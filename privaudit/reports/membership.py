"""The report's "Membership inference" section, from membership rows and the training rows they
attacked: a plain-words lead per (membership table, defense run), one table per membership table
with every method's AUC, TPR at low FPR and balanced accuracy side by side (the statistics
Carlini et al. 2022, "Membership Inference Attacks From First Principles", §III-C argue for),
log-log ROC curves (their Fig. 1 convention), AUC against the sound ε where a table covers runs
at several ε, and failed cells with their reasons.

Nothing is recomputed: every number is read from a row's stored metrics and ROC points.

Two rules keep the section from overstating:

- An interval that contains 0.5 is reported as "no detectable membership leakage at this sample
  size", whatever the point estimate.
- TPR at an FPR below 1/non-members is not resolvable: no threshold has a false-positive rate
  strictly between 0 and 1/non-members, so the stored value there is the TPR at zero false
  positives. It is shown as "n/a" with the number of non-members it would need.

A table on a released model (`released_model`, `released_average`) says what the attacker
received, from the rows' `released`; a table pooling several victims shows, under each pooled
line, every victim's own line from the rows' `by_victim` (its members and the non-members dealt to
it), so membership reads per agent.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from statistics import mean, pstdev
from typing import Any

from privaudit.limits import MIN_FPR
from privaudit.reports.figures import membership_auc_epsilon, membership_roc
from privaudit.reports.inversion import row_type, setting_text

METHOD_TITLES = {"loss": "LOSS", "lira": "LiRA", "rmia": "RMIA"}
"""Display names of the methods `privaudit.campaign.membership_findings` runs, in report order; a method
not listed here is shown under its key in capitals."""

CHANCE_AUC = 0.5


def failed(row: dict[str, Any]) -> bool:
    """Whether a membership cell ended without metrics (its status says why)."""
    return row.get("status") != "ok"


def fpr_text(fpr: float) -> str:
    """An FPR as a percentage: 0.001 → "0.1 %"."""
    return f"{100 * fpr:.4g} %"


def _percent(value: float) -> str:
    return f"{100 * value:.3g} %"


def needed_non_members(fpr: float) -> int:
    """The fewest non-members for which a threshold can have false-positive rate `fpr`."""
    return math.ceil(1 / fpr - 1e-9)


def resolvable(fpr: float, non_members: int) -> bool:
    """Whether TPR at `fpr` can be read from an ROC over `non_members` non-members: its FPR steps
    are 1/non_members wide, so a target below the first step reads TPR at zero false positives."""
    return non_members >= needed_non_members(fpr)


def _tpr_fprs(rows: list[dict[str, Any]]) -> list[float]:
    """The FPRs at which the rows store a TPR ("tpr@0.001" → 0.001), ascending."""
    found = set()
    for row in rows:
        for metrics in (row.get("metrics") or {}).values():
            for key in metrics or {}:
                if key.startswith("tpr@") and not key.endswith("_ci"):
                    rate = _rate(key[4:])
                    if rate is not None:
                        found.add(rate)
    return sorted(found)


def _rate(text: str) -> float | None:
    """The FPR a row's `tpr@<rate>` key names, or None when it names none a campaign can ask for
    (rows of a folder made elsewhere may hold `tpr@1e-320` or `tpr@nan`: no page divides by them)."""
    try:
        rate = float(text)
    except ValueError:
        return None
    return rate if MIN_FPR <= rate < 1 else None


def _tpr_key(fpr: float) -> str:
    return f"tpr@{fpr:g}"


def _methods(rows: list[dict[str, Any]]) -> list[str]:
    """The methods present in the rows: known ones in report order, then any other."""
    present = dict.fromkeys(name for row in rows for name in (row.get("metrics") or {}))
    return [m for m in METHOD_TITLES if m in present] + [m for m in present if m not in METHOD_TITLES]


def method_title(method: str) -> str:
    return METHOD_TITLES.get(method, method.upper())


def _released_agents(row: dict[str, Any]) -> dict[int, list[int]] | None:
    """Each victim's released agents in a row on one agent's released final model, else None (the
    average, or a row written before rows said what was released: the average was the one final
    model then)."""
    released = row.get("released") or []
    if not released or any(entry.get("threat") != "released_model" for entry in released):
        return None
    return {int(entry["victim"]): [int(agent) for agent in entry["agents"]] for entry in released}


def _final_text(row: dict[str, Any]) -> str:
    """The final model a row's attacker held, in words: "final average", or "released model of
    each victim" / "of agent 2"."""
    agents = _released_agents(row)
    if agents is None:
        return "final average"
    if all(held == [victim] for victim, held in agents.items()):
        return "released model of each victim" if len(agents) > 1 else f"released model of agent {next(iter(agents))}"
    shown = sorted({agent for held in agents.values() for agent in held})
    return f"released model of agent{'s' if len(shown) > 1 else ''} {', '.join(map(str, shown))}"


def held_text(row: dict[str, Any]) -> str:
    """What a membership row's attacker held, as the lead (and the report's other sections) name it."""
    if row.get("round") is None:
        return f"{_final_text(row)} model" if _released_agents(row) is None else _final_text(row)
    return f"intercepted model at round {row['round']}"


def _attacked_text(row: dict[str, Any]) -> str:
    round_ = row.get("round")
    return _final_text(row) if round_ is None else f"round {round_}"


def _threat_text(row: dict[str, Any]) -> str:
    """Who attacked: the threat, and for a final model what it received (the row's words)."""
    threat = str(row.get("threat", "?"))
    words = list(dict.fromkeys(str(entry.get("words")) for entry in row.get("released") or []))
    if not words or threat not in ("released_model", "released_average"):
        return threat
    return f"{threat}: {'; '.join(words)}"


def _fewest(rows: list[dict[str, Any]], method: str, field: str = "non_members") -> int:
    """The fewest `field` records ("members" or "non_members") among the rows' results for
    `method`; the fewest non-members is what limits the FPR resolution."""
    counts = [int(((row.get("metrics") or {}).get(method) or {}).get(field) or (row.get("data") or {}).get(field, 0))
              for row in rows]
    return min(counts) if counts else 0


class RunPrivacy:
    """The sound and claimed ε of one defense run, read from its training rows (one per seed)."""

    def __init__(self, training_rows: list[dict[str, Any]]) -> None:
        claims = [row.get("claim") or {} for row in training_rows]
        self.known = bool(claims)
        self.undefended = self.known and all(claim.get("notion") == "none" for claim in claims)
        sound = [claim.get("eps_sound") for claim in claims]
        finite = [float(e) for e in sound if e is not None and math.isfinite(float(e))]
        self.sound = mean(finite) if self.known and len(finite) == len(sound) else None
        self.sound_range = (min(finite), max(finite)) if finite else None
        claimed = [claim.get("eps_claimed") for claim in claims if claim.get("eps_claimed") is not None]
        self.claimed = mean(float(e) for e in claimed) if claimed else None
        deltas = [claim.get("delta") for claim in claims if claim.get("delta") is not None]
        self.delta = deltas[0] if deltas else None
        self.infinite = any(e is not None and not math.isfinite(float(e)) for e in sound)

    @property
    def edge_label(self) -> str:
        """Where a run without a finite sound ε sits on the AUC-against-ε axis."""
        if self.undefended:
            return "no DP"
        return "ε = ∞" if self.infinite else "no sound ε"

    def short(self) -> str:
        """The run's sound ε alone, for the score table."""
        if not self.known:
            return "unknown"
        if self.undefended:
            return "no DP"
        return self.edge_label if self.sound is None else f"ε {self.sound:.3g}"

    def text(self) -> str:
        """The run's ε in words: the sound ε (a range when seeds differ), the claimed one beside."""
        if not self.known:
            return "unknown (training row missing)"
        if self.undefended:
            return "no DP"
        if self.sound is None:
            sound = self.edge_label
        elif self.sound_range and self.sound_range[0] != self.sound_range[1]:
            sound = f"sound ε {self.sound_range[0]:.3g}–{self.sound_range[1]:.3g}"
        else:
            sound = f"sound ε {self.sound:.3g}"
        extras = []
        if self.claimed is not None:
            extras.append(f"claimed {self.claimed:.3g}")
        if self.delta is not None:
            extras.append(f"δ {self.delta:.3g}")
        return sound + (f" ({', '.join(extras)})" if extras else "")


def _table_names(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each membership cell's table name: its label, with a digest of the table's configuration
    when two differently configured tables share a label (a campaign edited between runs into the
    same results directory), so their cells are not pooled."""
    def identity(row: dict[str, Any]) -> str:
        config = row.get("config")
        table = config.get("membership") if isinstance(config, dict) else None
        return json.dumps(table, sort_keys=True) if table is not None else str(row.get("label", "?"))

    identities: dict[str, set[str]] = {}
    for row in rows:
        identities.setdefault(str(row.get("label", "?")), set()).add(identity(row))
    names = {}
    for row in rows:
        label = str(row.get("label", "?"))
        digest = hashlib.sha256(identity(row).encode()).hexdigest()[:6]
        names[row["cell"]] = label if len(identities[label]) == 1 else f"{label} [{digest}]"
    return names


def _run_keys(rows: list[dict[str, Any]], training: dict[str, dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """Each membership cell's run key (the attacked training run's group, all seeds alike) and the
    run's display name (its label, with the group when two runs share a label)."""
    keys, labels = {}, {}
    for row in rows:
        attacked = training.get(str(row.get("training")))
        key = str(attacked["group"]) if attacked and attacked.get("group") else \
            f"{row.get('defense_label', '?')}|{json.dumps(row.get('setting') or {}, sort_keys=True)}"
        keys[row["cell"]] = key
        labels.setdefault(key, str(row.get("defense_label", "?")))
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    names = {key: label if counts[label] == 1 else f"{label} [{key[:6]}]" for key, label in labels.items()}
    return keys, names


class _Entry:
    """One method's value of one statistic over the seeds of one (table, run, round) cell."""

    def __init__(self, rows: list[dict[str, Any]], method: str, key: str) -> None:
        self.rows = rows
        self.ok = [row for row in rows if not failed(row) and (row.get("metrics") or {}).get(method)]
        self.values = [float(row["metrics"][method][key]) for row in self.ok
                       if row["metrics"][method].get(key) is not None]
        self.intervals = [row["metrics"][method].get(f"{key}_ci") for row in self.ok
                          if row["metrics"][method].get(key) is not None]
        self.confidence = next((row["metrics"][method].get("confidence") for row in self.ok), None)

    @property
    def lost(self) -> int:
        return len(self.rows) - len(self.ok)

    def center(self) -> float:
        return mean(self.values)

    def spread(self) -> tuple[float, float] | None:
        """The error bar of the AUC-against-ε figure: the bootstrap interval of one seed, mean ±
        std over several."""
        if len(self.values) == 1:
            interval = self.intervals[0]
            return None if interval is None else (interval[0], interval[1])
        centre, std = mean(self.values), pstdev(self.values)
        return centre - std, centre + std

    def cell(self, show: Callable[[float], str]) -> dict[str, Any]:
        """The table entry: one seed's value with its interval, or mean ± std over seeds."""
        if not self.rows:
            return {"text": "", "interval": "", "failed": 0}
        if not self.values:
            return {"text": "all failed" if self.lost else "—", "interval": "", "failed": self.lost}
        if len(self.values) == 1:
            interval = self.intervals[0]
            return {"text": show(self.values[0]), "failed": self.lost,
                    "interval": "no interval" if interval is None else f"[{show(interval[0])}, {show(interval[1])}]"}
        return {"text": f"{show(mean(self.values))} ± {show(pstdev(self.values))}",
                "interval": f"{len(self.values)} seeds", "failed": self.lost}


def _distinct(values: Iterable[Any]) -> str:
    """The distinct values, in order of first appearance."""
    return ", ".join(dict.fromkeys(str(value) for value in values))


def _fraction(value: float) -> str:
    return f"{value:.2f}"


def rmia_a_text(rows: list[dict[str, Any]]) -> str:
    """RMIA's offline a in the rows that store one, grouped by how it was set:
    "0.05, 0.1 (chosen on reference models)"; "not stored" for rows written before a was stored."""
    found: dict[str, set[float]] = {}
    for row in rows:
        if row.get("rmia_a") is not None:
            found.setdefault(str(row.get("rmia_a_from") or "how: not stored"), set()).add(float(row["rmia_a"]))
    if not found:
        return "not stored" if any(not failed(row) for row in rows) else "—"
    return "; ".join(f"{', '.join(f'{a:g}' for a in sorted(values))} ({how})" for how, values in found.items())


class _Memberships:
    """The membership rows of a results directory, grouped by (table, run, attacked round)."""

    def __init__(self, rows: list[dict[str, Any]], training: dict[str, dict[str, Any]]) -> None:
        self.rows = rows
        self.table_of = _table_names(rows)
        self.run_of, self.run_names = _run_keys(rows, training)
        self.cells: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
        for row in rows:
            self.cells.setdefault((self.table_of[row["cell"]], self.run_of[row["cell"]], row.get("round")),
                                  []).append(row)
        self.tables = list(dict.fromkeys(self.table_of[row["cell"]] for row in rows))
        attacked: dict[str, dict[str, None]] = {}
        for row in rows:
            attacked.setdefault(self.run_of[row["cell"]], {})[str(row.get("training"))] = None
        self.privacy = {run: RunPrivacy([training[cell] for cell in cells if cell in training])
                        for run, cells in attacked.items()}

    def runs(self, table: str) -> list[str]:
        return list(dict.fromkeys(run for (t, run, _) in self.cells if t == table))

    def rounds(self, table: str, run: str | None = None) -> list[Any]:
        found = {r for (t, k, r) in self.cells if t == table and (run is None or k == run)}
        return sorted(found, key=lambda r: (r is None, r))

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if self.table_of[row["cell"]] == table]

    # ----------------------------------------------------------------------------------- lead

    def lead(self) -> list[str]:
        return [self._lead_line(table, run) for table in self.tables for run in self.runs(table)]

    def _candidates(self, table: str, run: str) -> list[tuple[str, Any, list[dict[str, Any]]]]:
        """Every (method, attacked round, cell) of one run in one table with an AUC to compare."""
        cells = [(round_, self.cells[(table, run, round_)]) for round_ in self.rounds(table, run)]
        return [(method, round_, cell) for round_, cell in cells for method in _methods(cell)
                if _Entry(cell, method, "auc").values]

    def strongest(self, run: str) -> str:
        """The lead line of the table where `run` was attacked hardest (highest mean AUC), without
        the run's privacy (the verdict beside it states that); the tables compared are named."""
        tables = [table for table in self.tables if run in self.runs(table)]
        best = max(tables, key=lambda table: max((_Entry(c[2], c[0], "auc").center()
                                                   for c in self._candidates(table, run)), default=-math.inf))
        line = self._lead_line(best, run, with_privacy=False)
        if len(tables) > 1:
            line += f" The strongest of {len(tables)} membership tables on this run."
        return line

    def _lead_line(self, table: str, run: str, with_privacy: bool = True) -> str:
        """The strongest attack (highest mean AUC) on one run, in words, against chance."""
        name = self.run_names[run]
        cells = [(round_, self.cells[(table, run, round_)]) for round_ in self.rounds(table, run)]
        attempts = [row for _, cell in cells for row in cell]
        lost = sum(failed(row) for row in attempts)
        lost_text = f" {lost} of {len(attempts)} cells failed." if lost else ""
        privacy = f" Privacy of the run: {self.privacy[run].text()}." if with_privacy else ""
        candidates = self._candidates(table, run)
        if not candidates:
            return f"{table} on {name}: every cell failed (reasons below).{privacy}"
        method, round_, cell = max(candidates, key=lambda c: _Entry(c[2], c[0], "auc").center())
        auc = _Entry(cell, method, "auc")
        who = f"{table}: {method_title(method)} on {name}'s {held_text(cell[0])}"
        sentence = who + self._auc_clause(auc) + "." + self._tpr_sentence(cell, method)
        if len(candidates) > 1:
            methods = len(_methods(attempts))
            how = f"{methods} methods" + (f" × {len(cells)} attacked models" if len(cells) > 1 else "")
            sentence += (f" This is the strongest of the {len(candidates)} attacks on this run ({how}); picking "
                         "the strongest favours the attacker.")
        return sentence + privacy + lost_text

    @staticmethod
    def _auc_clause(auc: _Entry) -> str:
        if len(auc.values) == 1:
            value, interval = auc.values[0], auc.intervals[0]
            if interval is None:
                return f": AUC {value:.2f} (chance 0.5; no interval stored, so no statement on significance)"
            shown = f"AUC {value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}] (chance 0.5)"
            if interval[0] > CHANCE_AUC:
                return f" tells members from non-members with {shown}"
            if interval[1] < CHANCE_AUC:
                return f": {shown}, below chance: its score ranks non-members above members"
            return f": {shown}, no detectable membership leakage at this sample size"
        seeds = len(auc.values)
        shown = f"AUC {mean(auc.values):.2f} ± {pstdev(auc.values):.2f} over {seeds} seeds (chance 0.5)"
        stated = [interval for interval in auc.intervals if interval is not None]
        if not stated:
            return f": {shown}; no intervals stored, so no statement on significance"
        above = sum(interval[0] > CHANCE_AUC for interval in stated)
        level = f"{100 * auc.confidence:.3g} %" if auc.confidence else "stored"
        if above == len(stated):
            return f" tells members from non-members with {shown}; the {level} interval excludes 0.5 in every seed"
        if above == 0:
            return (f": {shown}, no detectable membership leakage at this sample size (the {level} interval "
                    "contains or lies below 0.5 in every seed)")
        return f": {shown}; the {level} interval lies above 0.5 in only {above} of {len(stated)} seeds"

    @staticmethod
    def _tpr_sentence(cell: list[dict[str, Any]], method: str) -> str:
        """TPR at the lowest FPR the non-members resolve, or why none is resolvable."""
        fprs = _tpr_fprs(cell)
        if not fprs:
            return ""
        non_members = _fewest([row for row in cell if not failed(row)], method)
        usable = [fpr for fpr in fprs if resolvable(fpr, non_members)]
        if not usable:
            fpr = fprs[-1]
            return (f" Its TPR at {fpr_text(fpr)} false positives is not resolvable with {non_members} non-members "
                    f"(needs ≥ {needed_non_members(fpr)}).")
        fpr = usable[0]
        tpr = _Entry(cell, method, _tpr_key(fpr))
        if not tpr.values:
            return ""
        if len(tpr.values) == 1:
            interval = tpr.intervals[0]
            shown = _percent(tpr.values[0]) + ("" if interval is None else
                                               f" [{_percent(interval[0])}, {_percent(interval[1])}]")
        else:
            shown = f"{_percent(mean(tpr.values))} ± {_percent(pstdev(tpr.values))}"
        return f" It finds {shown} of members at {fpr_text(fpr)} false positives (chance {fpr_text(fpr)})."

    # --------------------------------------------------------------------------------- tables

    def described(self, table: str) -> list[dict[str, Any]]:
        """Per run: what was attacked, with which data and how many reference models."""
        described = []
        for run in self.runs(table):
            rows = [row for (t, k, _), cell in self.cells.items() if t == table and k == run for row in cell]
            rounds = [r for r in self.rounds(table, run) if r is not None]
            targets = []
            if rounds:
                targets.append("intercepted model at round" + ("s " if len(rounds) > 1 else " ")
                               + ", ".join(map(str, rounds)))
            finals = [row for row in rows if row.get("round") is None]
            if finals:
                targets.append(_distinct(held_text(row) for row in finals))
            described.append({
                "run": self.run_names[run],
                "setting": _distinct(setting_text(row.get("setting") or {}) for row in rows),
                "target": "; ".join(targets), "threat": _distinct(_threat_text(row) for row in rows),
                "victim": _distinct(", ".join(map(str, row.get("victims", ["?"]))) for row in rows),
                **{field: _distinct((row.get("data") or {}).get(field, "?") for row in rows)
                   for field in ("members", "non_members", "rmia_population")},
                "references": _distinct(row.get("references", "?") for row in rows),
                "rmia_a": rmia_a_text(rows),
                "seeds": _distinct(row.get("seed", "?") for row in rows), "cells": len(rows),
                "failed": sum(failed(row) for row in rows), "privacy": self.privacy[run].text(),
            })
        return described

    def scores(self, table: str) -> dict[str, Any]:
        """Rows = (run, attacked round) × method, columns = AUC, TPR at each FPR, balanced accuracy: one
        row per attack, so the table fits the page however many FPRs a campaign asks for."""
        rows = self.table_rows(table)
        fprs = _tpr_fprs(rows)
        methods = _methods(rows)
        columns = [("auc", "AUC", _fraction)] + [(_tpr_key(f), f"TPR@{fpr_text(f)}", _percent) for f in fprs] \
            + [("balanced_accuracy", "bal. acc.", _fraction)]
        lines = []
        for run in self.runs(table):
            for round_ in self.rounds(table, run):
                cell = self.cells[(table, run, round_)]
                attacked = _attacked_text(cell[0])
                for who, rows in [(attacked, cell)] + _victim_cells(cell):
                    lines.append({"run": self.run_names[run], "attacked": who, "privacy": self.privacy[run].short(),
                                  "methods": [{"method": method_title(method),
                                               "entries": _entries(rows, method, columns)} for method in methods]})
        return {"columns": [title for _, title, _ in columns], "lines": lines}

    # -------------------------------------------------------------------------------- figures

    def roc_figures(self, table: str) -> list[dict[str, str]]:
        """Per (run, attacked round), the log-log ROC of every method, one thin line per seed."""
        figures = []
        for run in self.runs(table):
            for round_ in self.rounds(table, run):
                cell = [row for row in self.cells[(table, run, round_)] if not failed(row)]
                curves: dict[str, list[dict[str, list[float]]]] = {}
                for method in _methods(cell):
                    auc = _Entry(cell, method, "auc")
                    rocs = [row["metrics"][method]["roc"] for row in auc.ok if row["metrics"][method].get("roc")]
                    if rocs and auc.values:
                        value = (f"{auc.values[0]:.2f}" if len(auc.values) == 1
                                 else f"{mean(auc.values):.2f} ± {pstdev(auc.values):.2f}")
                        curves[f"{method_title(method)} (AUC {value})"] = rocs
                if not curves:
                    continue
                method = _methods(cell)[0]
                title = f"{table} · {self.run_names[run]} · {_attacked_text(cell[0])}"
                figures.append({"title": title, "uri": membership_roc(
                    curves, _fewest(cell, method), _fewest(cell, method, "members"), title)})
        return figures

    def epsilon_figures(self, table: str) -> list[dict[str, str]]:
        """Per attacked round, AUC against the runs' sound ε, when the runs hold ≥ 2 distinct ε
        (runs without a finite sound ε count as one value, drawn at the right edge)."""
        figures = []
        for round_ in self.rounds(table):
            runs = [run for run in self.runs(table) if (table, run, round_) in self.cells
                    and self.privacy[run].known]
            if len({self.privacy[run].sound for run in runs}) < 2:
                continue
            lines: dict[str, list[tuple[float | None, float, tuple[float, float] | None]]] = {}
            edge = list(dict.fromkeys(self.privacy[run].edge_label for run in runs if self.privacy[run].sound is None))
            for run in runs:
                cell = self.cells[(table, run, round_)]
                for method in _methods(cell):
                    auc = _Entry(cell, method, "auc")
                    if auc.values:
                        lines.setdefault(method_title(method), []).append(
                            (self.privacy[run].sound, auc.center(), auc.spread()))
            if not lines:
                continue
            title = f"{table} · {_attacked_text(self.cells[(table, runs[0], round_)][0])}: AUC against sound ε"
            figures.append({"title": title, "uri": membership_auc_epsilon(lines, " / ".join(edge) or "no DP", title)})
        return figures

    def failures(self) -> list[dict[str, Any]]:
        return [{"table": self.table_of[row["cell"]], "run": self.run_names[self.run_of[row["cell"]]],
                 "attacked": _attacked_text(row), "seed": row.get("seed"),
                 "reason": row.get("status") or "no status stored", "cell": row["cell"]}
                for row in self.rows if failed(row)]


def _entries(rows: list[dict[str, Any]], method: str,
             columns: list[tuple[str, str, Callable[[float], str]]]) -> list[dict[str, Any]]:
    """One method's entries of the score table over `rows` (one attack's seeds), a TPR at an FPR
    the non-members cannot resolve shown as "n/a"."""
    non_members = _fewest([row for row in rows if not failed(row)], method)
    entries = []
    for key, _, show in columns:
        fpr = float(key[4:]) if key.startswith("tpr@") else None
        entry = _Entry(rows, method, key)
        if fpr is not None and entry.values and not resolvable(fpr, non_members):
            entries.append({"text": "n/a", "failed": entry.lost,
                            "interval": f"needs ≥ {needed_non_members(fpr)} non-members"})
        else:
            entries.append(entry.cell(show))
    return entries


def _victim_cells(cell: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Per victim of rows that pool several (their `by_victim`), its line's name and its seeds'
    rows as the score table reads them: the row with that victim's own metrics (its members and
    the non-members dealt to it). Rows of one victim have none: the pooled line is its own."""
    victims: dict[int, list[dict[str, Any]]] = {}
    for row in cell:
        for entry in row.get("by_victim") or []:
            victims.setdefault(int(entry["victim"]), []).append(
                {**row, "metrics": entry.get("metrics") or {}, "data": {}})
    return [(f"victim {victim} alone", rows) for victim, rows in sorted(victims.items())]


def membership_section(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Everything the "Membership inference" section shows, or None without membership rows."""
    attacked = [row for row in rows if row_type(row) == "membership"]
    if not attacked:
        return None
    training = {row["cell"]: row for row in rows if row_type(row) == "training"}
    found = _Memberships(attacked, training)
    return {
        "lead": found.lead(),
        "tables": [{"name": table, "described": found.described(table), "scores": found.scores(table),
                    "rocs": found.roc_figures(table), "epsilon": found.epsilon_figures(table)}
                   for table in found.tables],
        "failures": found.failures(),
    }


def strongest_memberships(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per attacked defense run (the training rows' `group`), the lead line of its strongest
    membership attack, for the verdicts; runs without membership rows are absent, and so are
    membership rows whose training row is missing (their run is unknown)."""
    training = {row["cell"]: row for row in rows if row_type(row) == "training"}
    attacked = [row for row in rows if row_type(row) == "membership" and str(row.get("training")) in training]
    if not attacked:
        return {}
    found = _Memberships(attacked, training)
    return {run: found.strongest(run) for run in dict.fromkeys(found.run_of.values())}
