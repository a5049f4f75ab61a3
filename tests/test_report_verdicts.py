"""The verdicts the report opens with, and the audit-evidence and provenance sections, rendered from
hand-written rows: each status follows from the rows alone (refuted by an audit, understated by the
accountant, no privacy with the attacks' strongest leakage, consistent, not evaluable with the
audit's reason, not audited, failed), bounds and tightness are the audit rows' own, a canary audit
joins the run it names while a mechanism audit stands alone, and every cell's wall time is shown."""

import re

import pytest

from privaudit.store import ResultsStore
from privaudit.reports.html import render_report, runs_of
from privaudit.reports.verdicts import ratio_text, severity, verdict_section
from tests.helpers import without_notation


def _claim_record(**fields):
    """A claim record with nothing assumed and no finding, or with `fields`."""
    from privaudit.accounting import Claim

    return Claim(**{"defense": "d", "notion": "(ε, δ)-DP", "adjacency": "", "eps_claimed": 2.0, "eps_stated": None,
                    "eps_sound": None, "delta": 1e-5, "horizon": 1, "equation": "", "sound_method": "", **fields})

REFUTING = "at ε = 1 the outputs force δ ≥ 0.31 (95% confidence), above the claimed δ = 1e-05"
UNJUDGEABLE = "the paper never gives the constant c of Theorem 3; the bounds stand alone"


def _claim(notion="(ε, δ)-DP", eps_claimed=None, eps_sound=None, delta=1e-5, delta_sound=None, eps_stated=None,
           sound_method="PLD accountant"):
    return {"defense": "x", "notion": notion, "adjacency": "add/remove", "eps_claimed": eps_claimed,
            "eps_stated": eps_stated, "eps_sound": eps_sound, "delta": delta, "horizon": 300,
            "equation": f"equation of {notion}", "sound_method": sound_method, "assumptions": [],
            "delta_sound": delta_sound, "statements": []}


NO_PRIVACY = _claim("none", delta=None, sound_method="no DP noise: the states reveal each local gradient exactly")


def _training(cell, label, claim, *, defense="dp_dpsgd", seed=0, wall_s=1.5, table=None):
    return {"type": "training", "cell": cell, "group": f"g-{label}", "defense": defense, "label": label,
            "title": f"title of {label}", "seed": seed,
            "config": {"run": {"rounds": 300, "topology": "ring", "agents": 8, "label": table or label}},
            "metrics": {"avg_acc": 0.9, "agent_acc_mean": 0.88}, "claim": claim,
            "history": [{"round": 0, "avg_acc": 0.1, "agent_acc_mean": 0.1},
                        {"round": 300, "avg_acc": 0.9, "agent_acc_mean": 0.88}],
            "messages": {"model": 4800}, "wall_s": wall_s, "version": "0.1.0"}


def _audit(cell, *, kind="canary", subject="DP-D-PSGD σ=1", defense="dp_dpsgd", defense_label="DP-D-PSGD σ=1",
           verdict="consistent", reason="at ε = 2 the outputs force δ ≥ 0 (95% confidence), not above the claimed "
           "δ = 1e-05", eps_lb=0.9, eps_claimed=2.0, eps_sound=1.7, tightness=0.53, seed=0, group=None,
           status="ok", curve=True, label="canary audit", of="eps", delta_lb=0.0098):
    ok = status == "ok"
    return {"type": "audit", "cell": cell, "group": group or f"ga-{cell}", "label": label, "seed": seed,
            "kind": kind, "subject": subject, "defense": defense, "defense_label": defense_label,
            "status": status, "eps_lb": eps_lb if ok else None, "delta_lb": delta_lb if ok else None,
            "delta_lb_eps": 0.0, "delta": 1e-5, "confidence": 0.95, "samples": 1000,
            "eps_claimed": eps_claimed, "eps_sound": eps_sound, "exact": {"eps": 1.2, "delta": 0.01} if ok else None,
            "verdict": {"status": verdict, "statement": f"({eps_claimed}, 1e-05)-DP", "reason": reason} if ok else None,
            "tightness": {"of": of, "sound": tightness, "exact": 0.75} if ok else None,
            **({"curve": [{"samples": 100, "eps_lb": 0.2, "delta_lb": 0.002},
                          {"samples": 1000, "eps_lb": eps_lb, "delta_lb": delta_lb}]} if curve and ok else {}),
            "detail": {}, "wall_s": 3.25, "version": "0.1.0"}


