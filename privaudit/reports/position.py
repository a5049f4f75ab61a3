"""The report's "Privacy by position" section, from position-audit rows alone
(`privaudit.attacks.audit.position`, `privaudit.campaign.audit_findings.position_finding`): per audited run, what
each curious agent (or coalition) forces about the victim against its graph distance, beside the
pairwise network accountant's figures and the defense's own claimed and sound ε; the graph with
each agent coloured by what it learns; and a table of the pairs with each pair's verdict, or, for
Muffliato's averaging, what the pair finds about its formula as computed (below the exact loss of
the view it bounds, and below the ε lower bound, or not), never a verdict on its theorem.

Where the audit also scored each single-agent attacker's own final model (`released = true`, issue
38), the figure draws that released model's ε lower bound beside the transcript's, and a table per
run sets them side by side with their ratio over the distance (`released_by_distance`, which a
"Released model" section calls too): does hiding the transcript help, and by how much.

The verdict of the run itself (the strongest pair against the defense's claim) is in the verdicts
at the top, by the same rule as every audit; a pair's verdict tests the pairwise claim where the
network accountant states one. Nothing is recomputed.

A results folder may come from anywhere, so the section bounds its own work whatever a row says:
the graph is drawn up to `PRIVAUDIT_MAX_DRAWN_AGENTS` agents (its layout is quadratic in them) and
named in words beyond; the figure and the table hold at most `PRIVAUDIT_MAX_SHOWN_PAIRS` pairs
(`_shown`); lists of agents are cut short in titles and names (`_listed`).
"""

from __future__ import annotations

import heapq
from typing import Any

from privaudit.limits import LIMITS, limit
from privaudit.reports.audits import audit_failed, number
from privaudit.reports.figures import RELEASED_LABEL, position_distance, position_graph
from privaudit.reports.inversion import row_type

_LISTED = 8
"""Agents named in a title or a coalition's name before the rest are counted."""
_NAME = 60
"""The longest topology name a title quotes from a row's detail (which the row schema leaves open)."""


def _listed(agents: list[int]) -> str:
    """`agents` as "0, 1, 2", the first `_LISTED` then how many in all when there are more."""
    if len(agents) <= _LISTED:
        return ", ".join(map(str, agents))
    return f"{', '.join(map(str, agents[:_LISTED]))}, … ({len(agents):,} in all)"


def _who(pair: dict[str, Any]) -> str:
    agents = pair["attacker"]
    return f"agent {agents[0]}" if len(agents) == 1 else f"coalition {_listed(agents)}"


_FIGURE_NAMES = {"claimed": "pairwise claim", "linear": "exact linear-Gaussian loss", "central": "central bound"}


def _sound_pair(pair: dict[str, Any], sound: Any) -> str:
    """The sound per-pair ε: the defense's sound ε (it holds for every attacker), or the pair's exact
    linear-Gaussian loss where that is smaller (a bound only under its own assumption, which the
    cell names)."""
    linear = pair.get("eps_pair_linear")
    if isinstance(linear, float) and (not isinstance(sound, (int, float)) or linear < sound):
        return f"{number(linear)} (linear-Gaussian, non-adaptive)"
    return f"{number(sound)} (the defense's)"


def _formula(finding: dict[str, Any]) -> str:
    """A pair's finding about Muffliato's averaging formula as computed, in the verdict column's
    few words (the row's `text` says it whole): never "refuted", since privaudit has not read the
    theorem's text, only its authors' code."""
    if not finding["below"]:
        return "formula not below the exact loss of its view"
    return ("formula below the exact loss of its view" +
            ("; its ε below the ε lower bound" if finding["audit_above"] else ""))


def _pair(pair: dict[str, Any], sound: Any) -> dict[str, Any]:
    figures = pair.get("pairwise") or {}
    verdict = pair.get("verdict") or {}
    finding = pair.get("formula_finding")
    if finding:
        verdict = {"status": f"finding: {_formula(finding)}", "reason": finding["text"]}
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


