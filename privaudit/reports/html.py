"""The HTML audit report: rendered from a results directory alone, so any directory can be
re-rendered, and never recomputing a finding.

The results hold four kinds of rows: training rows (one per defense run and seed; rows written
before rows had a `type` are training rows), inversion rows (one per attack table, defense run,
seed and attacked round), membership rows (one per membership table, defense run, seed and
attacked round or final average model) and audit rows (one per audit table and seed). The page
opens with the verdicts (`privaudit/reports/verdicts.py`), then the evidence: the claims and training
sections here (training rows only), reconstruction attacks (`privaudit/reports/inversion.py`), membership
inference (`privaudit/reports/membership.py`), empirical audits (`privaudit/reports/audits.py`), privacy by the
attacker's position (`privaudit/reports/position.py`), and the provenance of every cell.

Every string from a campaign or a row reaches the page escaped: the environment's `finalize`
(`privaudit.reports.notation.html_text`) escapes each `{{ … }}` before it adds the only markup it writes
(`<sub>`, `<sup>` and unbreakable spans around numbers), and no template uses `|safe`. Attribute
values, code and the campaign file go through `verbatim`, which escapes and adds nothing. Figures
are PNG images, so labels drawn in them are pixels, not markup.
"""

from __future__ import annotations

import functools
import platform
import tomllib
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from statistics import mean, pstdev
from typing import Any

from jinja2 import Environment, PackageLoader

from privaudit.errors import PrivauditError
from privaudit.files import CAMPAIGN_BYTES, placed, read_inside, write_inside
from privaudit.store import CAMPAIGN_FILE, REPORT_FILE, ResultsStore
from privaudit.reports.active import active_section
from privaudit.reports.artifacts import Images
from privaudit.reports.audits import audit_section
from privaudit.reports.coalition import coalition_section
from privaudit.reports.figures import TRAINING_METRICS, epsilon_overview, training_curves
from privaudit.reports.inversion import best_reconstructions, inversion_section, row_type
from privaudit.reports.membership import held_text, membership_section
from privaudit.reports.notation import html_text, verbatim
from privaudit.reports.position import position_section
from privaudit.reports.privacy_utility import privacy_utility_section
from privaudit.reports.released import released_section
from privaudit.reports.threat_comparison import threat_comparisons
from privaudit.reports.verdicts import verdict_section

