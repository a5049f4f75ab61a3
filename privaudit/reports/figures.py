"""Figures for the report, drawn with matplotlib and embedded as base64 PNG data URIs, so the
page is one self-contained file that makes no request."""

from __future__ import annotations

import base64
import functools
import io
import math
import statistics
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, NullLocator  # noqa: E402

from privaudit.errors import printable  # noqa: E402
from privaudit.reports.notation import unicode_text  # noqa: E402

matplotlib.rcParams["axes.formatter.min_exponent"] = 3
"""Log axes label 1, 4.42 and 0.01 as plain numbers, not 10⁰, 4.42×10⁰ or 10⁻²; beyond three
decades they keep powers of ten."""


DRAWN = 120
"""Characters of one text a figure draws (a title, a legend entry); a longer one is cut with an ellipsis.
A label from a results row may be of any length, and matplotlib lays out and rasterises every
character (a 300,000-character legend entry took minutes and gigabytes); the page beside the figure
shows the text whole."""


def plain(text: Any, width: int = DRAWN) -> str:
    """A text from a campaign or a row as matplotlib must receive it to draw it literally: every
    character a terminal or a page would not show as itself written as its escape (`printable`: a
    bidi override is drawn as `\\u202e`, not obeyed, and never printed raw in a missing-glyph
    warning), cut to `width` characters with an ellipsis, its indices in Unicode (`y_{i,1}` →
    `yᵢ,₁`, `privaudit.reports.notation`), every "$" escaped, so that a pair of them does not start mathtext
    (which would fail to parse, or draw something other than the label). The log axes' own tick
    labels still use mathtext."""
    return unicode_text(_cut(printable(str(text)), width)).replace("$", r"\$")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


_DRAWN_FIGURES: OrderedDict[tuple, str] = OrderedDict()
"""The last figures drawn in this process, by what they were drawn from (`kept`), most recent last."""

_KEPT_FIGURES = 64
"""Figures `_DRAWN_FIGURES` keeps: a report's figures, a few times over (a PNG is tens of kilobytes)."""


def _content(value: Any) -> Any:
    """A hashable value equal for two arguments of a figure exactly when they hold the same data in
    the same order: dicts, lists and tuples as tuples of their items, every leaf with its type (a
    float by its bits: -0.0 is not 0.0); None for anything else (such a figure is drawn every time)."""
    if isinstance(value, dict):
        items = tuple((_content(key), _content(item)) for key, item in value.items())
        return None if any(None in item for item in items) else (dict, items)
    if isinstance(value, (list, tuple)):
        items = tuple(_content(item) for item in value)
        return None if None in items else (type(value), items)
    if isinstance(value, float):
        return (type(value), value.hex())
    if value is None or isinstance(value, (str, int)):
        return (type(value), value)
    return None


def kept(draw: Callable[..., str]) -> Callable[..., str]:
    """`draw`, drawn once per content of its arguments in a process: a report rendered again from the
    same rows (a resumed run, `run` then `report` in one Python session) gets the same PNG without
    matplotlib, which takes most of a render (about 0.3 s a figure). The drawing depends on nothing
    else: matplotlib's settings are the ones this module sets once."""

    @functools.wraps(draw)
    def drawing(*args: Any, **kwargs: Any) -> str:
        key = _content((draw.__name__, args, kwargs))
        if key is None:
            return draw(*args, **kwargs)
        if key not in _DRAWN_FIGURES:
            _DRAWN_FIGURES[key] = draw(*args, **kwargs)
            while len(_DRAWN_FIGURES) > _KEPT_FIGURES:
                _DRAWN_FIGURES.popitem(last=False)
        _DRAWN_FIGURES.move_to_end(key)
        return _DRAWN_FIGURES[key]

    return drawing


