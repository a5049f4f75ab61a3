"""The report's "Participants who lie" section (issue 39 item 5): per defense run a liar attacked, the
claim's threat model and what it makes of the lie, and each active canary audit beside the passive
audits of the same canary on the same run — read from the rows, never recomputed."""

from privaudit.reports.active import active_section
from privaudit.reports.html import runs_of


def _training(cell: str, label: str, threat: str | None, eps: float | None = 1.0) -> dict:
    claim = {"eps_claimed": eps, **({"threat": {"kind": threat, "source": "seed §2"}} if threat else {})}
    return {"type": "training", "cell": cell, "group": cell, "label": label, "seed": 0, "claim": claim}


def _audit(training: str, seed: int, eps_lb: float, *, lying: bool, canary: str = "natural") -> dict:
    table = {"canary": canary, "threat": "malicious" if lying else "global_listener"}
    return {"type": "audit", "kind": "canary", "cell": f"{training}-{seed}-{lying}-{canary}", "training": training,
            "label": "audit", "seed": seed, "status": "ok", "eps_lb": eps_lb, "confidence": 0.95,
            "eps_sound": 10.0, "eps_claimed": 11.0, "eps_estimate": 5.0, "verdict": {"status": "inconclusive"},
            "config": {"audit": table}, **({"active": {"liar": 1, "agents": [1, 3], "victim": 0}} if lying else {})}


def test_active_audits_are_set_beside_the_passive_audits_of_the_same_canary_on_their_run():
    rows = [_training("t", "DP", "any adversary"), _audit("t", 0, 2.0, lying=True), _audit("t", 1, 1.0, lying=True),
            _audit("t", 0, 1.0, lying=False), _audit("t", 1, 0.0, lying=False),
            _audit("t", 0, 3.0, lying=False, canary="gradient")]
    (entry,) = active_section(rows, runs_of(rows))["entries"]
    assert entry["threat"] == "any adversary" and entry["note"] == "Active evidence is judged against this claim."
    (compared,) = entry["audits"]
    assert compared["canary"] == "natural"
    assert [line["active"] for line in compared["lines"]] == [True, True, False, False]
    assert compared["lines"][0]["who"] == "agent 1 lies to agent 0 (agents 1, 3 pool what they hear)"
    assert compared["lines"][2]["who"] == "global listener, listening"
    assert "ε ≥ 1.5 on average; listening to the same runs, ε ≥ 0.5 (3×)" in compared["difference"]
    assert "lower bounds" in compared["difference"]


def test_a_claim_against_honest_agents_makes_the_lie_a_finding_and_runs_without_a_lie_are_left_out():
    rows = [_training("h", "Wang & Zhang", "honest-but-curious"), _audit("h", 0, 2.0, lying=True),
            _training("p", "passive only", "any adversary"), _audit("p", 0, 1.0, lying=False),
            _training("u", "undefended", None, eps=None), _audit("u", 0, 4.0, lying=True)]
    entries = {entry["label"]: entry for entry in active_section(rows, runs_of(rows))["entries"]}
    assert set(entries) == {"Wang & Zhang", "undefended"}
    assert "outside this claim's threat model" in entries["Wang & Zhang"]["note"]
    assert "never a refutation" in entries["Wang & Zhang"]["note"]
    assert entries["undefended"]["threat"] == "none: the run claims no privacy"
    assert "no passive audit of this canary" in entries["Wang & Zhang"]["audits"][0]["difference"]


def test_no_section_without_a_lie():
    rows = [_training("p", "passive only", "any adversary"), _audit("p", 0, 1.0, lying=False)]
    assert active_section(rows, runs_of(rows)) is None


def test_nothing_certified_either_way_is_said_so_and_no_ratio_stands_on_a_bound_near_zero():
    nothing = [_training("n", "noisy", "any adversary"), _audit("n", 0, 0.0, lying=True), _audit("n", 0, 0.0, lying=False)]
    (entry,) = active_section(nothing, runs_of(nothing))["entries"]
    assert "not detected at this strength, either way" in entry["audits"][0]["difference"]
    near = [_training("z", "near", "any adversary"), _audit("z", 0, 0.3, lying=True), _audit("z", 0, 0.008, lying=False)]
    (entry,) = active_section(near, runs_of(near))["entries"]
    difference = entry["audits"][0]["difference"]
    assert "ε ≥ 0.3 on average; listening to the same runs, ε ≥ 0.008." in difference and "×" not in difference
