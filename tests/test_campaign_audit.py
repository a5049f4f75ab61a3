"""`[[audit]]` tables in campaigns: a mechanism audit per seed with its tightness curve, a canary
audit per targeted run and seed, rows in the shape the report reads, resumption, one-line errors."""

import pytest

from privaudit.campaign.cells import expand, expand_audits
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.errors import ConfigError

DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "topology": "complete", "model": "logreg", "rounds": 4,
         "eval_every": 4, "batch_size": 10, "lr": 0.5}
DP = DPSGD | {"kind": "dp_dpsgd", "label": "DP-D-PSGD", "clip": 1.0, "noise_multiplier": 1.0}
TERNARY = {"kind": "mechanism", "label": "ternary", "mechanism": "ternary", "params": {"r": 10},
           "samples": 20_000, "curve": [2_000, 5_000]}
CANARY = {"kind": "canary", "label": "canary", "runs": 8}
COMMON = ("eps_lb", "delta", "confidence", "samples", "eps_claimed", "eps_sound", "verdict", "tightness", "curve",
          "subject", "defense", "defense_label", "status", "detail", "wall_s")


def _campaign(audits, defenses=(DPSGD,), seeds=(0,)):
    return parse_campaign({"campaign": {"name": "t", "seeds": list(seeds)}, "data": {"max_train": 100},
                           "defense": list(defenses), "audit": list(audits)})


def test_audit_cells_expand_per_seed_and_per_targeted_run():
    campaign = _campaign([TERNARY, CANARY | {"defense": ["DP-D-PSGD"]}], defenses=(DPSGD, DP), seeds=(0, 1))
    audits = expand_audits(campaign, expand(campaign))
    assert [(a.table.kind, a.seed, a.training and a.training.label) for a in audits] == [
        ("mechanism", 0, None), ("mechanism", 1, None), ("canary", 0, "DP-D-PSGD"), ("canary", 1, "DP-D-PSGD")]
    assert len({a.id for a in audits}) == 4


def test_mechanism_audit_row_has_the_bound_the_curve_and_the_verdict(tmp_path):
    store = run_campaign(_campaign([TERNARY]), "# t", tmp_path, progress=False, say=lambda _: None)
    (row,) = [row for row in store.rows() if row["type"] == "audit"]
    assert set(COMMON) <= set(row) and row["status"] == "ok"
    assert row["defense"] == "ternary" and row["kind"] == "mechanism"
    assert 0.08 <= row["delta_lb"] <= 0.1 < row["exact"]["delta"] + 1e-9
    assert row["delta_sound"] == pytest.approx(0.1) and row["eps_sound"] is None
    assert [point["samples"] for point in row["curve"]] == [2_000, 5_000]
    assert row["verdict"]["status"] == "consistent"


def test_canary_audit_runs_on_the_targeted_defense_and_is_judged_against_its_claim(tmp_path):
    store = run_campaign(_campaign([CANARY], defenses=(DPSGD, DP)), "# t", tmp_path, progress=False,
                         say=lambda _: None)
    rows = {row["defense_label"]: row for row in store.rows() if row["type"] == "audit"}
    assert set(rows) == {"D-PSGD", "DP-D-PSGD"}
    private, plain = rows["DP-D-PSGD"], rows["D-PSGD"]
    assert private["status"] == plain["status"] == "ok" and private["samples"] == 8
    assert private["eps_lb"] <= private["eps_sound"]
    # 8 runs per side cannot refute the claim whatever the attack: inconclusive, never "consistent"
    assert private["verdict"]["status"] == "inconclusive" and "cannot refute" in private["verdict"]["reason"]
    assert plain["eps_claimed"] is None and plain["verdict"]["status"] == "not evaluable"
    again = run_campaign(_campaign([CANARY], defenses=(DPSGD, DP)), "# t", tmp_path, progress=False,
                         say=lambda _: None)
    assert len(again.rows()) == len(store.rows())


def test_one_run_canary_audit_trains_once_and_counts_its_canaries(tmp_path):
    table = CANARY | {"method": "one_run", "canaries": 40, "guesses": 5}
    del table["runs"]
    store = run_campaign(_campaign([table], defenses=(DP,)), "# t", tmp_path, progress=False, say=lambda _: None)
    (row,) = [row for row in store.rows() if row["type"] == "audit"]
    assert row["status"] == "ok" and row["method"] == "one_run" and row["samples"] == 40
    assert row["detail"]["guesses"] == 10 and 0 <= row["detail"]["correct"] <= 10
    assert 0 <= row["eps_lb"] <= row["eps_sound"]
    assert row["verdict"]["status"] == ("consistent" if row["eps_lb"] > 0 else "inconclusive")


@pytest.mark.parametrize("table, message", [
    ({"kind": "mechanism"}, "audit[0].mechanism: required"),
    ({"kind": "mechanism", "mechanism": "ternary", "params": {"r": -1}}, "audit[0].params.r"),
    ({"kind": "mechanism", "mechanism": "ternary", "runs": 10}, "audit[0].runs: not a field of a mechanism audit"),
    ({"kind": "canary", "adjacency": "l2"}, "audit[0].adjacency: not a field of a canary audit"),
    ({"kind": "canary", "defense": ["nope"]}, "no defense table labelled 'nope'"),
    ({"kind": "sniff"}, "audit[0].kind: unknown audit kind 'sniff'"),
    ({"kind": "canary", "canaries": 10}, "audit[0].canaries: not a field of a repeated canary audit"),
    ({"kind": "canary", "method": "one_run", "runs": 10}, "audit[0].runs: not a field of a one_run canary audit"),
    ({"kind": "canary", "method": "one_run", "canaries": 10, "guesses": 6}, "audit[0].guesses: 2 × guesses"),
])
def test_bad_audit_tables_are_one_line_errors(table, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")) as caught:
        _campaign([table])
    assert "\n" not in str(caught.value)


def test_an_audit_that_fails_on_a_value_is_a_failed_row_and_the_campaign_goes_on(tmp_path, monkeypatch):
    import privaudit.campaign.audit_findings as findings

    def broken(cell):
        raise ValueError("scores are not finite")

    monkeypatch.setattr(findings, "mechanism_finding", broken)
    store = run_campaign(_campaign([TERNARY, CANARY | {"runs": 8}]), "# t", tmp_path, progress=False,
                         say=lambda _: None)
    audits = {row["kind"]: row for row in store.rows() if row["type"] == "audit"}
    assert audits["mechanism"]["status"] == "failed: scores are not finite" and audits["mechanism"]["eps_lb"] is None
    assert audits["mechanism"]["verdict"]["status"] == "not evaluable"
    assert audits["canary"]["status"] == "ok"