def to_data_uri(figure: plt.Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


# What each training figure shows: the metric of the average model (solid) and of the agents
# (dashed), its axis label, and whether it reads better on a log scale.
TRAINING_METRICS = {
    "avg_acc": ("agent_acc_mean", "test accuracy", False),
    "avg_error": ("agent_error_mean", "distance to the solution", True),
}


@kept
def training_curves(runs: dict[str, list[dict[str, Any]]], metric: str) -> str:
    """`metric` of the average model against rounds: one colour per run, one line per seed, the
    agents' mean of the same metric dashed beside it."""
    agents_metric, ylabel, log_scale = TRAINING_METRICS[metric]
    figure, axis = plt.subplots(figsize=(7, 3.6))
    for colour, (label, rows) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4, runs.items()):
        for k, row in enumerate(rows):
            for key, style in ((metric, {"label": plain(label) if k == 0 else None}),
                               (agents_metric, {"linestyle": "--", "alpha": 0.5})):
                points = [(p["round"], p[key]) for p in row["history"] if isinstance(p.get(key), (int, float))]
                axis.plot([r for r, _ in points], [v for _, v in points], color=colour, **style)
    axis.set_xlabel("round")
    axis.set_ylabel(ylabel)
    if log_scale:
        axis.set_yscale("log")
    else:
        axis.set_ylim(0, 1)
    axis.grid(alpha=0.3)
    axis.legend(title="solid: average model; dashed: mean over agents", fontsize=8, title_fontsize=8)
    return to_data_uri(figure)


@kept
def inversion_traces(curves: dict[str, list[dict[str, Any]]], attack: str) -> str:
    """The reconstruction's MSE against the attack's iterations, as Wang & Başar compare D-PSGD
    with their quantized algorithm (seed 004, Fig. 5): one colour per curve (a defense run and
    attacked round), one thin line per seed, the median noise floor of the same attempts (an
    unrelated image's MSE) dotted in the same colour, log scale."""
    figure, axis = plt.subplots(figsize=(7, 3.6))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if len(curves) > len(palette):
        palette = [plt.get_cmap("tab20")(k % 20) for k in range(len(curves))]
    for colour, (label, rows) in zip(palette, curves.items()):
        for k, row in enumerate(rows):
            points = [(p["iteration"], p["mse"]) for p in row["trace"]
                      if p.get("mse") is not None and math.isfinite(p["mse"]) and p["mse"] > 0]
            if points:
                axis.plot(*zip(*points), color=colour, linewidth=0.9, alpha=0.75,
                          label=plain(label) if k == 0 else None)
        floors = [row["baseline"]["mse"] for row in rows if (row.get("baseline") or {}).get("mse")]
        if floors:
            axis.axhline(statistics.median(floors), color=colour, linestyle=":", linewidth=1)
    axis.set_xlabel("attack iteration")
    axis.set_ylabel("MSE to the original")
    axis.set_yscale("log")
    axis.set_title(plain(f"MSE of the reconstruction over attack iterations: {attack}"), fontsize=10)
    axis.grid(alpha=0.3, which="both")
    axis.legend(title="one line per seed; dotted: noise floor", fontsize=7, title_fontsize=7,
                loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(figure)


@kept
def membership_roc(curves: dict[str, list[dict[str, list[float]]]], non_members: int, members: int,
                   title: str) -> str:
    """Membership ROC curves on log-log axes, as Carlini et al. (2022, Fig. 1 onwards) plot them so
    that the low-FPR regime is visible: one colour per method (`curves` maps its legend label to
    the stored ROC of each seed), one thin step line per seed, the diagonal for chance.

    The stored ROC is drawn as a step function held until the next stored point, the same
    conservative reading as the TPR at FPR in the table. The x axis starts at 1/non_members, the
    smallest false-positive rate a threshold can have; points at zero lie off the axes."""
    low_x = 1.0 / max(non_members, 1)
    low_y = min(low_x, 1.0 / max(members, 1))
    figure, axis = plt.subplots(figsize=(4.6, 4.2))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for colour, (label, rocs) in zip(palette * 4, curves.items()):
        for k, roc in enumerate(rocs):
            fpr = [value if value > 0 else low_x / 2 for value in roc["fpr"]]
            tpr = [value if value > 0 else low_y / 2 for value in roc["tpr"]]
            axis.plot(fpr, tpr, drawstyle="steps-post", color=colour, linewidth=1.0 if len(rocs) > 1 else 1.5,
                      alpha=0.8, label=plain(label) if k == 0 else None)
    axis.plot([low_x, 1.0], [low_x, 1.0], color="grey", linestyle="--", linewidth=0.9, label="chance")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlim(low_x, 1.0)
    axis.set_ylim(low_y, 1.05)
    axis.set_xlabel("false-positive rate")
    axis.set_ylabel("true-positive rate")
    axis.set_title(plain(title), fontsize=9)
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7, loc="lower right")
    return to_data_uri(figure)


