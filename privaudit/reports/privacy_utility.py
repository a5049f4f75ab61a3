"""The report's "Privacy and utility" section: where a campaign varies a defense's noise, what its
runs learned beside what the attacks on them achieved, against the noise parameter and against ε,
read from stored rows alone (issue 17, item 2). Without it, "the defense works" and "the defense
destroys the model" look the same.

A sweep is found in the training rows' configurations, not in the campaign file: runs of one
defense kind whose data, run shape and every hyperparameter agree except the noise parameters, at
two noise levels or more. Which hyperparameters set the noise each training row says itself
(`noise`, written from the defense's view: `privaudit.attacks.views.registry.Noise`) — its parameters with
their axis labels, a switch that turns the noise off (DPDL's ND variant) and companions that matter
only through the noise (the `target_rounds` that goes with a target ε); rows written before rows
said so (privaudit 0.1) name none and make no sweep. A run with its noise switched off joins each sweep of
its configuration as "no noise". So several tables make one sweep (DPDL's ND table beside a grid
over σ), and a table whose grid also varies other keys (topology × σ) makes one sweep per value
of those keys.

Per run of a sweep: the task's metric of the final average model (accuracy; else the distance to
the solution or the test loss), the claimed and sound ε of its claim (`RunPrivacy`), and what
each attack table measured on it: inversion PSNR above the noise floor (at the attacked round
where the attack did best, and with the leak test's decision where the rows store one), the
strongest membership attack's AUC, the canary audits' ε lower bound. An attack that finds nothing
at a noise level has not detected anything at that strength; that is no evidence of privacy.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from statistics import mean, pstdev
from typing import Any

from privaudit.reports.figures import privacy_utility
from privaudit.reports.inversion import failed as inversion_failed
from privaudit.reports.inversion import row_type
from privaudit.reports.membership import RunPrivacy, held_text, method_title
from privaudit.reports.membership import failed as membership_failed

UTILITY_METRICS = (("avg_acc", "test accuracy (average model)"),
                   ("avg_error", "distance to the solution (average model)"),
                   ("avg_loss", "test loss (average model)"))


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _noise(row: dict[str, Any]) -> dict[str, Any]:
    """The row's declaration of its noise parameters (module docstring); empty when it has none."""
    declared = row.get("noise")
    return declared if isinstance(declared, dict) and isinstance(declared.get("parameters"), dict) else {}


def _noise_keys(row: dict[str, Any]) -> set[str]:
    declared = _noise(row)
    return {*declared.get("parameters", {}), *([declared["switch"]] if declared.get("switch") else []),
            *(declared.get("companions") or [])}


def _identity(row: dict[str, Any]) -> str:
    """What a run's configuration is apart from its noise, label and seed."""
    config = row.get("config") or {}
    noisy = _noise_keys(row)
    params = {key: value for key, value in (config.get("params") or {}).items() if key not in noisy}
    run = {key: value for key, value in (config.get("run") or {}).items() if key not in ("label", "grid")}
    return json.dumps({"defense": row.get("defense"), "data": config.get("data"), "run": run, "params": params},
                      sort_keys=True, default=str)


@dataclass
class _Run:
    """One defense run (a configuration, all its seeds) and what was measured on it."""

    rows: list[dict[str, Any]]
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def params(self) -> dict[str, Any]:
        return (self.rows[0].get("config") or {}).get("params") or {}

    @property
    def noise(self) -> dict[str, Any]:
        return _noise(self.rows[0])

    @property
    def noise_off(self) -> bool:
        switch = self.noise.get("switch")
        return bool(switch) and self.params.get(switch) is False

    @property
    def label(self) -> str:
        return str(self.rows[0].get("label", "?"))


@dataclass
class _Sweep:
    """Runs of one configuration at several levels of one noise parameter."""

    parameter: str
    label: str
    more_is_noisier: bool
    runs: list[_Run]

    def level(self, run: _Run) -> float | None:
        """The run's value of the parameter; None for a run without noise."""
        return None if run.noise_off else _finite(run.params.get(self.parameter))

    def ordered(self) -> list[_Run]:
        """Runs from the weakest noise to the strongest (no noise first)."""
        return sorted(self.runs, key=lambda run: (self.level(run) is not None,
                                                  (1 if self.more_is_noisier else -1) * (self.level(run) or 0.0)))

    def tag(self, run: _Run) -> str:
        level = self.level(run)
        return "no noise" if level is None else f"{self.label}={level:g}"