def _inversion(cell, training, label, psnr, floor):
    return {"type": "inversion", "cell": cell, "group": f"gi-{cell}", "training": training, "label": "DLG",
            "attack": "dlg", "attack_title": "DLG", "defense": "dpsgd", "defense_label": label,
            "defense_table": label, "setting": {}, "scenario": "state_difference", "threat": "global_listener",
            "victim": 0, "round": 10, "seed": 0, "batch_size": 1, "status": "ok",
            "metrics": {"mse": 0.001, "psnr": psnr, "ssim": 0.9}, "baseline": {"mse": 0.1, "psnr": floor, "ssim": 0.1},
            "wall_s": 0.5, "version": "0.1.0"}


@pytest.fixture
def rows():
    return [
        _training("t-plain", "D-PSGD", NO_PRIVACY, defense="dpsgd"),
        _inversion("i-plain", "t-plain", "D-PSGD", psnr=40.0, floor=9.0),
        _training("t-dp", "DP-D-PSGD σ=1", _claim(eps_claimed=2.0, eps_sound=1.7)),
        _audit("a-dp"),
        _training("t-refuted", "Broken", _claim(eps_claimed=1.0, eps_sound=1.0)),
        _audit("a-refuted", subject="Broken", defense_label="Broken", verdict="refuted", reason=REFUTING,
               eps_lb=4.0, eps_claimed=1.0, eps_sound=1.0, tightness=4.0),
        _training("t-tvss", "Alg. 1", _claim("ε-DP (pure, Laplace)", eps_claimed=0.936, eps_sound=58.5, delta=0.0,
                                             eps_stated=0.864), defense="tvss"),
        _training("t-ternary", "Ternary", _claim("(0, δ)-DP", eps_claimed=0.0, delta=0.5, delta_sound=1.0,
                                                 sound_method="no DpEvent for a quantizer"), defense="ternary"),
        _training("t-dpdl", "DPDL", _claim(eps_claimed=1.0, sound_method="Theorem 1's constant is unknown"),
                  defense="dpdl"),
        _audit("a-mech", kind="mechanism", subject="Ternary quantizer (seed 004)", defense="ternary",
               defense_label=None, verdict="not evaluable", reason=UNJUDGEABLE, eps_claimed=None, eps_sound=None,
               tightness=None, label="ternary mechanism"),
        _audit("a-lost", kind="mechanism", subject="Laplace", defense=None, defense_label=None,
               status="failed: the sampler ran out of memory", label="laplace mechanism"),
    ]


def _entries(rows):
    training = [row for row in rows if row.get("type") == "training"]
    return {entry["subject"]: entry for entry in verdict_section(rows, runs_of(training))["entries"]}


def test_each_status_follows_from_the_rows(rows):
    entries = _entries(rows)
    assert {subject: entry["status"] for subject, entry in entries.items()} == {
        "D-PSGD": "no privacy", "DP-D-PSGD σ=1": "consistent", "Broken": "refuted", "Alg. 1": "understated",
        "Ternary": "understated", "DPDL": "not audited", "Ternary quantizer (seed 004)": "not evaluable",
        "Laplace": "failed"}
    assert entries["Broken"]["sentence"] == f"Refuted by its audit (one seed run): {REFUTING}"
    assert entries["Ternary quantizer (seed 004)"]["sentence"] == f"The audit cannot judge the claim: {UNJUDGEABLE}"
    assert "the sampler ran out of memory" in entries["Laplace"]["sentence"]
    assert "No sound bound either: Theorem 1's constant is unknown." in entries["DPDL"]["sentence"]


