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
            axis.plot(rounds, [p[metric] for p in row["history"]], color=colour, label=label if k == 0 else None)
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
                axis.plot(*zip(*points), color=colour, linewidth=0.9, alpha=0.75, label=label if k == 0 else None)
        floors = [row["baseline"]["mse"] for row in rows if (row.get("baseline") or {}).get("mse")]
        if floors:
            axis.axhline(statistics.median(floors), color=colour, linestyle=":", linewidth=1)
    axis.set_xlabel("attack iteration")
    axis.set_ylabel("MSE to the original")
    axis.set_yscale("log")
    axis.set_title(f"MSE of the reconstruction over attack iterations: {attack}", fontsize=10)
    axis.grid(alpha=0.3, which="both")
    axis.legend(title="one line per seed; dotted: noise floor", fontsize=7, title_fontsize=7,
                loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(figure)