def _tick(x: float) -> str:
    """A tick label, short: 0.01, 29.9, 2.99e3, 1e-5."""
    text = f"{x:.3g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


AXIS_RANGE = (1e-100, 1e100)
"""The values a log axis draws where they are; a value beyond (a claimed ε of 9e307 is finite)
sits at the axis's edge, labelled, since the axis's own arithmetic (twice the largest value, its
logarithm) would overflow."""


def on_axis(x: float | None) -> float | None:
    """`x` where a log axis can place it (`AXIS_RANGE`), else None (the edge)."""
    return x if x is not None and AXIS_RANGE[0] < x < AXIS_RANGE[1] else None


Point = tuple[float | None, float, tuple[float, float] | None]
"""A point of a line against a log axis: (x, or None for a run without one; y; error bar or None)."""


def points_on_log_axis(axis: plt.Axes, lines: dict[str, list[Point]], edge_label: str, edge: str = "right",
                       styles: dict[str, dict[str, Any]] | None = None) -> None:
    """Draw `lines` (legend label → points) on `axis` with a log x axis. Points without an x (a run
    without a finite ε, or without noise) sit at the `edge` ("right" or "left"), past a dotted
    break, under `edge_label`. Lines are nudged sideways so their error bars do not hide each
    other; the ticks are the points' own x values, labelled where a label has room (a seventh of
    the axis from the one before). `styles` gives a line's matplotlib keywords over the default
    (the next colour, solid, filled markers)."""
    lines = {label: [(on_axis(x), y, bar) for x, y, bar in points] for label, points in lines.items()}
    finite = sorted({x for points in lines.values() for x, _, _ in points if x is not None})
    missing = any(x is None for points in lines.values() for x, _, _ in points)
    decades = math.log10(finite[-1] / finite[0]) if finite else 0.0
    gap = 10 ** max(0.6, decades / 5)
    edge_x = (finite[-1] * gap if edge == "right" else finite[0] / gap) if finite else 1.0
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (colour, (label, points)) in enumerate(zip(palette * 4, lines.items())):
        nudge = 1.06 ** (k - (len(lines) - 1) / 2)
        placed = sorted((((edge_x if x is None else x) * nudge, y, bar) for x, y, bar in points),
                        key=lambda point: point[0])
        below = [max(0.0, y - bar[0]) if bar else 0.0 for _, y, bar in placed]  # an interval not around its
        above = [max(0.0, bar[1] - y) if bar else 0.0 for _, y, bar in placed]  # value (a hand edit) draws no bar
        style = {"color": colour, "marker": "o", "markersize": 4, "capsize": 3, "linewidth": 1.2,
                 "label": plain(label)}
        axis.errorbar([p[0] for p in placed], [p[1] for p in placed], yerr=[below, above],
                      **(style | (styles or {}).get(label, {})))
    axis.set_xscale("log")
    ticks = sorted(set(finite) | ({edge_x} if missing else set()))
    room = math.log10(ticks[-1] / ticks[0]) / 7
    order = ticks[::-1] if edge == "right" else ticks
    labels: dict[float, str] = {}
    for x in order[:1] + order[-1:] + order[1:-1]:  # both ends first, then the others where they fit
        if x == edge_x and missing:
            labels[x] = plain(edge_label)
        elif all(abs(math.log10(x / other)) >= room for other in labels):
            labels[x] = _tick(x)
    if missing and finite:
        axis.axvline(math.sqrt((finite[-1] if edge == "right" else finite[0]) * edge_x), color="grey",
                     linestyle=":", linewidth=0.8)
    axis.set_xticks(ticks, [labels.get(x, "") for x in ticks])
    axis.xaxis.set_minor_locator(NullLocator())
    axis.set_xlim(ticks[0] / 1.6, ticks[-1] * 1.6)