def test_understated_names_both_values_in_epsilon_or_in_delta(rows):
    entries = _entries(rows)
    assert "gives ε = 0.936, a standard accountant on the mechanism the code runs gives ε = 58.5" in \
        entries["Alg. 1"]["sentence"]
    assert "gives δ = 0.5 at ε = 0, a standard accountant on the mechanism the code runs gives δ = 1" in \
        entries["Ternary"]["sentence"]
    assert entries["Alg. 1"]["claim"]["stated"] == "0.864" and entries["Alg. 1"]["claim"]["recomputed"] == "0.936"
    assert entries["Alg. 1"]["claim"]["differs"]
    assert entries["DP-D-PSGD σ=1"]["sound"]["eps"] == "1.7" and not entries["DP-D-PSGD σ=1"]["claim"]["differs"]


def test_a_claim_at_or_above_the_accountant_is_not_understated(rows):
    rows[2]["claim"] = _claim(eps_claimed=1.7 * (1 + 1e-9), eps_sound=1.7)
    rows.remove(rows[3])
    assert _entries(rows)["DP-D-PSGD σ=1"]["status"] == "not audited"
    rows[2]["claim"] = _claim(eps_claimed=1.6, eps_sound=1.7)
    assert _entries(rows)["DP-D-PSGD σ=1"]["status"] == "understated"


def test_a_canary_audit_joins_its_run_with_its_own_bound_and_tightness(rows):
    entry = _entries(rows)["DP-D-PSGD σ=1"]
    assert entry["bound"]["value"] == "ε ≥ 0.9 at δ = 1e-05"
    assert entry["bound"]["confidence"] == "95 % confidence" and entry["bound"]["samples"] == "1,000 runs per world"
    assert entry["tightness"] == "0.53 of the sound ε; 0.75 of the exact ε for the pair"
    assert "not above the claimed δ = 1e-05" in entry["sentence"] and "never prove it" in entry["sentence"]
    assert "DP-D-PSGD σ=1" not in {e["subject"] for e in _entries(rows).values() if e["kind"] != "defense run"}


def test_a_canary_audit_naming_a_table_reaches_its_grid_runs_and_an_unknown_one_stands_alone(rows):
    rows[2] = _training("t-dp", "DP-D-PSGD (noise_multiplier=1.0)", _claim(eps_claimed=2.0, eps_sound=1.7),
                        table="DP-D-PSGD σ=1")
    rows.append(_audit("a-orphan", subject="Nobody", defense_label="Nobody"))
    entries = _entries(rows)
    assert entries["DP-D-PSGD (noise_multiplier=1.0)"]["status"] == "consistent"
    assert entries["Nobody"]["kind"] == "canary audit" and entries["Nobody"]["status"] == "consistent"


def test_the_largest_of_several_bounds_says_it_was_picked(rows):
    rows.insert(4, _audit("a-dp2", seed=1, group="ga-a-dp", eps_lb=1.1, tightness=0.65))
    entry = _entries(rows)["DP-D-PSGD σ=1"]
    assert entry["bound"]["value"] == "ε ≥ 1.1 at δ = 1e-05"
    assert entry["tightness"].startswith("0.65 of the sound ε")
    assert entry["bound"]["note"] == ("largest of 2 audit bounds, each at its own confidence; all 2 hold together "
                                      "with ≥ 90 % confidence (union bound)")


def test_a_refuting_audit_outranks_an_understated_claim(rows):
    rows[4]["claim"] = _claim(eps_claimed=0.5, eps_sound=1.0)
    assert _entries(rows)["Broken"]["status"] == "refuted"


