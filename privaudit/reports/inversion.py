"""The report's "Reconstruction attacks" section, from inversion rows alone: laid out like DPDL's
Tables III/IV (seed 001) — per round, metric blocks × attacks × the runs' grid settings — with the
noise floor beside every score and the seeds judged leaking (the decision each row stores,
`privaudit.leak`; never recomputed here), failed attempts apart, image grids and
MSE-over-iterations traces.
"""

from __future__ import annotations

import json
import math
from statistics import mean, median, pstdev
from typing import Any

from privaudit.reports.artifacts import Images
from privaudit.reports.figures import inversion_traces


def row_type(row: dict[str, Any]) -> str:
    """A row's type; rows from before rows carried one are training rows."""
    return row.get("type", "training")


# The scores DPDL's Tables III/IV report (and LPIPS, shown only when some value exists): key,
# heading, format. Lower MSE / LPIPS and higher PSNR / SSIM: closer to the original.
INVERSION_METRICS = (("mse", "MSE", ".3g"), ("psnr", "PSNR (dB)", ".2f"), ("ssim", "SSIM", ".3f"),
                     ("lpips", "LPIPS", ".3f"))


def failed(row: dict[str, Any]) -> bool:
    """Whether an attack attempt failed or could not run for its attacker (its status says why)."""
    return str(row.get("status", "")).startswith(("failed", "not possible"))


def setting_text(setting: dict[str, Any]) -> str:
    """A run's grid values, compactly: the topology by name, the number of agents as N, every
    other field as name=value ("ring, N=10, lr=0.1"); "default" for a run without a grid."""
    parts = []
    for key, value in setting.items():
        if key == "topology":
            parts.append(str(value))
        elif key == "agents":
            parts.append(f"N={value}")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts) or "default"


def _setting_key(row: dict[str, Any]) -> str:
    return json.dumps(row.get("setting") or {}, sort_keys=True)


def _value(row: dict[str, Any], metric: str, source: str = "metrics") -> float | None:
    """A score of a row, None when absent or NaN (the attack produced nothing to score)."""
    value = (row.get(source) or {}).get(metric)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _mean_std(values: list[float], digits: str) -> str:
    """Mean ± population std over seeds; one seed gives its value alone, an infinite PSNR (a
    reconstruction equal to its original) makes the mean infinite."""
    if not values:
        return "—"
    if any(math.isinf(v) for v in values):
        return "∞"
    if len(values) == 1:
        return f"{values[0]:{digits}} (1 seed)"
    return f"{mean(values):{digits}} ± {pstdev(values):{digits}}"


def _distinct(rows: list[dict[str, Any]], field: str) -> str:
    """The distinct values of `field` over `rows`, in order of first appearance."""
    return ", ".join(dict.fromkeys(str(row.get(field, "?")) for row in rows))


def _db(value: float) -> str:
    return "∞ dB" if math.isinf(value) else f"{value:.1f} dB"


def _seeds(count: int) -> str:
    return f"{count} seed{'' if count == 1 else 's'}"


def percent(fraction: float) -> str:
    return f"{float(fraction) * 100:.3g} %"


def leak_record(row: dict[str, Any]) -> dict[str, Any] | None:
    """A row's stored leak decision (`privaudit.leak`), None for a row without one: written
    before the leak test, or with no reconstruction to judge."""
    record = row.get("leak")
    return record if isinstance(record, dict) and isinstance(record.get("leak"), bool) else None


def leak_words(row: dict[str, Any]) -> str | None:
    """A row's stored leak decision in a few words ("leak at 99 %", "no leak detected"), None
    without one."""
    record = leak_record(row)
    if record is None:
        return None
    return f"leak at {percent(record['confidence'])}" if record["leak"] else "no leak detected"


def _closeness(record: dict[str, Any]) -> int:
    """How near a decision came to a leak: the better of its two statistics' worse rank."""
    ranks = [(record.get(f"{s}psnr_rank"), record.get(f"{s}ssim_rank")) for s in ("", "best_")]
    return min(max(int(r or 0) for r in pair) for pair in ranks)