@kept
def membership_auc_epsilon(lines: dict[str, list[Point]], edge_label: str, title: str) -> str:
    """Membership AUC against the runs' sound ε (log axis), one line per method: each point is
    (ε, AUC, error bar or None); runs without a finite sound ε at the right edge under
    `edge_label` (`points_on_log_axis`)."""
    figure, axis = plt.subplots(figsize=(6, 3.8))
    points_on_log_axis(axis, lines, edge_label)
    axis.axhline(0.5, color="grey", linestyle="--", linewidth=0.9, label="chance")
    axis.set_xlabel("sound ε of the run (log scale)")
    axis.set_ylabel("membership AUC")
    axis.set_title(plain(title), fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(figure)


@kept
def audit_curve(points: list[tuple[float, float]], references: dict[str, float], ylabel: str, title: str) -> str:
    """An audit's lower bound against the samples it drew (log x), as auditing papers show a
    bound tightening with more observations: the bound as points joined by a line, and a
    horizontal line at each reference value it is to be compared with (`references` maps its
    legend label — "exact for the pair", "sound", "claimed" — to the value)."""
    figure, axis = plt.subplots(figsize=(5.6, 3.4))
    samples, bounds = zip(*sorted(points))
    axis.plot(samples, bounds, marker="o", markersize=4, color="#1f6feb", label="lower bound")
    styles = {"exact for the pair": ("black", "--"), "sound": ("#2da44e", ":"), "claimed": ("#cf222e", "-.")}
    for label, value in references.items():
        colour, line = styles.get(label, ("grey", "--"))
        axis.axhline(value, color=colour, linestyle=line, linewidth=1.1, label=f"{label}: {value:.3g}")
    axis.set_xscale("log")
    axis.set_xlabel("samples (log scale)")
    axis.set_ylabel(ylabel)
    axis.set_title(plain(title), fontsize=9)
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(figure)


VERDICT_COLOURS = {
    "refuted": "#cf222e", "no privacy": "#cf222e", "failed": "#cf222e", "understated": "#bc4c00",
    "conditionally refuted": "#e16f24", "outside range": "#6639ba", "consistent": "#1a7f37", "inconclusive": "#6e7781", "not evaluable": "#6e7781", "not audited": "#6e7781",
}
"""Each verdict's colour, the same as its badge on the page (`privaudit/reports/templates/report.html`)."""

FINDING_COLOUR = "#8250df"
"""The colour of an analytic finding (premise violated, outside the theorem's range, ...)."""

_MARKERS = (  # key in a verdict's values, legend label, marker, colour, filled, lane
    ("claimed", "claimed ε (the paper's formula, recomputed)", "D", "#1d232a", True, -0.15),
    ("stated", "stated ε (the paper's printed number)", "D", "#1d232a", False, -0.15),
    ("sound", "sound ε (a standard accountant)", "s", "#0969da", True, 0.0),
    ("eps_lb", "empirical ε lower bound (rigorous, at its confidence)", "o", "#cf222e", True, 0.15),
    ("estimate", "ε estimate (not a bound)", "o", "#cf222e", False, 0.15),
)
"""Each value the overview places: the claim's two numbers share the upper lane of a verdict's row,
the sound ε the middle, the audit's bound and estimate the lower one, so values that coincide stay
visible; a hollow marker is drawn larger, around a filled one at the same value."""


def _math_ratio(text: str) -> str:
    """A verdict's deciding number (`privaudit.reports.verdicts.ratio_text`) as the figure draws it: its
    "ε_LB" and "δ_LB" with a subscript, nothing else read as mathtext."""
    escaped = text.replace("$", r"\$")
    return escaped.replace("ε_LB", r"$\varepsilon_{\mathrm{LB}}$").replace("δ_LB", r"$\delta_{\mathrm{LB}}$")


@kept
def epsilon_overview(entries: list[dict[str, Any]]) -> str:
    """The report's first figure: per verdict (one row each), the claimed, stated and sound ε, the
    empirical lower bound and the estimate on one log axis, the verdict written at the right in its
    colour (an analytic finding in its own). A value of 0 sits at the left edge as "0", an infinite
    one at the right edge as "∞", one beyond `AXIS_RANGE` at its edge with its value; a row whose
    audit bounds δ, not ε, says so."""
    values = [v for entry in entries for key, *_ in _MARKERS
              if isinstance(v := entry["values"].get(key), float) and on_axis(v) is not None]
    low = 10 ** math.floor(math.log10(min(values) / 2)) if values else 0.01
    high = 10 ** math.ceil(math.log10(max(values) * 2)) if values else 100.0
    rows = len(entries)
    figure, axis = plt.subplots(figsize=(9.2, 0.34 * rows + 1.25))
    axis.set_xscale("log")
    axis.set_xlim(low, high)
    axis.set_ylim(rows - 0.5, -0.5)
    for y, entry in enumerate(entries):
        if y % 2 == 0:
            axis.axhspan(y - 0.5, y + 0.5, color="#f3f5f7", zorder=0)
        for key, _, marker, colour, filled, lane in _MARKERS:
            value = entry["values"].get(key)
            if not isinstance(value, float):
                continue
            x = min(max(value, low), high)
            axis.plot([x], [y + lane], marker=marker, markersize=6.5 if filled else 9.5, linestyle="none",
                      zorder=4 if filled else 3, markerfacecolor=colour if filled else "none",
                      markeredgecolor=colour, markeredgewidth=1.3, clip_on=False)
            if value <= low or value >= high:
                text = "ε = 0" if value <= 0 else "∞" if value == math.inf else _tick(value)
                axis.annotate(text, (x, y + lane), xytext=(7, 0), textcoords="offset points",
                              ha="left" if value <= low else "right", va="center", fontsize=7.5, color=colour)
        if entry["values"].get("of_delta"):
            axis.annotate("audit bounds δ, not ε", (low, y + 0.15), xytext=(10, 0), textcoords="offset points", va="center",
                          fontsize=7, color="#5b6570")
        findings = ", ".join(f["kind"] for f in entry["findings"])
        colour = VERDICT_COLOURS.get(entry["status"], "#6e7781")
        status = axis.annotate(plain(entry["status"]), (1.01, y - (0.17 if findings else 0)),
                               xycoords=("axes fraction", "data"), va="center", fontsize=9, fontweight="bold",
                               annotation_clip=False, color=colour)
        if entry.get("ratio"):
            axis.annotate(_math_ratio(entry["ratio"]), (1, 0.5), xycoords=status, xytext=(5, 0),
                          textcoords="offset points", va="center", fontsize=8.5, annotation_clip=False, color=colour)
        if findings:
            axis.annotate(plain(findings), (1.01, y + 0.2), xycoords=("axes fraction", "data"), va="center", fontsize=7,
                          annotation_clip=False, color=FINDING_COLOUR)
    axis.set_yticks(range(rows))
    axis.set_yticklabels([plain(entry["subject"], 44) for entry in entries], fontsize=9)
    axis.tick_params(axis="y", length=0)
    axis.set_xlabel("ε (log scale)")
    axis.grid(axis="x", alpha=0.3, which="major")
    handles = [plt.Line2D([], [], marker=marker, linestyle="none", markersize=6.5 if filled else 8, label=label,
                          markerfacecolor=colour if filled else "none", markeredgecolor=colour, markeredgewidth=1.3)
               for _, label, marker, colour, filled, _ in _MARKERS]
    axis.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=8.5, frameon=False)
    return to_data_uri(figure)