def test_no_privacy_quotes_the_strongest_leakage_from_the_attack_sections(rows):
    entry = _entries(rows)["D-PSGD"]
    assert entry["sentence"].startswith("No privacy is claimed (no DP noise: the states reveal each local gradient")
    assert entry["notes"] == ["Reconstruction: D-PSGD · DLG: median PSNR 40.0 dB, SSIM 0.90 (default, round 10, "
                              "1 seed), 31.0 dB above the noise floor (9.0 dB) by the old comparison of the median "
                              "PSNR with the floor's mean, which states no confidence (rows written before the leak "
                              "test)."]
    rows.remove(rows[1])
    assert _entries(rows)["D-PSGD"]["sentence"].endswith("no attack in these results measured what leaks.")


def test_runs_of_an_audited_algorithm_point_to_its_mechanism_audit(rows):
    notes = _entries(rows)["Ternary"]["notes"]
    assert notes == ["Mechanism audit of the same algorithm: ternary mechanism · Ternary quantizer (seed 004) "
                     "(not evaluable; see its own verdict)."]


def _render(tmp_path, rows):
    store = ResultsStore(tmp_path)
    for row in rows:
        store.append(row)
    (tmp_path / "campaign.toml").write_text('[campaign]\nname = "verdicts"\ndescription = "all statuses"\n')
    return without_notation(render_report(tmp_path, tmp_path / "report.html").read_text())


def test_the_page_opens_with_the_verdicts_and_a_summary(tmp_path, rows):
    html = _render(tmp_path, rows)
    assert re.findall(r'<section id="([a-z]+)">', html) == [
        "verdicts", "claims", "training", "inversion", "audits", "provenance"]
    verdicts = html[html.index('<section id="verdicts">'):html.index('<section id="claims">')]
    assert '<p class="muted">6 defense runs, 2 of them audited empirically, and 2 audits with a verdict of their own.' \
        in verdicts
    assert verdicts.count('id="epsilon-figure"') == 1 and verdicts.count("<details><summary>details</summary>") == 8
    assert ('<span class="badge understated">understated</span> the claim is below the sound accountant: '
            'Alg. 1 <span class="ratio">(sound ε 58.5 = 62 × claimed)</span>, '
            'Ternary <span class="ratio">(sound δ 1 = 2 × claimed)</span></li>') in verdicts
    assert ('<span class="badge refuted">refuted</span> an empirical lower bound exceeds the claim: Broken '
            '<span class="ratio">(ε<sub>LB</sub> 4 = 4 × claimed)</span></li>') in verdicts
    assert "<title>privaudit report: verdicts</title>" in html and '<p class="lead">all statuses</p>' in html
    contents = html[html.index('<nav class="toc">'):html.index("</nav>")]
    assert re.findall(r'href="#([a-z-]+)"', contents) == ["verdicts", "claims", "training", "inversion", "audits",
                                                          "provenance"]


def test_audit_section_shows_bounds_references_verdicts_and_curves(tmp_path, rows):
    html = _render(tmp_path, rows)
    section = html[html.index('<section id="audits">'):html.index('<section id="provenance">')]
    assert "<td>ε ≥ 4 at δ = 1e-05<br>δ ≥ 0.0098 at ε = 0</td>" in section
    assert '<span class="muted">exact for the pair</span> ε 1.2, δ 0.01</td>' in section
    assert ("<td>4 of the sound ε (above it: the sound bound itself is contradicted); 0.75 of the exact ε for the "
            "pair</td>") in section
    assert f"refuted, for the claim “(1.0, 1e-05)-DP”: {REFUTING}" in section
    assert '<span class="failed">failed: the sampler ran out of memory</span>' in section
    assert section.count('<img alt="audit bound against samples: ') == 3  # the failed and the curveless: none
    assert section.count('src="data:image/png;base64,') == 3