def _runs(rows: list[dict[str, Any]]) -> list[_Run]:
    """Training rows grouped into runs, with every finding row on them attached."""
    runs: dict[str, _Run] = {}
    run_of_cell: dict[str, _Run] = {}
    for row in rows:
        if row_type(row) == "training":
            run = runs.setdefault(str(row.get("group") or row["cell"]), _Run([]))
            run.rows.append(row)
            run_of_cell[str(row["cell"])] = run
    for row in rows:
        if row_type(row) in ("inversion", "membership", "audit") and str(row.get("training")) in run_of_cell:
            run_of_cell[str(row["training"])].findings.append(row)
    return list(runs.values())


def find_sweeps(rows: list[dict[str, Any]]) -> list[_Sweep]:
    """Every noise sweep in the rows: per configuration (`_identity`) and noise parameter, the
    runs that set it, with the configuration's runs without noise, when they take ≥ 2 levels."""
    by_identity: dict[str, list[_Run]] = {}
    for run in _runs(rows):
        by_identity.setdefault(_identity(run.rows[0]), []).append(run)
    sweeps = []
    for runs in by_identity.values():
        off = [run for run in runs if run.noise_off]
        for parameter, declared in runs[0].noise.get("parameters", {}).items():
            on = [run for run in runs if not run.noise_off and _finite(run.params.get(parameter)) is not None]
            levels = {_finite(run.params[parameter]) for run in on}
            if on and len(levels) + bool(off) >= 2 and isinstance(declared, list) and len(declared) == 2:
                sweeps.append(_Sweep(parameter, str(declared[0]), bool(declared[1]), on + off))
    return sweeps


@dataclass
class _Measure:
    """One measure of one run over its seeds: the values, and the table's text for them."""

    values: list[float]
    text: str

    def centre(self) -> float | None:
        return mean(self.values) if self.values else None

    def bar(self) -> tuple[float, float] | None:
        if len(self.values) < 2:
            return None
        centre, spread = mean(self.values), pstdev(self.values)
        return centre - spread, centre + spread


def _spread(values: list[float], digits: str) -> str:
    if len(values) == 1:
        return f"{values[0]:{digits}}"
    return f"{mean(values):{digits}} ± {pstdev(values):{digits}}"


def _lost(count: int) -> str:
    return f" ({count} failed)" if count else ""


def _utility(run: _Run) -> tuple[str, _Measure] | None:
    """The task's metric of the final average model over the seeds that finished."""
    finished = [row for row in run.rows if isinstance(row.get("metrics"), dict) and row["metrics"]]
    lost = len(run.rows) - len(finished)
    for key, label in UTILITY_METRICS:
        values = [v for row in finished if (v := _finite(row["metrics"].get(key))) is not None]
        if values:
            return label, _Measure(values, _spread(values, ".3f") + _lost(lost))
    return None


def _inversions(run: _Run) -> dict[str, _Measure]:
    """Per attack table (and what it inverted): PSNR above the noise floor, over seeds, at the
    attacked round where its mean is highest (the attacker's best)."""
    tables: dict[str, dict[Any, list[dict[str, Any]]]] = {}
    for row in run.findings:
        if row_type(row) == "inversion":
            name = f"{row.get('label', '?')} ({row.get('scenario', '?')})"
            tables.setdefault(name, {}).setdefault(row.get("round"), []).append(row)
    found = {}
    for name, rounds in tables.items():
        best = None
        for round_, cell in rounds.items():
            scored = [(psnr, floor, row) for row in cell if not inversion_failed(row)
                      and (psnr := _finite((row.get("metrics") or {}).get("psnr"))) is not None
                      and (floor := _finite((row.get("baseline") or {}).get("psnr"))) is not None]
            if scored and (best is None or mean(p - f for p, f, _ in scored) > best[0]):
                best = (mean(p - f for p, f, _ in scored), round_, scored, len(cell) - len(scored))
        if best is None:
            lost = sum(len(cell) for cell in rounds.values())
            found[name] = _Measure([], f"no score{_lost(lost)}")
            continue
        _, round_, scored, lost = best
        psnr = [p for p, _, _ in scored]
        floor = [f for _, f, _ in scored]
        text = f"{_spread(psnr, '.1f')} dB, floor {_spread(floor, '.1f')} (round {round_})"
        decisions = [row["leak"].get("leak") for _, _, row in scored if isinstance(row.get("leak"), dict)]
        if len(decisions) > 1:
            text += f"; leak detected in {sum(bool(d) for d in decisions)} of {len(decisions)} seeds"
        elif decisions:
            text += "; leak detected" if decisions[0] else "; no leak detected"
        found[name] = _Measure([p - f for p, f, _ in scored], text + _lost(lost))
    return found