def _extent(values: list[float]) -> float:
    """The range of `values`, 1 when they have none, so a fraction of it is a usable distance."""
    return (max(values) - min(values) if values else 0.0) or 1.0


@kept
def privacy_utility(families: list[dict[str, Any]], parameter: str, noise_edge: str, epsilon: str,
                    epsilon_edge: str, title: str) -> str:
    """One noise sweep of a defense: rows of panels, one per family of measures — the utility
    first, then each kind of attack success (inversion PSNR above the floor, membership AUC,
    ε lower bounds) — against the noise parameter (runs without noise at the `noise_edge`,
    "left" or "right"), against ε (`epsilon` names it; runs without one at the right edge under
    `epsilon_edge`), and, for each attack family, the utility against that success, every point
    a noise level labelled with it.

    A family is {"ylabel", "reference": (value, label) or None, "lines": {label: [point]}}; a
    point is {"param": x or None, "eps": ε or None, "claimed": claimed ε or None (drawn dashed
    and hollow beside the sound ε when `epsilon` is the sound one), "y", "bar": (low, high) or
    None, "utility": the run's utility or None, "tag": the noise level in words}."""
    rows = len(families)
    columns = 3 if rows > 1 else 2
    figure, axes = plt.subplots(rows, columns, figsize=(4.3 * columns, 2.7 * rows + 0.5), squeeze=False)
    for r, family in enumerate(families):
        lines = family["lines"]
        points_on_log_axis(axes[r][0], {label: [(p["param"], p["y"], p["bar"]) for p in points]
                                        for label, points in lines.items()}, "no noise", edge=noise_edge)
        against_eps = {label: [(p["eps"], p["y"], p["bar"]) for p in points] for label, points in lines.items()}
        styles: dict[str, dict[str, Any]] = {}
        palette = plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4
        for colour, (label, points) in zip(palette, list(lines.items())):
            claimed = [(p["claimed"], p["y"], p["bar"]) for p in points if p.get("claimed") is not None]
            if claimed and any(p["eps"] != p.get("claimed") for p in points):
                against_eps[f"{label} · claimed"] = claimed
                styles[f"{label} · claimed"] = {"color": colour, "linestyle": "--", "markerfacecolor": "white",
                                                "label": "_claimed"}
        points_on_log_axis(axes[r][1], against_eps, epsilon_edge, styles=styles)
        for axis in axes[r][:2]:
            axis.set_ylabel(plain(family["ylabel"]), fontsize=8)
            if family.get("reference"):
                value, label = family["reference"]
                axis.axhline(value, color="grey", linestyle="--", linewidth=0.9, label=label)
            axis.grid(alpha=0.3)
            axis.tick_params(labelsize=7)
        axes[r][0].set_xlabel(plain(f"{parameter} (log scale)"), fontsize=8)
        axes[r][1].set_xlabel(plain(f"{epsilon} (log scale)"), fontsize=8)
        if r == 0:
            continue
        axis = axes[r][2]
        drawn = {label: [p for p in points if p.get("utility") is not None] for label, points in lines.items()}
        everything = [p for points in drawn.values() for p in points]
        width, height = _extent([p["y"] for p in everything]), _extent([p["utility"] for p in everything])
        tagged: list[dict[str, Any]] = []
        for colour, (label, points) in zip(palette, drawn.items()):
            axis.plot([p["y"] for p in points], [p["utility"] for p in points], color=colour, marker="o",
                      markersize=4, linewidth=1, label=plain(label))
            for p in points:
                if all(abs(p["y"] - q["y"]) > 0.2 * width or abs(p["utility"] - q["utility"]) > 0.07 * height
                       for q in tagged):
                    tagged.append(p)
                    axis.annotate(plain(p["tag"]), (p["y"], p["utility"]), xytext=(3, 3), textcoords="offset points",
                                  fontsize=6, color="#3b434b")
        if family.get("reference"):
            value, label = family["reference"]
            axis.axvline(value, color="grey", linestyle="--", linewidth=0.9, label=label)
        axis.set_xlabel(plain(family["ylabel"]), fontsize=8)
        axis.set_ylabel(plain(families[0]["ylabel"]), fontsize=8)
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=7)
        axis.legend(fontsize=7)
    if columns == 3:
        axes[0][2].axis("off")
        axes[0][2].text(0, 0.5, "Below: utility against attack success,\none point per noise level.\n"
                        "Up and to the left: the run learns\nand the attack gets little.",
                        fontsize=8, va="center", transform=axes[0][2].transAxes)
    axes[0][0].set_title("against the noise parameter", fontsize=9)
    axes[0][1].set_title(plain(f"against {epsilon}"), fontsize=9)
    figure.suptitle(plain(title), fontsize=10)
    figure.tight_layout()
    return to_data_uri(figure)


