"""Figures for the report, drawn with matplotlib and embedded as base64 PNG data URIs, so the
page is one self-contained file that makes no request."""

from __future__ import annotations

import base64
import io
import math
import statistics
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402


def plain(text: str) -> str:
    """A label from a campaign as matplotlib must receive it to draw it literally: every "$"
    escaped, so that a pair of them does not start mathtext (which would fail to parse, or draw
    something other than the label). The log axes' own tick labels still use mathtext."""
    return str(text).replace("$", r"\$")


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


def training_curves(runs: dict[str, list[dict[str, Any]]], metric: str) -> str:
    """`metric` of the average model against rounds: one colour per run, one line per seed, the
    agents' mean of the same metric dashed beside it."""
    agents_metric, ylabel, log_scale = TRAINING_METRICS[metric]
    figure, axis = plt.subplots(figsize=(7, 3.6))
    for colour, (label, rows) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4, runs.items()):
        for k, row in enumerate(rows):
            rounds = [point["round"] for point in row["history"]]
            axis.plot(rounds, [p[metric] for p in row["history"]], color=colour, label=plain(label) if k == 0 else None)
            axis.plot(rounds, [p[agents_metric] for p in row["history"]], color=colour, linestyle="--", alpha=0.5)
    axis.set_xlabel("round")
    axis.set_ylabel(ylabel)
    if log_scale:
        axis.set_yscale("log")
    else:
        axis.set_ylim(0, 1)
    axis.grid(alpha=0.3)
    axis.legend(title="solid: average model; dashed: mean over agents", fontsize=8, title_fontsize=8)
    return to_data_uri(figure)


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


def membership_auc_epsilon(lines: dict[str, list[tuple[float | None, float, tuple[float, float] | None]]],
                           edge_label: str, title: str) -> str:
    """Membership AUC against the runs' sound ε (log axis), one line per method: each point is
    (ε, AUC, error bar or None). Runs without a finite sound ε (ε None) sit at the right edge,
    past a dotted break, under `edge_label`. Methods are nudged sideways so their error bars do
    not hide each other; the ticks are the runs' own ε values."""
    finite = sorted({eps for points in lines.values() for eps, _, _ in points if eps is not None})
    edge = finite[-1] * 4 if finite else 1.0
    figure, axis = plt.subplots(figsize=(6, 3.8))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (colour, (method, points)) in enumerate(zip(palette * 4, lines.items())):
        nudge = 1.06 ** (k - (len(lines) - 1) / 2)
        placed = sorted((((edge if eps is None else eps) * nudge, auc, bar) for eps, auc, bar in points),
                        key=lambda point: point[0])
        x = [p[0] for p in placed]
        y = [p[1] for p in placed]
        below = [auc - bar[0] if bar else 0.0 for _, auc, bar in placed]
        above = [bar[1] - auc if bar else 0.0 for _, auc, bar in placed]
        axis.errorbar(x, y, yerr=[below, above], color=colour, marker="o", markersize=4, capsize=3,
                      linewidth=1.2, label=plain(method))
    axis.axhline(0.5, color="grey", linestyle="--", linewidth=0.9, label="chance")
    axis.set_xscale("log")
    ticks = finite + ([edge] if any(eps is None for points in lines.values() for eps, _, _ in points) else [])
    if finite and ticks[-1] == edge:
        axis.axvline(math.sqrt(finite[-1] * edge), color="grey", linestyle=":", linewidth=0.8)
    axis.set_xticks(ticks, [f"{eps:.3g}" for eps in finite] + ([plain(edge_label)] if ticks[-1:] == [edge] else []))
    axis.xaxis.set_minor_locator(NullLocator())
    axis.set_xlim(ticks[0] / 1.6, ticks[-1] * 1.6)
    axis.set_xlabel("sound ε of the run (log scale)")
    axis.set_ylabel("membership AUC")
    axis.set_title(plain(title), fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(figure)


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