def _by_label(run: _Run, kind: str) -> dict[str, list[dict[str, Any]]]:
    """The run's finding rows of one type, grouped by their table's label."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for row in run.findings:
        if row_type(row) == kind:
            tables.setdefault(str(row.get("label", "?")), []).append(row)
    return tables


def _memberships(run: _Run) -> dict[str, _Measure]:
    """Per membership table: the AUC of its strongest method and attacked model (highest mean over
    seeds; picking the strongest favours the attacker)."""
    found = {}
    for name, rows in _by_label(run, "membership").items():
        ok = [row for row in rows if not membership_failed(row)]
        candidates: dict[tuple[Any, str], list[float]] = {}
        for row in ok:
            for method, metrics in (row.get("metrics") or {}).items():
                auc = _finite((metrics or {}).get("auc"))
                if auc is not None:
                    candidates.setdefault((row.get("round"), method), []).append(auc)
        lost = len(rows) - len(ok)
        if not candidates:
            found[name] = _Measure([], f"no score{_lost(lost)}")
            continue
        (round_, method), values = max(candidates.items(), key=lambda item: mean(item[1]))
        at = f"round {round_}" if round_ is not None else held_text(next(row for row in ok if row.get("round") is None))
        found[name] = _Measure(values, f"AUC {_spread(values, '.2f')} ({method_title(method)}, {at}){_lost(lost)}")
    return found


def _audits(run: _Run) -> dict[str, _Measure]:
    """Per canary audit table: its rigorous ε lower bound over seeds."""
    found = {}
    for name, rows in _by_label(run, "audit").items():
        values = [v for row in rows if (v := _finite(row.get("eps_lb"))) is not None]
        lost = len(rows) - len(values)
        text = f"ε_LB {_spread(values, '.3g')}" if values else "no bound"
        found[name] = _Measure(values, text + _lost(lost))
    return found


_FAMILIES = (
    ("inversion", _inversions, "inversion PSNR above the noise floor (dB)", (0.0, "noise floor")),
    ("membership", _memberships, "membership AUC (strongest attack)", (0.5, "chance")),
    ("audit", _audits, "ε lower bound (canary audit)", None),
)


def _eps_text(value: float | None, privacy: RunPrivacy, claimed: bool) -> str:
    if value is not None:
        return f"{value:.3g}"
    if privacy.undefended:
        return "no DP"
    return "—" if claimed else privacy.edge_label


@dataclass
class _Point:
    """One run of a sweep as the section shows it: its noise level, ε, utility and attack success."""

    run: _Run
    level: float | None
    tag: str
    privacy: RunPrivacy
    utility: tuple[str, _Measure] | None
    measures: dict[str, dict[str, _Measure]]

    def drawn(self, measure: _Measure, sound: bool) -> dict[str, Any]:
        """The point of `measure` as `privaudit.reports.figures.privacy_utility` draws it."""
        return {"param": self.level, "eps": self.privacy.sound if sound else self.privacy.claimed,
                "claimed": self.privacy.claimed if sound else None, "y": measure.centre(), "bar": measure.bar(),
                "utility": self.utility[1].centre() if self.utility else None, "tag": self.tag}

    def line(self, columns: list[tuple[str, str]]) -> dict[str, Any]:
        """The point's line of the table."""
        return {
            "level": self.tag, "run": self.run.label, "seeds": ", ".join(str(row.get("seed", "?")) for row in self.run.rows),
            "utility": self.utility[1].text if self.utility else "no final metrics (failed)",
            "claimed": _eps_text(self.privacy.claimed, self.privacy, True),
            "sound": _eps_text(self.privacy.sound, self.privacy, False),
            "measures": [self.measures[kind][name].text if name in self.measures[kind] else "—"
                         for kind, name in columns],
        }