_DISTANCE_TICKS = 20
"""A position figure marks each distance up to this many; beyond, matplotlib's whole-number ticks."""

Series = tuple[str, str, bool, int, int]
"""How a kind of point is drawn: marker, colour, hollow, size, z-order."""


RELEASED = ("^", "#8250df", False, 6, 5)
"""How a released-model bound is drawn (a filled purple triangle, above the transcript's)."""
RELEASED_LABEL = "released model (last iterate): ε lower bound (rigorous)"
_RELEASED_OFFSET = 0.12
"""How far right of its pair's transcript bound a released-model bound sits (a 0 of both stays visible)."""


def _released_eps(pair: dict[str, Any]) -> Any:
    """A pair's released-model ε lower bound (`released`, rows since issue 38), or None."""
    released = pair.get("released")
    return released.get("eps_lb") if isinstance(released, dict) else None


def _position_series(pairs: list[dict[str, Any]], bounds_only: bool = False
                     ) -> dict[Series, tuple[list[float], list[float]]]:
    """Every point of `position_distance`, grouped by how it is drawn: a pair's ε lower bound
    (filled; a coalition's a square), its released model's where the row has one (`RELEASED`, 0.12
    to the right), its
    estimate (hollow), the pairwise claim and the exact linear-Gaussian loss where finite (not with
    `bounds_only`); x is the distance, offset 0.06 per earlier pair at that distance, less where
    more than 8 share it. A bound or estimate that is not a number is left out (the table shows
    it)."""
    counts: dict[int, int] = {}
    for pair in pairs:
        counts[pair["distance"]] = counts.get(pair["distance"], 0) + 1
    seen: dict[int, int] = {}
    series: dict[Series, tuple[list[float], list[float]]] = {}

    def add(kind: Series, x: float, y: Any) -> None:
        if isinstance(y, (int, float)) and not math.isnan(y):
            xs, ys = series.setdefault(kind, ([], []))
            xs.append(x)
            ys.append(float(y))

    for pair in pairs:
        distance = pair["distance"]
        x = distance + min(0.06, 0.5 / counts[distance]) * seen.get(distance, 0)
        seen[distance] = seen.get(distance, 0) + 1
        shape = "o" if len(pair["attacker"]) == 1 else "s"
        add((shape, "#cf222e", False, 6, 4), x, pair["eps_lb"])
        add(RELEASED, x + _RELEASED_OFFSET, _released_eps(pair))
        if bounds_only:
            continue
        if pair.get("eps_estimate") is not None:
            add((shape, "#cf222e", True, 8, 3), x, pair["eps_estimate"])
        for key, marker, colour in (("eps_pair_claimed", "D", "#1d232a"), ("eps_pair_linear", "s", "#0969da")):
            value = pair.get(key)
            if isinstance(value, float) and math.isfinite(value):
                add((marker, colour, True, 7, 2), x, value)
    return series