def leak_verdict(rows: list[dict[str, Any]]) -> str:
    """The leak decisions stored in the scored attempts `rows` (the seeds of one attack, setting
    and round) in words. Rows written before the leak test fall back to the old comparison of the
    median PSNR with the floor's mean, said to be that and to state no confidence."""
    decided = [(row, record) for row, record in ((row, leak_record(row)) for row in rows) if record is not None]
    legacy = [row for row in rows if leak_record(row) is None]
    if not decided:
        return _old_comparison(legacy)
    records = [record for _, record in decided]
    level = "/".join(dict.fromkeys(percent(r["confidence"]) for r in records))
    against = "/".join(dict.fromkeys(str(r.get("draws", "?")) for r in records)) + \
        " batches of unrelated training images"
    leaking = [r for r in records if r["leak"]]
    if leaking:
        allowed = int(leaking[0].get("allowed_rank", 1))
        beat = "every one" if allowed == 1 else f"all but {allowed - 1}"
        text = (f"leak at {level} confidence in {len(leaking)} of {_seeds(len(records))} (the batch's mean or "
                f"its best image beat {beat} of {against} on both PSNR and SSIM)")
        others = len(records) - len(leaking)
        if others:
            text += f"; not detected at this strength in the other {'seed' if others == 1 else _seeds(others)}"
    else:
        row, record = min(decided, key=lambda pair: _closeness(pair[1]))
        which = f"; closest, seed {row.get('seed', '?')}" if len(decided) > 1 else ""
        text = (f"no leak detected at this strength (rank test at {level} confidence against {against}, "
                f"{_seeds(len(decided))}{which}: {record.get('reason', 'no reason stored')})")
    if legacy:
        text += f"; {len(legacy)} more written before the leak test, not judged"
    return text


def _old_comparison(rows: list[dict[str, Any]]) -> str:
    """The comparison rows carried before the leak test: median PSNR against the floor's mean."""
    floor = [v for v in (_value(row, "psnr", "baseline") for row in rows) if v is not None]
    psnr = [v for v in (_value(row, "psnr") for row in rows) if v is not None]
    if not floor or not psnr:
        return "no noise floor stored to compare with"
    old = ("by the old comparison of the median PSNR with the floor's mean, which states no confidence (rows "
           "written before the leak test)")
    if median(psnr) > median(floor):
        gap = "∞" if math.isinf(median(psnr)) else f"{median(psnr) - median(floor):.1f}"
        return f"{gap} dB above the noise floor ({_db(median(floor))}) {old}"
    return f"not above the noise floor ({_db(median(floor))}) {old}"


