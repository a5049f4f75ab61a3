"""Issue 22, acceptance 1 and 2, on the embedded demo campaign's own cells: Wang & Zhang's
release audits show a premise finding, not a refutation; DPDL's canary-sized run names the
constants its verdict rests on, the range of c₂ for which the bound exceeds its claim, and
Lemma 1's condition on q."""

from __future__ import annotations

import re

import pytest

from privaudit.campaign.audit_findings import audit_row, canary_verdict
from privaudit.campaign.cells import build_defense, expand_all
from privaudit.campaign.config import read_campaign
from privaudit.reports.verdicts import verdict_section


@pytest.fixture(scope="module")
def demo():
    campaign, _ = read_campaign(None)
    return expand_all(campaign)


def test_wang_zhang_release_audits_are_premise_findings_not_refutations(demo):
    _, _, _, audits = demo
    cells = [cell for cell in audits if cell.table.kind == "mechanism" and cell.table.mechanism.startswith("tvss")]
    assert len(cells) == 2
    rows = [audit_row(cell) for cell in cells]
    entries = verdict_section(rows, {})["entries"]
    for row, entry in zip(rows, entries):
        assert row["verdict"]["status"] not in ("refuted", "conditionally refuted")
        assert entry["status"] not in ("refuted", "conditionally refuted")
        assert "Refuted" not in entry["short"]
        (premise,) = [f for f in entry["findings"] if f["kind"] == "premise not enforced"]
        assert "Definition 1" in premise["text"] and "2×" in premise["text"]
        assert "exceeds the stated ε" in premise["text"]
        assert row["relation"]["same"]


def test_dpdl_canary_sized_run_states_its_constants_and_lemma_1(demo):
    cells, _, _, _ = demo
    (cell,) = [cell for cell in cells if cell.run.label == "DPDL ε=0.25 (canary-sized)"]
    defense = build_defense(cell)
    claim = defense.claim(cell.run.rounds)
    kinds = {kind for kind, _ in claim.analytic()}
    assert "outside its theorem's range" in kinds
    (lemma,) = [text for kind, text in claim.findings if "Lemma 1" in text and "q <" in text]
    q = float(re.search(r"q = ([0-9.e-]+)", lemma).group(1))
    assert q == pytest.approx(0.1) and "1/(32σ)" in lemma
    assert [c.name for c in claim.constants] == ["c₂", "h", "c₁"]
    record = {"eps_lb": 2 * claim.eps_claimed, "eps_claimed": claim.eps_claimed, "delta": claim.delta,
              "confidence": 0.95, "runs_per_side": 200, "protocol": "model", "delta_lb": None}
    verdict = canary_verdict(record, claim)
    assert verdict["status"] == "outside range"
    assert verdict["conditions"][0] == f"c₂ < {2 * defense.params.c2:.3g} (assumed {defense.params.c2:g})"
    assert "Lemma 1" in verdict["reason"] and "c₂ <" in verdict["reason"]
    weak = canary_verdict(record | {"eps_lb": 0.5 * claim.eps_claimed}, claim)
    assert weak["status"] == "outside range" and not weak["conditions"]