def _log_extent(values: list[float]) -> tuple[float, float]:
    """The ε axis of a position figure: (the floor, where a 0 is drawn, a decade below the
    smallest positive value drawable on a log axis (`AXIS_RANGE`); the top, a little above the
    largest). 0.01 to 10 when nothing positive is drawn."""
    drawable = [value for value in values if on_axis(value) is not None]
    if not drawable:
        return 0.01, 10.0
    floor = 10 ** (math.floor(math.log10(min(drawable))) - 1)
    return floor, max(drawable) * 2


@kept
def position_distance(pairs: list[dict[str, Any]], sound: float | None, claimed: float | None, title: str,
                      bounds_only: bool = False) -> str:
    """A position audit's pairs against the graph distance between attacker and victim: each
    attacker's ε lower bound from what it receives (filled; a coalition's as a square), its own
    released model's where the row has one (a purple triangle: the last iterate, nothing of the
    transcript) and its ε estimate (hollow, not a bound), the pairwise network accountant's figures
    where it gives them (the pair's claim, e.g. Muffliato's, and the exact loss of its
    linear-Gaussian view), and the defense's own claimed and sound ε, which hold for every
    attacker, as horizontal lines; `bounds_only`: the two bounds and the lines alone. A log ε axis, so that bounds of
    0.5–5 are not flattened under claims of 80 (issue 38); a 0 (a bound that found nothing, an
    unreached attacker) is drawn on the floor, a decade below the smallest positive value, marked
    "0" and set apart by a dotted line (`_log_extent`); a value past the axis's range at its top edge.
    Pairs at one distance sit side by side, within half a hop however many they are; each kind of
    point is one series (`_position_series`), so the work is a few artists whatever the pairs."""
    figure, axis = plt.subplots(figsize=(6.4, 3.6))
    series = _position_series(pairs, bounds_only)
    lines = [(value, colour, style, label) for value, colour, style, label in
             ((claimed, "#1d232a", "-.", "claimed ε of the defense"), (sound, "#0969da", "--", "sound ε of the defense"))
             if isinstance(value, float) and math.isfinite(value) and value > 0]
    floor, top = _log_extent([y for _, ys in series.values() for y in ys] + [line[0] for line in lines])
    for (marker, colour, hollow, size, order), (xs, ys) in series.items():
        placed = [floor if y <= 0 else min(y, top) for y in ys]
        axis.plot(xs, placed, marker=marker, color=colour, markerfacecolor="none" if hollow else colour,
                  linestyle="none", markersize=size, zorder=order, clip_on=False)
    for value, colour, style, label in lines:
        axis.axhline(min(value, top), color=colour, linestyle=style, linewidth=1, label=f"{label}: {_tick(value)}")
    released = RELEASED in series
    handles = [plt.Line2D([], [], marker="o", color="#cf222e", linestyle="none",
                          label=("transcript (what it receives): " if released else "") + "ε lower bound (rigorous)")]
    if released:
        handles.append(plt.Line2D([], [], marker=RELEASED[0], color=RELEASED[1], linestyle="none",
                                  label=RELEASED_LABEL))
    if not bounds_only:
        handles += [plt.Line2D([], [], marker="o", color="#cf222e", markerfacecolor="none", linestyle="none",
                               label="ε estimate (not a bound)"),
                    plt.Line2D([], [], marker="D", color="#1d232a", markerfacecolor="none", linestyle="none",
                               label="pairwise claim (network accountant)"),
                    plt.Line2D([], [], marker="s", color="#0969da", markerfacecolor="none", linestyle="none",
                               label="exact loss of the pair's linear-Gaussian view")]
    if any(len(pair["attacker"]) > 1 for pair in pairs):
        handles.append(plt.Line2D([], [], marker="s", color="#cf222e", linestyle="none", label="a coalition's bound"))
    handles += [line for line in axis.get_lines() if not line.get_label().startswith("_")]
    distances = sorted({pair["distance"] for pair in pairs})
    if len(distances) <= _DISTANCE_TICKS:
        axis.set_xticks(distances)
    else:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_yscale("log")
    axis.set_ylim(floor, top)
    axis.axhline(floor * math.sqrt(10), color="grey", linestyle=":", linewidth=0.8)
    axis.yaxis.set_major_formatter(FuncFormatter(lambda y, _: "0" if math.isclose(y, floor) else _tick(y)))
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.set_xlabel("graph distance from the victim (hops)")
    axis.set_ylabel("ε (log scale; 0 on the floor)")
    axis.set_title(plain(title), fontsize=9)
    axis.grid(alpha=0.3, which="both")
    axis.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(figure)