def _undrawn(graph: dict[str, Any]) -> str | None:
    """Why the graph is not drawn, in a sentence for the page, or None: more agents than
    `PRIVAUDIT_MAX_DRAWN_AGENTS`, or edges that no graph of its agents has."""
    agents, edges = graph["agents"], graph.get("edges") or []
    bound = limit("drawn_agents")
    if agents > bound:
        return (f"The graph of {agents:,} agents is not drawn: the report draws up to {bound:,} "
                f"({LIMITS['drawn_agents'].variable} raises it), as laying a graph out takes time and memory that "
                "grow with the square of its agents. The figure above shows the bounds against the distance.")
    if len(edges) > agents * (agents - 1) // 2 or any(not (0 <= end < agents) for edge in edges for end in edge):
        return f"The graph is not drawn: its {len(edges):,} edges are not those of a graph of {agents:,} agents."
    return None


def _graph(row: dict[str, Any], pairs: list[dict[str, Any]], victims: list[int]) -> dict[str, str | None]:
    """The graph coloured by what is learned: with one victim, what each agent learns about it; with
    several, what one chosen attacker (the agent alone that attacks the most victims, the lowest
    numbered among them) learns about each of them. {"figure": the drawing or None, "note": why it
    is not drawn or None}."""
    graph = row.get("graph") or {}
    if not graph.get("agents") or graph["agents"] < 1:
        return {"figure": None, "note": None}
    undrawn = _undrawn(graph)
    if undrawn:
        return {"figure": None, "note": undrawn}
    edges = [tuple(edge) for edge in graph.get("edges") or []]
    singles = [pair for pair in pairs if len(pair["attacker"]) == 1]
    if len(victims) == 1:
        learned = {pair["attacker"][0]: float(pair["eps_lb"]) for pair in singles}
        return {"figure": position_graph(graph["agents"], edges, victims[0], learned,
                                         f"what each agent learns about agent {victims[0]}"), "note": None}
    counts: dict[int, int] = {}
    for pair in singles:
        counts[pair["attacker"][0]] = counts.get(pair["attacker"][0], 0) + 1
    if not counts:
        return {"figure": None, "note": None}
    chosen = min(counts, key=lambda agent: (-counts[agent], agent))
    learned = {_victim(pair, victims): float(pair["eps_lb"]) for pair in singles if pair["attacker"][0] == chosen}
    return {"figure": position_graph(graph["agents"], edges, chosen, learned,
                                     f"what agent {chosen} learns about each agent",
                                     f"ε lower bound agent {chosen} forces"), "note": None}


def _victims(detail: Any) -> list[int]:
    """The victims the row's detail names (`victims`, else `victim`, else agent 0), whole numbers
    only: the detail is outside the row schema, so a hand-written one is read with care."""
    detail = detail if isinstance(detail, dict) else {}
    named = detail.get("victims")
    named = named if isinstance(named, list) and named else [detail.get("victim", 0)]
    return [v for v in named if isinstance(v, int) and not isinstance(v, bool)] or [0]


def _victim(pair: dict[str, Any], victims: list[int]) -> int:
    """A pair's victim: its own, or the run's first (rows with one victim may not name it per pair)."""
    return victims[0] if pair.get("victim") is None else pair["victim"]