def test_provenance_times_every_cell_and_says_which_stored_no_time(tmp_path, rows):
    del rows[-1]["wall_s"]
    html = _render(tmp_path, rows)
    provenance = html[html.index('<section id="provenance">'):]
    assert f"{len(rows)} cells,\n{1.5 * 6 + 0.5 + 3.25 * 3:.1f} s of wall time in all (1 cell stored no wall time" \
        in provenance
    assert provenance.count('<td class="num">3.2</td>') == 3 and provenance.count('<td class="num">—</td>') == 1
    assert "canary audit · Broken (canary audit)" in provenance
    assert "<td>training</td><td>D-PSGD</td><td class=\"num\">0</td><td>ok</td>" in provenance  # no status: it ended


def test_a_canary_audit_naming_its_training_cell_joins_that_run_whatever_its_label(rows):
    rows[3] = {**rows[3], "training": "t-dp", "defense_label": "renamed since"}
    entries = _entries(rows)
    assert entries["DP-D-PSGD σ=1"]["status"] == "consistent" and "renamed since" not in entries


def test_one_refutation_among_several_audits_states_the_chance_of_a_false_one(rows):
    rows.insert(6, _audit("a-refuted2", subject="Broken", defense_label="Broken", group="ga-a-refuted", seed=1,
                          eps_lb=0.5, eps_claimed=1.0, eps_sound=1.0, tightness=0.5))
    entry = _entries(rows)["Broken"]
    assert entry["status"] == "refuted"
    assert entry["sentence"] == (f"Refuted by 1 of 2 audits (2 seeds run): {REFUTING}. With 2 audits, the chance that one refutes "
                                 "a true claim is at most 10 % (union bound)")
    assert entry["tightness"].startswith("4 of the sound ε (above it: the sound bound itself is contradicted)")


def test_rows_from_before_rows_had_a_type_or_group_still_render(tmp_path):
    """The first results format: no `type`, no `group`; each such row is a run of its own."""
    store = ResultsStore(tmp_path)
    for cell in ("a1", "b2"):
        row = _training(cell, "D-PSGD", NO_PRIVACY, defense="dpsgd")
        del row["type"], row["group"]
        store.append(row)
    assert sorted(runs_of(store.rows())) == ["D-PSGD [a1]", "D-PSGD [b2]"]
    assert "D-PSGD" in render_report(tmp_path).read_text()


def test_a_canary_audit_that_found_nothing_is_inconclusive_never_green():
    """Issue 17: a canary audit with ε_LB = 0 is not shown as a green "consistent", whether the
    row says "inconclusive" (as rows now do) or "consistent" (as older rows did)."""
    from privaudit.campaign.audit_findings import canary_verdict

    claim = _claim_record()
    record = {"eps_lb": 0.0, "eps_claimed": 2.0, "delta": 1e-5, "confidence": 0.95, "runs_per_side": 64000,
              "protocol": "model", "delta_lb": None}
    verdict = canary_verdict(record, claim)
    assert verdict["status"] == "inconclusive" and "no evidence at this strength" in verdict["reason"]
    assert canary_verdict(record | {"eps_lb": 1.5}, claim)["status"] == "consistent"
    assert canary_verdict(record | {"eps_lb": 2.5}, claim)["status"] == "refuted"
    small = canary_verdict(record | {"eps_lb": 1.5, "eps_claimed": 5.0, "runs_per_side": 200}, claim)
    assert small["status"] == "inconclusive" and "cannot refute" in small["reason"]
    one_run = {"eps_lb": 1.7, "eps_claimed": 11.7, "delta": 1e-5, "confidence": 0.95, "delta_lb": None,
               "canaries": 100, "guesses": 40}  # all 40 guesses right certify at most ε ≈ 2.55
    weak = canary_verdict(one_run, claim)
    assert weak["status"] == "inconclusive" and "40 guesses among 100 canaries" in weak["reason"]
    assert canary_verdict(one_run | {"eps_claimed": 2.0}, claim)["status"] == "consistent"
    for stored in ("inconclusive", "consistent"):
        row = {"type": "audit", "cell": "a", "kind": "mechanism", "subject": "s", "label": "l", "status": "ok",
               "eps_lb": 0.0, "delta_lb": 0.0, "confidence": 0.95, "eps_claimed": 2.0,
               "verdict": {"status": stored, "reason": "nothing found"}}
        (entry,) = verdict_section([row], {})["entries"]
        assert entry["status"] == "inconclusive" and entry["css"] != "consistent"