def _title(sweep: _Sweep) -> str:
    """The defense, its tables' labels (without their grid values), the shape and the data."""
    first = sweep.runs[0].rows[0]
    config = first.get("config") or {}
    shape, data = config.get("run") or {}, config.get("data") or {}
    labels = ", ".join(dict.fromkeys(run.label.split(" (")[0] for run in sweep.ordered()))
    return (f"{first.get('title', first.get('defense', '?'))}: {labels} · {shape.get('topology', '?')}, "
            f"N={shape.get('agents', '?')}, {data.get('dataset', '?')} · {sweep.label} sweep")


def _section_of(sweep: _Sweep, title: str) -> dict[str, Any]:
    """One sweep's figure and table: the utility and every attack family's lines."""
    symbol, noisier = sweep.label, sweep.more_is_noisier
    points = [_Point(run, sweep.level(run), sweep.tag(run), RunPrivacy(run.rows), _utility(run),
                     {kind: read(run) for kind, read, _, _ in _FAMILIES}) for run in sweep.ordered()]
    sound = any(point.privacy.sound is not None for point in points)
    utility_label = next((point.utility[0] for point in points if point.utility), UTILITY_METRICS[0][1])
    families = [{"ylabel": utility_label, "reference": None,
                 "lines": {"average model": [p.drawn(p.utility[1], sound) for p in points if p.utility]}}]
    columns: list[tuple[str, str]] = []
    for kind, _, ylabel, reference in _FAMILIES:
        names = list(dict.fromkeys(name for point in points for name in point.measures[kind]))
        columns += [(kind, name) for name in names]
        lines = {name: [p.drawn(p.measures[kind][name], sound) for p in points
                        if name in p.measures[kind] and p.measures[kind][name].values] for name in names}
        lines = {name: drawn for name, drawn in lines.items() if drawn}
        if lines:
            families.append({"ylabel": ylabel, "reference": reference, "lines": lines})
    edges = dict.fromkeys("no DP" if p.privacy.undefended else p.privacy.edge_label if sound else "no claim"
                          for p in points if (p.privacy.sound if sound else p.privacy.claimed) is None)
    figure = privacy_utility(families, f"{symbol} ({sweep.parameter})", "left" if noisier else "right",
                             "sound ε" if sound else "claimed ε", " / ".join(edges) or "no ε", title) \
        if families[0]["lines"] else None
    return {"title": title, "parameter": sweep.parameter, "symbol": symbol, "figure": figure,
            "utility": utility_label, "columns": [name for _, name in columns],
            "table": [point.line(columns) for point in points], "sound": sound,
            "both_eps": sound and any(point.privacy.claimed is not None for point in points)}


def _distinct_titles(sweeps: list[_Sweep]) -> list[str]:
    """Each sweep's title; where two would be the same, with the configuration values that tell
    them apart."""
    titles = [_title(sweep) for sweep in sweeps]
    for title in set(titles):
        same = [k for k, other in enumerate(titles) if other == title]
        if len(same) < 2:
            continue
        configs = [json.loads(_identity(sweeps[k].runs[0].rows[0])) for k in same]
        flat = [config["run"] | config["params"] for config in configs]
        differ = sorted({key for values in flat for key in values
                         if len({json.dumps(other.get(key), default=str) for other in flat}) > 1})
        for k, values in zip(same, flat):
            titles[k] += " · " + ", ".join(f"{key}={values.get(key)}" for key in differ)
    return titles


def privacy_utility_section(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every noise sweep's figure and table for the "Privacy and utility" section; empty when no
    campaign in the rows varies a defense's noise."""
    sweeps = find_sweeps(rows)
    return [_section_of(sweep, title) for sweep, title in zip(sweeps, _distinct_titles(sweeps))]