_VERSIONED = ("privaudit", "torch", "numpy", "dp-accounting", "scikit-image", "scikit-learn")


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in _VERSIONED:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def runs_of(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The training rows of each run (one configuration, all its seeds), keyed by a display label.

    Two configurations with the same label (a campaign edited between runs into the same
    results directory) stay apart, the label then carrying the configuration's id. Rows from
    before rows carried a group are each their own run."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row_type(row) == "training":
            groups.setdefault(row.get("group") or row["cell"], []).append(row)
    label_count: dict[str, int] = {}
    for runs in groups.values():
        label_count[runs[0]["label"]] = label_count.get(runs[0]["label"], 0) + 1
    return {
        (runs[0]["label"] if label_count[runs[0]["label"]] == 1 else f"{runs[0]['label']} [{group[:6]}]"): runs
        for group, runs in groups.items()
    }


def training_failed(row: dict[str, Any]) -> bool:
    """Whether a training run failed (it diverged): its row has no final metrics, its status says
    why."""
    return str(row.get("status", "")).startswith("failed")


def _summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Final metrics per run, mean ± std over seeds."""
    table = []
    for label, runs in runs_of(rows).items():
        table.append({
            "label": label,
            "title": runs[0]["title"],
            "seeds": [r["seed"] for r in runs],
            "outcome": _outcome(runs),
            "claim": runs[0]["claim"] or {},
            "rounds": runs[0]["config"]["run"]["rounds"],
            "topology": f"{runs[0]['config']['run']['topology']} × {runs[0]['config']['run']['agents']}",
            "messages": runs[0]["messages"],
            "wall_s": _mean_wall(runs),
        } | _model_and_data(runs[0]))
    return table


def _model_and_data(row: dict[str, Any]) -> dict[str, str]:
    """What a run trained and on what: the model (its options, and the row's `model_note` when
    privaudit changed it, e.g. BatchNorm replaced by GroupNorm) and the data (a user's folder,
    array file or loader by its source line and the start of its content hash, so a reader can
    tell which data the results came from)."""
    config = row.get("config") or {}
    run, data = config.get("run") or {}, config.get("data") or {}
    options = run.get("model_options") or {}
    model = str(run.get("model", "?")) + (f" {options}" if options else "")
    content = data.get("content") if isinstance(data.get("content"), dict) else None
    source = (f"{content.get('source', '?')} (SHA-256 {str(content.get('sha256', '?'))[:12]}…)" if content
              else str(data.get("dataset", "?")))
    return {"model": model, "model_note": str(row.get("model_note") or ""), "data": source}


def _mean_wall(runs: list[dict[str, Any]]) -> str:
    """Mean wall time per seed, "—" when a seed's row stored none."""
    walls = [_wall(row) for row in runs]
    return "—" if any(w is None for w in walls) else f"{mean(walls):.1f}"


def _spread(values: list[float], digits: str) -> str:
    """Mean ± population std over seeds; one seed's value alone (a "± 0.000" would read as a
    measured spread)."""
    if len(values) == 1:
        return f"{values[0]:{digits}}"
    return f"{mean(values):{digits}} ± {pstdev(values):{digits}}"


def _outcome(runs: list[dict[str, Any]]) -> str:
    """How training ended, mean ± std over the seeds that finished, in the metric the task has,
    and which seeds failed and why."""
    finished = [r for r in runs if not training_failed(r)]
    failed = [r for r in runs if training_failed(r)]
    outcome = _metrics_outcome([r["metrics"] for r in finished]) if finished else ""
    if not failed:
        return outcome
    seeds = ", ".join(str(r["seed"]) for r in failed)
    note = f"seed{'s' * (len(failed) > 1)} {seeds} {failed[0]['status']}"
    return f"{outcome}; {note}" if outcome else note


def _metrics_outcome(metrics: list[dict[str, Any]]) -> str:
    """The last evaluation over the seeds, in the task's metric (a seed whose row lacks it, as a
    hand-edited row may, is left out of that number)."""
    def spread(key: str, spec: str) -> str:
        values = [m[key] for m in metrics if isinstance(m.get(key), (int, float))]
        return _spread(values, spec) if values else "—"

    if any("avg_acc" in m for m in metrics):
        return f"accuracy {spread('avg_acc', '.3f')} (average model), {spread('agent_acc_mean', '.3f')} (agents)"
    if any("avg_error" in m for m in metrics):
        return (f"distance to solution {spread('avg_error', '.3g')} (average model), "
                f"{spread('agent_error_mean', '.3g')} (agents)")
    return f"test loss {spread('avg_loss', '.4g')} (average model)"


def _number(value: Any) -> str:
    """A number to 4 significant digits; "—" for anything else (None, or a field a row lacks)."""
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def _wall(row: dict[str, Any]) -> float | None:
    wall = row.get("wall_s")
    return float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None


def _provenance(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every cell of the results, training, attack and audit alike, in the order they finished,
    with its seed, status (a training row stores one only when it failed: "ok" otherwise), wall time
    and the privaudit version that wrote it; the total wall time and the cells that stored none."""
    listed = []
    for row in rows:
        kind = row_type(row)
        attacked = None
        if kind in ("inversion", "coalition"):
            what = f"{row.get('defense_label', '?')} · {row.get('label', '?')}, round {row.get('round', '?')}"
            attacked = row.get("training")
        elif kind == "membership":
            at = held_text(row) if row.get("round") is None else f"round {row['round']}"
            what = f"{row.get('defense_label', '?')} · {row.get('label', '?')}, {at}"
            attacked = row.get("training")
        elif kind == "audit":
            what = f"{row.get('label', '?')} · {row.get('subject', '?')} ({row.get('kind', '?')} audit)"
        else:
            what = str(row.get("label", "?"))
        wall = _wall(row)
        listed.append({
            "cell": row["cell"], "type": kind, "what": what, "attacked": attacked, "seed": row.get("seed"),
            "status": row.get("status") or ("ok" if kind == "training" else ""),
            "wall_s": "—" if wall is None else f"{wall:.1f}",
            "version": str(row.get("version", "—")),
        })
    walls = [_wall(row) for row in rows]
    return {"cells": listed, "total_s": f"{sum(w for w in walls if w is not None):.1f}",
            "untimed": sum(w is None for w in walls)}


def _campaign(path: Path) -> dict[str, str]:
    """The kept campaign file's text, name and description (read as TOML, not validated: the
    report shows what was run, whatever the current schema says)."""
    try:
        text = read_inside(path.parent, path.name, CAMPAIGN_BYTES, "kept campaign").decode("utf-8", errors="replace")
    except FileNotFoundError:
        return {"text": "(campaign file not kept)", "name": "", "description": ""}
    except PrivauditError as error:
        return {"text": f"(campaign file not shown: {error})", "name": "", "description": ""}
    try:
        header = tomllib.loads(text).get("campaign") or {}
    except (tomllib.TOMLDecodeError, RecursionError):
        header = {}
    header = header if isinstance(header, dict) else {}
    return {"text": text, "name": str(header.get("name", "")), "description": str(header.get("description", ""))}


SECTION_TITLES = {"claims": "Privacy claims", "training": "Training", "privacy-utility": "Privacy and utility",
                  "coalition": "Coalition attacks",
                  "inversion": "Reconstruction attacks", "membership": "Membership inference",
                  "audits": "Empirical audits", "position": "Privacy by position", "active": "Participants who lie",
                  "released": "Released model",
                  "provenance": "Provenance"}
"""The sections after the verdicts, in page order, as the table of contents names them."""


def _contents(sections: dict[str, Any]) -> list[tuple[str, str]]:
    """The table of contents: every section after the verdicts that this report has."""
    return [(key, title) for key, title in SECTION_TITLES.items()
            if key.replace("-", "_") not in sections or sections[key.replace("-", "_")]]


@functools.cache
def _environment() -> Environment:
    """The report's templates, loaded and compiled once per process: compiling them took a quarter
    of a second a render (jinja keeps compiled templates in their environment, and checks each
    file is unchanged before reusing it)."""
    environment = Environment(loader=PackageLoader("privaudit.reports"), autoescape=True, finalize=html_text)
    environment.filters["num"] = _number
    environment.filters["verbatim"] = verbatim
    return environment


def render_report(results_dir: str | Path, output: str | Path | None = None) -> Path:
    """Write the report of `results_dir` to `output` (default: `results_dir/report.html`),
    atomically and never through a link (`privaudit.files.write_inside`): a browser or a second
    render never sees half a page. Lines of the results that
    cannot be read are named at the top of the page."""
    results_dir = Path(results_dir)
    reading = ResultsStore(results_dir).read()
    rows, skipped = reading.rows, reading.summary()
    if not rows:
        raise PrivauditError(f"no results in {results_dir} (expected {reading.path})"
                             + (f"; {skipped}" if skipped else ""))
    training = [row for row in rows if row_type(row) == "training"]
    finished = [row for row in training if not training_failed(row)]
    runs = runs_of(training)
    verdicts = verdict_section(rows, runs)
    images = Images(results_dir)
    sections = {"inversion": inversion_section(rows, images), "coalition": coalition_section(rows, images),
                "membership": membership_section(rows), "audits": audit_section(rows),
                "position": position_section(rows), "active": active_section(rows, runs),
                "released": released_section(rows),
                "privacy_utility": privacy_utility_section(rows)}
    html = _environment().get_template("report.html").render(
        campaign=_campaign(results_dir / CAMPAIGN_FILE),
        results_dir=str(results_dir),
        skipped=skipped,
        verdicts=verdicts,
        glance={"figure": epsilon_overview(verdicts["entries"]) if verdicts["entries"] else None,
                "thumbnails": best_reconstructions(rows, images)},
        contents=_contents(sections),
        summary=_summary(training),
        provenance=_provenance(rows),
        threat_comparisons=threat_comparisons(rows),
        **sections,
        training_figures=[
            training_curves({label: runs for label, runs in runs_of(finished).items() if metric in runs[0]["metrics"]},
                            metric)
            for metric in TRAINING_METRICS if any(metric in r["metrics"] for r in finished)
        ],
        versions=_versions(),
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )
    if output is None:
        return write_inside(results_dir, REPORT_FILE, html.encode("utf-8"), "the report")
    return write_inside(*placed(results_dir, output), html.encode("utf-8"), "the report")