@kept
def position_graph(agents: int, edges: list[tuple[int, int]], victim: int, learned: dict[int, float],
                   title: str, scale_label: str = "ε lower bound about the victim") -> str:
    """The graph a position audit ran on, each agent coloured by an ε lower bound (`learned`: what
    it forces about the victim, or what a chosen attacker forces about it), the agent the figure is
    about (`victim`) drawn apart in black, an agent without a value in grey."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(agents))
    graph.add_edges_from(edges)
    layout = nx.kamada_kawai_layout(graph) if agents > 1 else {0: (0.0, 0.0)}
    top = max([value for value in learned.values() if math.isfinite(value)] + [1e-9])
    colour_map = plt.get_cmap("Reds")
    colours = ["#1d232a" if node == victim else
               colour_map(0.15 + 0.85 * learned[node] / top) if node in learned else "#d0d7de"
               for node in graph.nodes]
    figure, axis = plt.subplots(figsize=(4.6, 3.6))
    nx.draw_networkx_edges(graph, layout, ax=axis, edge_color="#8c959f")
    nx.draw_networkx_nodes(graph, layout, ax=axis, node_color=colours, node_size=300, edgecolors="#57606a")
    dark = {node for node in graph.nodes if node == victim or learned.get(node, 0.0) > 0.55 * top}
    for nodes, colour in ((dark, "#ffffff"), (set(graph.nodes) - dark, "#1d232a")):
        nx.draw_networkx_labels(graph, layout, {node: str(node) for node in nodes}, ax=axis, font_size=8,
                                font_color=colour)
    scale = plt.cm.ScalarMappable(cmap=colour_map, norm=plt.Normalize(0, top))
    figure.colorbar(scale, ax=axis, fraction=0.046, pad=0.02, label=scale_label)
    axis.set_title(plain(title), fontsize=9)
    axis.axis("off")
    return to_data_uri(figure)