def test_analytic_findings_are_verdicts_of_their_own_first_on_the_page(tmp_path):
    """Issue 17: a ternary run whose premise r ≥ ‖x‖∞ failed, and a DPDL run outside Theorem 1's
    range, show those findings among the verdicts (with the vacuous δ = 1 and the missing sound
    bound), before the table."""
    from privaudit.campaign.config import parse_campaign
    from privaudit.campaign.run import run_campaign

    base = {"topology": "ring", "agents": 4, "model": "logreg", "rounds": 3, "eval_every": 3}
    campaign = parse_campaign({
        "campaign": {"name": "findings"}, "data": {"dataset": "digits", "max_train": 200},
        "defense": [base | {"kind": "ternary", "label": "Ternary r=1", "r": 1.0, "a1": 50.0, "batch_size": 4},
                    base | {"kind": "dpdl", "label": "DPDL ε=8", "target_epsilon": 8.0, "target_rounds": 3,
                            "batch_size": 4}]})
    run_campaign(campaign, "# t", tmp_path, progress=False, say=lambda _: None)
    rows = ResultsStore(tmp_path).rows()
    entries = {entry["subject"]: entry for entry in verdict_section(rows, runs_of(rows))["entries"]}
    kinds = {subject: [f["kind"] for f in entry["findings"]] for subject, entry in entries.items()}
    assert kinds["Ternary r=1"] == ["premise violated", "vacuous claim"]
    assert kinds["DPDL ε=8"] == ["outside its theorem's range", "no sound bound"]
    page = render_report(tmp_path).read_text()
    assert page.index("badge finding") < page.index('<table class="verdicts">')


def test_one_rule_for_assumed_constants_and_theorem_ranges():
    """Issue 22: a bound above a claim that rests on assumed constants refutes it only for the
    range of each constant solved from the claim's law (ε ∝ c₂: c₂ < assumed · ε_LB/ε); a claim
    outside its theorem's range is never refuted; the canary and the mechanism audits share the rule."""
    from privaudit.attacks.audit.verdict import decide
    from privaudit.accounting import OUTSIDE_RANGE, AssumedConstant
    from privaudit.campaign.audit_findings import canary_verdict

    c2 = AssumedConstant("c₂", 2.0, 1.0, "ε ∝ c₂")
    h = AssumedConstant("h", 1.0, None, "ε grows with h")
    record = {"eps_lb": 0.4385, "eps_claimed": 0.25, "delta": 1e-5, "confidence": 0.95, "runs_per_side": 200,
              "protocol": "model", "delta_lb": None}
    conditional = canary_verdict(record, _claim_record(eps_claimed=0.25, constants=(c2, h)))
    assert conditional["status"] == "conditionally refuted"
    assert conditional["conditions"][0] == "c₂ < 3.51 (assumed 2)" and "h = 1 as assumed" in conditional["conditions"][1]
    assert canary_verdict(record, _claim_record(eps_claimed=0.25))["status"] == "refuted"
    outside = _claim_record(eps_claimed=0.25, constants=(c2,), findings=((OUTSIDE_RANGE, "Lemma 1 needs q < 1/(32σ)"),))
    verdict = canary_verdict(record, outside)
    assert verdict["status"] == "outside range" and "q < 1/(32σ)" in verdict["reason"]
    assert "c₂ < 3.51 (assumed 2)" in verdict["reason"]
    mechanism = decide(outside, "Thm", exceeds=True, found=True, measured="δ_LB above", ratio=0.4385 / 0.25)
    assert mechanism.status == verdict["status"] and mechanism.conditions == tuple(verdict["conditions"])
    row = {"type": "audit", "cell": "a", "kind": "canary", "subject": "DPDL", "label": "l", "status": "ok",
           "eps_lb": 0.4385, "confidence": 0.95, "eps_claimed": 0.25, "seed": 0, "verdict": conditional,
           "findings": []}
    (entry,) = verdict_section([row], {})["entries"]
    assert entry["status"] == "conditionally refuted" and "c₂ < 3.51 (assumed 2)" in entry["short"]
    assert "one seed" in entry["sentence"]


