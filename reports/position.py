"""The report's "Privacy by position" section, from position-audit rows alone
(`attacks.audit.position`, `privaudit.campaign.audit_findings.position_finding`): per audited run, what
each curious agent (or coalition) forces about the victim against its graph distance, beside the
pairwise network accountant's figures and the defense's own claimed and sound ε; the graph with
each agent coloured by what it learns; and a table of the pairs with each pair's verdict.

The verdict of the run itself (the strongest pair against the defense's claim) is in the verdicts
at the top, by the same rule as every audit; a pair's verdict tests the pairwise claim where the
network accountant states one. Nothing is recomputed.
"""

from __future__ import annotations

from typing import Any

from reports.audits import audit_failed, number
from reports.figures import position_distance, position_graph
from reports.inversion import row_type


def _who(pair: dict[str, Any]) -> str:
    agents = pair["attacker"]
    return f"agent {agents[0]}" if len(agents) == 1 else f"coalition {', '.join(map(str, agents))}"


_FIGURE_NAMES = {"claimed": "pairwise claim", "linear": "exact linear-Gaussian loss", "central": "central bound"}


def _sound_pair(pair: dict[str, Any], sound: Any) -> str:
    """The sound per-pair ε: the defense's sound ε (it holds for every attacker), or the pair's exact
    linear-Gaussian loss where that is smaller (a bound only under its own assumption, which the
    cell names)."""
    linear = pair.get("eps_pair_linear")
    if isinstance(linear, float) and (not isinstance(sound, (int, float)) or linear < sound):
        return f"{number(linear)} (linear-Gaussian, non-adaptive)"
    return f"{number(sound)} (the defense's)"


def _pair(pair: dict[str, Any], sound: Any) -> dict[str, Any]:
    figures = pair.get("pairwise") or {}
    verdict = pair.get("verdict") or {}
    return {"attacker": _who(pair), "distance": pair["distance"], "eps_lb": number(pair["eps_lb"]),
            "estimate": number(pair.get("eps_estimate")), "claimed": number(pair.get("eps_pair_claimed")),
            "linear": number(pair.get("eps_pair_linear")),
            "central": number(((figures.get("central") or {}).get("epsilon"))),
            "sound": _sound_pair(pair, sound),
            "verdict": verdict.get("status") or ("not reached" if pair.get("unreached") else "no pairwise claim"),
            "note": pair.get("unreached") or verdict.get("reason") or figures.get("reason") or ""}


def _methods(pairs: list[dict[str, Any]]) -> list[str]:
    """The pairwise figures' methods, each once, named as the table names them."""
    seen: dict[str, None] = {}
    for pair in pairs:
        for name, title in _FIGURE_NAMES.items():
            figure = (pair.get("pairwise") or {}).get(name)
            if figure and figure.get("method"):
                method = figure["method"].removeprefix("claim: ").removeprefix("central bound: ")
                seen[f"{title}: {method}"] = None
    return list(seen)


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    pairs = sorted(row["pairs"], key=lambda pair: (pair["distance"], pair["attacker"]))
    detail = row.get("detail") or {}
    victim = detail.get("victim", "?")
    title = (f"{row.get('defense_label', '?')} · {row.get('label', '?')}: {detail.get('topology', '?')} of "
             f"{detail.get('agents', '?')}, victim {victim}, seed {row.get('seed', '?')}")
    graph = row.get("graph") or {}
    learned = {pair["attacker"][0]: float(pair["eps_lb"]) for pair in pairs if len(pair["attacker"]) == 1}
    return {
        "title": title,
        "runs": row.get("samples"), "confidence": row.get("confidence"), "delta": row.get("delta"),
        "figure": position_distance(pairs, row.get("eps_sound"), row.get("eps_claimed"), title),
        "graph": position_graph(graph["agents"], [tuple(e) for e in graph.get("edges", [])], victim, learned,
                                f"what each agent learns about agent {victim}")
        if graph.get("agents") and isinstance(victim, int) else None,
        "pairs": [_pair(pair, row.get("eps_sound")) for pair in pairs],
        "methods": _methods(pairs),
    }


def position_section(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per position-audit row that ended with pairs, in the order they finished."""
    return [_entry(row) for row in rows if row_type(row) == "audit" and row.get("kind") == "position"
            and not audit_failed(row) and row.get("pairs")]