def _attack_names(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each inversion cell's row name "defense table · attack label".

    Two configurations sharing both labels (a campaign edited between runs into the same
    results directory) would pool their seeds; they are told apart by their configuration id,
    the way `runs_of` does for training runs."""
    base = {row["cell"]: f"{row.get('defense_table', '?')} · {row.get('label', '?')}" for row in rows}
    seen: dict[tuple[str, str, Any, Any], set[str]] = {}
    for row in rows:
        seen.setdefault((base[row["cell"]], _setting_key(row), row.get("round"), row.get("seed")),
                        set()).add(row.get("group", row["cell"]))
    clashing = {key[0] for key, groups in seen.items() if len(groups) > 1}
    return {row["cell"]: (f"{base[row['cell']]} [{str(row.get('group', row['cell']))[:6]}]"
                          if base[row["cell"]] in clashing else base[row["cell"]]) for row in rows}


class _Inversions:
    """The inversion rows of a results directory, grouped by (attack name, setting, round)."""

    def __init__(self, rows: list[dict[str, Any]], images: Images | None = None) -> None:
        self.rows = rows
        self.images = images
        self.name = _attack_names(rows)
        self.settings: dict[str, dict[str, Any]] = {}
        self.cells: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
        names: dict[str, None] = {}
        for row in rows:
            key = _setting_key(row)
            self.settings.setdefault(key, row.get("setting") or {})
            names.setdefault(self.name[row["cell"]])
            self.cells.setdefault((self.name[row["cell"]], key, row.get("round")), []).append(row)
        self.names = list(names)
        self.rounds = sorted({row.get("round") for row in rows}, key=lambda r: (r is None, r))

    def ok(self, cell: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [row for row in cell if not failed(row)]

    def scores(self, cell: list[dict[str, Any]], metric: str, source: str = "metrics") -> list[float]:
        """The scores (or noise floors) of a cell's attempts that did not fail."""
        return [v for v in (_value(row, metric, source) for row in self.ok(cell)) if v is not None]

    def lead(self) -> list[str]:
        """Per attack name, its strongest result in words (see `headline`)."""
        return [self.headline(name) for name in self.names]

    def headline(self, name: str | None = None) -> str:
        """The (setting, round) where attack `name` did best — the largest share of seeds judged
        leaking, then the highest median PSNR over seeds — and the leak decisions stored for its
        seeds (`leak_verdict`); the best of every attack when `name` is None."""
        chosen = {key: cell for key, cell in self.cells.items() if name is None or key[0] == name}
        attempts = [row for cell in chosen.values() for row in cell]
        lost = sum(failed(row) for row in attempts)
        lost_text = f" {lost} of {len(attempts)} attempts failed." if lost else ""
        best: tuple[tuple[float, float], str, str, Any, list[dict[str, Any]]] | None = None
        for (n, key, round_), cell in chosen.items():
            psnr = self.scores(cell, "psnr")
            if not psnr:
                continue
            records = [record for record in map(leak_record, self.ok(cell)) if record is not None]
            share = sum(record["leak"] for record in records) / len(records) if records else 0.0
            if best is None or (share, median(psnr)) > best[0]:
                best = ((share, median(psnr)), n, key, round_, cell)
        if best is None:
            return f"{name or 'every attack'}: no attempt produced a reconstruction.{lost_text}"
        (_, value), n, key, round_, cell = best
        seeds = len(self.scores(cell, "psnr"))
        where = f"{setting_text(self.settings[key])}, round {round_}, {_seeds(seeds)}"
        ssim = self.scores(cell, "ssim")
        ssim_text = f", SSIM {median(ssim):.2f}" if ssim else ""
        scored = [row for row in self.ok(cell) if _value(row, "psnr") is not None]
        return f"{n}: median PSNR {_db(value)}{ssim_text} ({where}), {leak_verdict(scored)}.{lost_text}"

    def leak_line(self, name: str, cells: list[list[dict[str, Any]] | None]) -> dict[str, Any]:
        """The table line of attack `name`: per cell, how many of its seeds were judged leaking."""
        shown = []
        for cell in cells:
            records = [] if cell is None else [r for r in map(leak_record, self.ok(cell)) if r is not None]
            level = "/".join(dict.fromkeys(percent(r["confidence"]) for r in records))
            shown.append({"text": "" if cell is None else
                          (f"{sum(r['leak'] for r in records)} of {len(records)} ({level})" if records else "—"),
                          "failed": 0 if cell is None else sum(failed(row) for row in cell)})
        return {"name": name, "kind": "score", "cells": shown}

    def attacks(self) -> list[dict[str, Any]]:
        """What each attack name inverted, under which threat model, and how its attempts ended
        (a closed-form attack, the analytic one, has no iterations to count)."""
        described = []
        for name in self.names:
            attempts = [row for row in self.rows if self.name[row["cell"]] == name]
            iterations = [row["iterations"] for row in attempts
                          if row.get("iterations") is not None and row.get("stopped_by") != "closed form"]
            described.append({
                "name": name, "attack": _distinct(attempts, "attack_title"),
                "scenario": _distinct(attempts, "scenario"), "needs": _distinct(attempts, "scenario_needs"),
                "target": _distinct(attempts, "target_kind"), "threat": _distinct(attempts, "threat"),
                "victim": _distinct(attempts, "victim"), "batch": _distinct(attempts, "batch_size"),
                "attempts": len(attempts), "failed": sum(failed(row) for row in attempts),
                "iterations": f"{median(iterations):.0f}" if iterations else "—",
                "stopped_by": _distinct([row for row in attempts if row.get("stopped_by")], "stopped_by") or "—",
            })
        return described

    def tables(self) -> list[dict[str, Any]]:
        """Per round: metric blocks × attack names × settings, each entry mean ± std over the
        seeds that did not fail, its failed attempts counted, and the noise floor beneath."""
        shown = [m for m in INVERSION_METRICS
                 if m[0] != "lpips" or any(_value(row, "lpips") is not None for row in self.rows)]
        tables = []
        for round_ in self.rounds:
            keys = [key for key in self.settings if any(k == key and r == round_ for (_, k, r) in self.cells)]
            names = [name for name in self.names if any(n == name and r == round_ for (n, _, r) in self.cells)]
            blocks = []
            for metric, title, digits in shown:
                lines = []
                for name in names:
                    cells = [self.cells.get((name, key, round_)) for key in keys]
                    lines.append({"name": name, "kind": "score", "cells": [
                        {"text": "" if cell is None else
                         ("all failed" if not self.ok(cell) else _mean_std(self.scores(cell, metric), digits)),
                         "failed": 0 if cell is None else sum(failed(row) for row in cell)}
                        for cell in cells]})
                    if any(cell and self.scores(cell, metric, "baseline") for cell in cells):
                        lines.append({"name": "noise floor", "kind": "floor", "cells": [
                            {"text": "" if cell is None else _mean_std(self.scores(cell, metric, "baseline"), digits),
                             "failed": 0} for cell in cells]})
                blocks.append({"title": title, "lines": lines})
            if any(leak_record(row) for (_, _, r), cell in self.cells.items() if r == round_ for row in cell):
                blocks.append({"title": "seeds judged leaking", "lines": [
                    self.leak_line(name, [self.cells.get((name, key, round_)) for key in keys]) for name in names]})
            tables.append({"round": round_, "settings": [
                {"text": setting_text(self.settings[key]), "full": key} for key in keys], "blocks": blocks})
        return tables

    def active(self) -> list[dict[str, Any]]:
        """Per active attack, setting and round: its side and the passive attack on the same runs
        (the `active` record each row stores), each as records recovered per seed, median PSNR and
        SSIM and the seeds judged leaking — read from the rows, never recomputed."""
        shown = []
        for (name, key, round_), cell in self.cells.items():
            records = [row["active"] for row in self.ok(cell) if isinstance(row.get("active"), dict)]
            if not records:
                continue
            first = records[0]
            shown.append({"name": name, "setting": setting_text(self.settings[key]), "round": round_,
                          "liar": first.get("liar"), "victim": first.get("victim"),
                          "agents": ", ".join(map(str, first.get("agents") or [])),
                          "assumptions": first.get("assumptions") or [],
                          "sides": [_active_side([record[side] for record in records], records)
                                    for side in ("active", "passive")]})
        return shown

    def failures(self) -> list[dict[str, Any]]:
        return [{"name": self.name[row["cell"]], "setting": setting_text(row.get("setting") or {}),
                 "round": row.get("round"), "seed": row.get("seed"), "reason": row.get("status"),
                 "cell": row["cell"]} for row in self.rows if failed(row)]

    def grids(self) -> list[dict[str, Any]]:
        """Per setting, the first seed's originals above its reconstructions: attack names ×
        rounds, PSNR beneath each pair."""
        grids = []
        for key, setting in self.settings.items():
            present = [(n, r) for (n, k, r) in self.cells if k == key]
            rounds = [r for r in self.rounds if any(r == pr for _, pr in present)]
            names = [n for n in self.names if any(n == pn for pn, _ in present)]
            lines = []
            for name in names:
                entries = []
                for round_ in rounds:
                    cell = self.cells.get((name, key, round_))
                    entries.append(None if cell is None else self._entry(min(cell, key=lambda r: r.get("seed", 0))))
                lines.append({"name": name, "entries": entries})
            grids.append({"setting": setting_text(setting), "rounds": rounds, "lines": lines})
        return grids

    def _entry(self, row: dict[str, Any]) -> dict[str, Any]:
        artifacts = row.get("artifacts") or {}
        psnr = _value(row, "psnr")
        return {
            "seed": row.get("seed"),
            "original": self.images.embed(artifacts.get("original"), "original"),
            "reconstruction": self.images.embed(artifacts.get("reconstruction"), "reconstruction"),
            "psnr": "—" if psnr is None else _db(psnr),
            "status": row.get("status", ""),
        }

    def warnings(self) -> list[str]:
        """The rows' warnings (a batch size other than the defense's), once per attack name."""
        return list(dict.fromkeys(f"Warning, {self.name[row['cell']]}: {warning}." for row in self.rows
                                  for warning in row.get("warnings") or []))

    def lpips_notes(self) -> list[str]:
        """Why LPIPS is missing, and which values were scored with a backbone other than the
        published weights (their status says so), once per distinct reason."""
        noted = [row for row in self.rows if not failed(row) and row.get("lpips_status") != "ok"
                 and (_value(row, "lpips") is None or row.get("lpips_status"))]
        return list(dict.fromkeys(str(row.get("lpips_status") or "unavailable: no reason stored") for row in noted))

    def trace_figures(self) -> list[dict[str, str]]:
        """Per attack label, the reconstruction's MSE over the attack's iterations: one colour per
        (defense run, round), one thin line per seed."""
        figures = []
        labels = dict.fromkeys(str(row.get("label", "?")) for row in self.rows if row.get("trace"))
        for label in labels:
            curves: dict[str, list[dict[str, Any]]] = {}
            for row in self.rows:
                if row.get("trace") and str(row.get("label", "?")) == label:
                    curve = f"{row.get('defense_label', '?')} · {label}, round {row.get('round')}"
                    curves.setdefault(curve, []).append(row)
            figures.append({"label": label, "uri": inversion_traces(curves, label)})
        return figures


def _active_side(sides: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
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


def inversion_section(rows: list[dict[str, Any]], images: Images) -> dict[str, Any] | None:
    """Everything the "Reconstruction attacks" section shows, or None without inversion rows."""
    attacked = [row for row in rows if row_type(row) == "inversion"]
    if not attacked:
        return None
    found = _Inversions(attacked, images)
    return {
        "lead": found.lead() + found.warnings(), "attacks": found.attacks(), "tables": found.tables(),
        "failures": found.failures(), "grids": found.grids(), "lpips_notes": found.lpips_notes(),
        "traces": found.trace_figures(), "active": found.active(),
    }


def strongest_reconstructions(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per attacked defense run (the training rows' `group`, all seeds alike), the section's
    headline of its strongest reconstruction, for the verdicts; runs without inversion rows are
    absent. Inversion rows whose training row is missing are left out: their run is unknown."""
    group_of = {row["cell"]: row.get("group") for row in rows if row_type(row) == "training"}
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        group = group_of.get(str(row.get("training")))
        if row_type(row) == "inversion" and group is not None:
            by_run.setdefault(group, []).append(row)
    return {group: _Inversions(attacked).headline() for group, attacked in by_run.items()}


def best_reconstructions(rows: list[dict[str, Any]], images: Images) -> dict[str, dict[str, Any]]:
    """Per attacked defense run (the training rows' `group`), its best reconstruction: the attempt
    with the highest PSNR over every attack, setting, round and seed, as the original and the
    reconstruction images with its PSNR, attack name, round and leak decision — the thumbnail
    beside the run's verdict. Runs whose attempts all failed are absent."""
    group_of = {row["cell"]: row.get("group") for row in rows if row_type(row) == "training"}
    attempts = [row for row in rows if row_type(row) == "inversion" and not failed(row)
                and group_of.get(str(row.get("training"))) is not None and _value(row, "psnr") is not None]
    names = _attack_names(attempts)
    best: dict[str, dict[str, Any]] = {}
    for row in attempts:
        group = str(group_of[str(row["training"])])
        if group not in best or _value(row, "psnr") > _value(best[group], "psnr"):
            best[group] = row
    found = {}
    for group, row in best.items():
        artifacts = row.get("artifacts") or {}
        found[group] = {"original": images.embed(artifacts.get("original"), "original"),
                        "reconstruction": images.embed(artifacts.get("reconstruction"), "reconstruction"),
                        "psnr": _db(_value(row, "psnr")), "attack": names[row["cell"]], "round": row.get("round"),
                        "leak": leak_words(row) or ""}
    return found