def test_verdicts_are_listed_most_severe_first_with_the_number_that_decides_each(rows):
    """The list, the table and the figure share one order — refuted, understated, findings, failed,
    inconclusive, consistent, not evaluable, not audited — and each verdict an audit or an
    accountant decided carries its ratio; a verdict below with an analytic finding rises to the
    findings' rank."""
    entries = verdict_section(rows, runs_of([row for row in rows if row.get("type", "training") == "training"]))[
        "entries"]
    assert [(entry["subject"], entry["status"], entry["ratio"]) for entry in entries] == [
        ("Broken", "refuted", "ε_LB 4 = 4 × claimed"),
        ("Alg. 1", "understated", "sound ε 58.5 = 62 × claimed"),
        ("Ternary", "understated", "sound δ 1 = 2 × claimed"),
        ("D-PSGD", "no privacy", ""),
        ("Laplace", "failed", ""),
        ("DP-D-PSGD σ=1", "consistent", "ε_LB 0.9 = 0.45 × claimed"),
        ("Ternary quantizer (seed 004)", "not evaluable", ""),
        ("DPDL", "not audited", "")]
    found = {"status": "consistent", "findings": [{"kind": "premise not enforced", "text": ""}]}
    assert severity(found) == severity({"status": "outside range", "findings": []}) < severity(
        {"status": "consistent", "findings": []})


def test_the_ratio_names_what_decides_each_kind_of_verdict():
    values = {"claimed": 0.25, "sound": None, "eps_lb": 0.44, "of_delta": False, "delta_lb": None}
    assert ratio_text("refuted", values) == "ε_LB 0.44 = 1.8 × claimed"
    assert ratio_text("inconclusive", values | {"eps_lb": 0.0}) == "ε_LB 0 = 0 × claimed"
    assert ratio_text("consistent", values | {"claimed": 0.0}) == "ε_LB 0.44 against a claimed 0"
    assert ratio_text("consistent", values | {"of_delta": True, "eps_lb": None, "delta_lb": 0.098}) == "δ_LB 0.098"
    assert ratio_text("understated", values | {"sound": 72.22, "claimed": 7.166}) == "sound ε 72.22 = 10 × claimed"
    assert ratio_text("not audited", values) == "" and ratio_text("no privacy", values) == ""


def test_a_refuted_claim_below_the_sound_accountant_carries_understated_as_a_finding(tmp_path):
    """Both facts stay visible: the refutation is the status, the accounting error a finding, so
    the report, the JSON and `--fail-on understated` all see it."""
    rows = [_training("t-low", "Low", _claim("(ε, δ)-DP", eps_claimed=2.0, eps_sound=8.0, delta=1e-5)),
            {**_audit("a-low", subject="Low", defense_label="Low", verdict="refuted", eps_lb=3.4, eps_claimed=2.0,
                      eps_sound=8.0), "training": "t-low"}]
    (entry,) = verdict_section(rows, runs_of(rows[:1]))["entries"]
    assert entry["status"] == "refuted" and entry["findings"][0]["kind"] == "understated"
    assert "sound accountant" in entry["findings"][0]["text"]
