"""Threat models side by side: where one training run is attacked under several threat models
(a global listener, an eavesdropper on one link, a curious neighbour...), one table per run puts
what each attacker achieved — or why it could not attack — next to the others, at each round."""

from __future__ import annotations

from typing import Any

from privaudit.reports.inversion import leak_words, row_type


def _outcome(row: dict[str, Any]) -> dict[str, Any]:
    metrics, floor, leak = row.get("metrics") or {}, row.get("baseline") or {}, leak_words(row)
    return {"psnr": metrics.get("psnr"), "ssim": metrics.get("ssim"), "floor": floor.get("psnr"),
            "leak": leak, "status": str(row.get("status", ""))}


def _attacker(row: dict[str, Any]) -> str:
    """The threat model with who it is, as the attack table named it."""
    attack = (row.get("config") or {}).get("attack") or {}
    threat = str(row.get("threat", "?"))
    if threat == "eavesdropper" and attack.get("links"):
        return f"eavesdropper on {', '.join(f'{a}–{b}' for a, b in attack['links'])}"
    if threat == "curious_neighbour" and attack.get("observer") is not None:
        return f"curious neighbour {attack['observer']}"
    return threat.replace("_", " ")


def threat_comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table per (training run, attack, victim) attacked by more than one threat model: the
    attackers as rows, the attacked rounds as columns."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        if row_type(row) == "inversion":
            key = (row.get("training"), row.get("attack"), row.get("scenario"), row.get("victim"))
            groups.setdefault(key, []).append(row)
    tables = []
    for (_, attack, scenario, victim), found in groups.items():
        attackers = list(dict.fromkeys(_attacker(row) for row in found))
        if len(attackers) < 2:
            continue
        rounds = sorted({row.get("round") for row in found}, key=lambda r: (r is None, r))
        cells = {(_attacker(row), row.get("round")): _outcome(row) for row in found}
        tables.append({
            "title": f"{found[0].get('defense_label', '?')}, seed {found[0].get('seed', '?')}: "
                     f"{found[0].get('attack_title') or attack} on agent {victim} ({scenario})",
            "rounds": rounds,
            "attackers": [{"name": name, "cells": [cells.get((name, r)) for r in rounds]} for name in attackers],
        })
    return tables
