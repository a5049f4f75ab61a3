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
    return {"victim": pair["victim"], "attacker": _who(pair), "distance": pair["distance"], "eps_lb": number(pair["eps_lb"]),
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


def _graph(row: dict[str, Any], pairs: list[dict[str, Any]], victims: list[int]) -> str | None:
    """The graph coloured by what is learned: with one victim, what each agent learns about it; with
    several, what one chosen attacker (the agent alone that attacks the most victims, the lowest
    numbered among them) learns about each of them."""
    graph = row.get("graph") or {}
    if not graph.get("agents"):
        return None
    edges = [tuple(edge) for edge in graph.get("edges", [])]
    singles = [pair for pair in pairs if len(pair["attacker"]) == 1]
    if len(victims) == 1:
        learned = {pair["attacker"][0]: float(pair["eps_lb"]) for pair in singles}
        return position_graph(graph["agents"], edges, victims[0], learned,
                              f"what each agent learns about agent {victims[0]}")
    counts: dict[int, int] = {}
    for pair in singles:
        counts[pair["attacker"][0]] = counts.get(pair["attacker"][0], 0) + 1
    if not counts:
        return None
    chosen = min(counts, key=lambda agent: (-counts[agent], agent))
    learned = {pair["victim"]: float(pair["eps_lb"]) for pair in singles if pair["attacker"][0] == chosen}
    return position_graph(graph["agents"], edges, chosen, learned, f"what agent {chosen} learns about each agent",
                          f"ε lower bound agent {chosen} forces")


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    detail = row.get("detail") or {}
    victims = [int(v) for v in detail.get("victims") or [detail.get("victim", 0)]]
    pairs = [{**pair, "victim": victims[0] if pair.get("victim") is None else pair["victim"]} for pair in row["pairs"]]
    pairs.sort(key=lambda pair: (pair["victim"], pair["distance"], pair["attacker"]))
    about = f"victim {victims[0]}" if len(victims) == 1 else f"victims {', '.join(map(str, victims))}"
    title = (f"{row.get('defense_label', '?')} · {row.get('label', '?')}: {detail.get('topology', '?')} of "
             f"{detail.get('agents', '?')}, {about}, seed {row.get('seed', '?')}")
    return {
        "title": title, "several": len(victims) > 1,
        "runs": row.get("samples"), "confidence": row.get("confidence"), "delta": row.get("delta"),
        "figure": position_distance(pairs, row.get("eps_sound"), row.get("eps_claimed"), title),
        "graph": _graph(row, pairs, victims),
        "pairs": [_pair(pair, row.get("eps_sound")) for pair in pairs],
        "methods": _methods(pairs),
    }


def position_section(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per position-audit row that ended with pairs, in the order they finished."""
    return [_entry(row) for row in rows if row_type(row) == "audit" and row.get("kind") == "position"
            and not audit_failed(row) and row.get("pairs")]
