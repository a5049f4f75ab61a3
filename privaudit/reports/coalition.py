"""The coalition section of the report: for each coalition attack, which agents the curious
agents expose (the graph coloured by exposure), and for each exposed agent the relative error of
its recovered update and the inversion's scores beside the noise floor, with the leak decision
its row stores (`privaudit.leak`)."""

from __future__ import annotations

from typing import Any

from privaudit.reports.artifacts import Images
from privaudit.reports.inversion import leak_words, row_type


def _entry(row: dict[str, Any], images: Images) -> dict[str, Any]:
    agents = []
    for agent in row.get("agents", []):
        metrics, floor = agent.get("metrics") or {}, agent.get("baseline") or {}
        reconstruction = (agent.get("artifacts") or {}).get("reconstruction")
        agents.append({
            "agent": agent["agent"], "role": agent.get("role", ""),
            "exposure": {"exact": "exact", "fitted": "fitted", "assumed": "under the assumption"}.get(
                agent.get("exposure"), "hidden"),
            "relative_error": agent.get("relative_error"), "psnr": metrics.get("psnr"),
            "floor": floor.get("psnr"), "ssim": metrics.get("ssim"), "status": agent.get("status", ""),
            "leak": leak_words(agent) or "—",
            "image": images.embed(reconstruction, "reconstruction") if reconstruction else None,
        })
    graph = (row.get("artifacts") or {}).get("graph")
    return {
        "title": f"{row.get('defense_label', '?')} · {row.get('label', '?')}, round {row.get('round', '?')}, "
                 f"seed {row.get('seed', '?')}",
        "coalition": ", ".join(str(a) for a in row.get("coalition", [])),
        "window": row.get("window"), "recovers": row.get("recovers", ""), "status": row.get("status", ""),
        "exposed": row.get("exposed", 0), "exact": row.get("exact", 0), "outside": len(agents),
        "fitted": sum(a.get("exposure") == "fitted" for a in row.get("agents", [])),
        "record_fit": _record_fit(row.get("record_fit")),
        "graph": images.embed(graph, "exposure figure") if graph else None, "agents": agents,
    }


def _record_fit(fit: dict[str, Any] | None) -> str:
    """The record fit's outcome in words: its status, and its residual against its tolerance."""
    if not fit:
        return ""
    if "residual" not in fit:
        return fit["status"]
    return (f"{fit['status']}, residual {fit['residual']:.2g} (tolerance {fit['tolerance']:.2g}; the peel alone "
            f"{fit['peel_residual']:.2g}) after {fit['steps']} Gauss–Newton steps, {fit.get('wall_s', 0):.0f} s")


def coalition_section(rows: list[dict[str, Any]], images: Images) -> list[dict[str, Any]]:
    """One entry per coalition row, in the order they finished."""
    return [_entry(row, images) for row in rows if row_type(row) == "coalition"]