def _shown(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs the figure and the table show: all of them up to `PRIVAUDIT_MAX_SHOWN_PAIRS`, else
    the strongest at each distance (how the bound falls with distance), then the strongest of the
    rest (what the run's verdict rests on). Chosen in one pass and a bounded heap, whatever the
    number of pairs."""
    bound = limit("shown_pairs")
    if len(pairs) <= bound:
        return pairs
    strongest: dict[int, int] = {}
    for index, pair in enumerate(pairs):
        kept = strongest.get(pair["distance"])
        if kept is None or pair["eps_lb"] > pairs[kept]["eps_lb"]:
            strongest[pair["distance"]] = index
    def bound_of(index: int) -> float:
        return pairs[index]["eps_lb"]

    by_distance = set(heapq.nlargest(bound, strongest.values(), key=bound_of))
    rest = (index for index in range(len(pairs)) if index not in by_distance)
    chosen = by_distance | set(heapq.nlargest(bound - len(by_distance), rest, key=bound_of))
    return [pairs[index] for index in sorted(chosen)]


def _shown_of(row: dict[str, Any]) -> tuple[list[int], list[dict[str, Any]], str, str | None]:
    """What a position row's figure and tables show: its victims, the pairs shown (`_shown`, each with
    its victim, by victim, distance and attacker), the title, and a note on the pairs left out."""
    detail = row.get("detail") if isinstance(row.get("detail"), dict) else {}
    victims = _victims(detail)
    shown = [{**pair, "victim": _victim(pair, victims)} for pair in _shown(row["pairs"])]
    shown.sort(key=lambda pair: (pair["victim"], pair["distance"], pair["attacker"]))
    about = f"victim {victims[0]}" if len(victims) == 1 else f"victims {_listed(victims)}"
    agents = (row.get("graph") or {}).get("agents", detail.get("agents"))
    topology = detail.get("topology")
    title = (f"{row.get('defense_label', '?')} · {row.get('label', '?')}: "
             f"{topology if isinstance(topology, str) and len(topology) <= _NAME else '?'} of "
             f"{agents if isinstance(agents, int) else '?'}, {about}, seed {row.get('seed', '?')}")
    left = len(row["pairs"]) - len(shown)
    note = (f"{len(shown):,} of its {len(row['pairs']):,} pairs are shown, in the figure and the table: "
            "the strongest at each distance, then the strongest of the rest; the others, "
            f"{left:,}, are in the results' rows ({LIMITS['shown_pairs'].variable} shows more).") if left else None
    return victims, shown, title, note


def _released_pair(pair: dict[str, Any]) -> dict[str, Any]:
    """A pair's transcript and released-model bounds side by side, with the ratio released/transcript
    ("—" where the transcript's bound is 0: no ratio)."""
    released = pair["released"]
    return {"victim": pair["victim"], "attacker": _who(pair), "distance": pair["distance"],
            "transcript": number(pair["eps_lb"]), "released": number(released["eps_lb"]),
            "ratio": number(released.get("ratio")), "note": released.get("unreached") or ""}


def _released_table(shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_released_pair(pair) for pair in shown if isinstance(pair.get("released"), dict)]


def released_by_distance(row: dict[str, Any]) -> dict[str, Any] | None:
    """For a position row whose pairs carry a released-model bound (`released = true`), its figure
    and table: ε lower bound over the graph distance from what each attacker receives and from its
    own final model alone, side by side (a log ε axis, 0 on its floor), and per pair (by victim,
    distance, attacker) the two bounds and their ratio. None for any other row. {"title",
    "several" (several victims), "runs", "confidence", "delta", "figure", "pairs" (victim,
    attacker, distance, transcript, released, ratio, note), "pairs_note"}."""
    if row_type(row) != "audit" or row.get("kind") != "position" or audit_failed(row) or not row.get("pairs"):
        return None
    victims, shown, title, note = _shown_of(row)
    table = _released_table(shown)
    if not table:
        return None
    return {"title": title, "several": len(victims) > 1, "runs": row.get("samples"),
            "confidence": row.get("confidence"), "delta": row.get("delta"),
            "figure": position_distance(shown, row.get("eps_sound"), row.get("eps_claimed"),
                                        f"{title}: transcript vs {RELEASED_LABEL.split(':')[0]}", bounds_only=True),
            "pairs": table, "pairs_note": note}


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    victims, shown, title, note = _shown_of(row)
    graph = _graph(row, row["pairs"], victims)
    return {
        "title": title, "several": len(victims) > 1,
        "runs": row.get("samples"), "confidence": row.get("confidence"), "delta": row.get("delta"),
        "figure": position_distance(shown, row.get("eps_sound"), row.get("eps_claimed"), title),
        "graph": graph["figure"], "graph_note": graph["note"],
        "pairs": [_pair(pair, row.get("eps_sound")) for pair in shown],
        "pairs_note": note,
        "methods": _methods(shown),
        "released": _released_table(shown),
    }


def position_section(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per position-audit row that ended with pairs, in the order they finished."""
    return [_entry(row) for row in rows if row_type(row) == "audit" and row.get("kind") == "position"
            and not audit_failed(row) and row.get("pairs")]
