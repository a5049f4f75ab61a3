"""Every string a campaign or a results row puts in the report is text, never markup: a label, a
description, a reason or a claim containing `<script>` or a quote that would close an attribute
appears escaped wherever it is shown (the page title, the verdicts, every section, the figures'
alt text), and a "$" in a label is drawn literally in the figures instead of breaking them."""

import re
import shutil

import pytest

from privaudit.store import ResultsStore
from privaudit.reports.html import render_report
from tests.helpers import without_notation

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
ATTRIBUTE = '" onerror="alert(2)'
HOSTILE = f"{SCRIPT}{ATTRIBUTE} $\\notacommand{{x}}$"
"""A script tag, a quote closing an attribute, and a pair of dollars that is invalid mathtext."""

ROC = {"fpr": [0.0, 0.1, 0.5, 1.0], "tpr": [0.0, 0.3, 0.8, 1.0]}


def _claim() -> dict:
    return {"defense": "dp_dpsgd", "notion": HOSTILE, "adjacency": HOSTILE, "eps_claimed": 0.5, "eps_stated": None,
            "eps_sound": 1.0, "delta": 1e-5, "horizon": HOSTILE, "equation": HOSTILE, "sound_method": HOSTILE,
            "assumptions": [HOSTILE], "delta_sound": None, "statements": [HOSTILE]}


def _rows() -> list[dict]:
    training = {
        "type": "training", "cell": "t0", "group": "g0", "defense": "dp_dpsgd", "label": HOSTILE, "title": HOSTILE,
        "seed": 0, "config": {"run": {"rounds": 10, "topology": HOSTILE, "agents": 4, "label": HOSTILE}},
        "metrics": {"avg_acc": 0.8, "agent_acc_mean": 0.7}, "claim": _claim(),
        "history": [{"round": 0, "avg_acc": 0.1, "agent_acc_mean": 0.1}, {"round": 10, "avg_acc": 0.8,
                                                                          "agent_acc_mean": 0.7}],
        "messages": {HOSTILE: 40}, "wall_s": 1.0, "version": HOSTILE}
    inversion = {
        "type": "inversion", "cell": "i0", "group": "gi", "training": "t0", "label": HOSTILE, "attack": "dlg",
        "attack_title": HOSTILE, "defense": "dp_dpsgd", "defense_label": HOSTILE, "defense_table": HOSTILE,
        "setting": {"topology": HOSTILE}, "scenario": HOSTILE, "scenario_needs": HOSTILE, "threat": HOSTILE,
        "victim": 0, "round": 3, "seed": 0, "batch_size": 1, "status": "ok", "stopped_by": HOSTILE, "iterations": 5,
        "metrics": {"mse": 0.01, "psnr": 20.0, "ssim": 0.5}, "baseline": {"mse": 0.1, "psnr": 10.0, "ssim": 0.1},
        "trace": [{"iteration": 0, "mse": 0.1}, {"iteration": 5, "mse": 0.01}], "lpips_status": HOSTILE,
        "artifacts": {"original": HOSTILE}, "wall_s": 0.5, "version": HOSTILE}
    metrics = {"auc": 0.7, "auc_ci": [0.6, 0.8], "tpr@0.01": 0.1, "tpr@0.01_ci": [0.0, 0.2],
               "balanced_accuracy": 0.6, "balanced_accuracy_ci": [0.5, 0.7], "members": 100, "non_members": 100,
               "confidence": 0.95, "roc": ROC}
    membership = {
        "type": "membership", "cell": "m0", "group": "gm", "training": "t0", "label": HOSTILE, "defense": "dp_dpsgd",
        "defense_label": HOSTILE, "defense_table": HOSTILE, "setting": {HOSTILE: HOSTILE}, "target": "intercepted",
        "threat": HOSTILE, "victims": [0], "round": 9, "seed": 0, "references": 2,
        "data": {"members": 100, "non_members": 100, "rmia_population": HOSTILE}, "status": "ok",
        "metrics": {HOSTILE: metrics}, "wall_s": 0.2, "config": {"membership": {"label": HOSTILE}}, "version": "0"}
    audit = {
        "type": "audit", "cell": "a0", "group": "ga", "label": HOSTILE, "seed": 0, "kind": "canary",
        "subject": HOSTILE, "defense": "dp_dpsgd", "defense_label": HOSTILE, "status": "ok", "eps_lb": 0.7,
        "delta_lb": 0.001, "delta_lb_eps": 0.0, "delta": 1e-5, "confidence": 0.95, "samples": 200,
        "eps_claimed": 0.5, "eps_sound": 1.0, "exact": {"eps": 0.9, "delta": 0.01},
        "verdict": {"status": "refuted", "statement": HOSTILE, "reason": HOSTILE},
        "tightness": {"of": "eps", "sound": 0.7, "exact": 0.8},
        "curve": [{"samples": 50, "eps_lb": 0.3, "delta_lb": 0.0}, {"samples": 200, "eps_lb": 0.7, "delta_lb": 0.001}],
        "detail": {"note": HOSTILE}, "wall_s": 2.0, "version": "0"}
    failed_audit = {**audit, "cell": "a1", "group": "gb", "kind": "mechanism", "status": f"failed: {HOSTILE}",
                    "eps_lb": None, "delta_lb": None, "verdict": None, "tightness": None, "curve": None}
    return [training, inversion, membership, audit, failed_audit]


@pytest.fixture
def report(tmp_path):
    store = ResultsStore(tmp_path)
    for row in _rows():
        store.append(row)
    quoted = HOSTILE.replace("\\", "\\\\").replace('"', '\\"')
    store.write_campaign(f'[campaign]\nname = "{quoted}"\ndescription = "{quoted}"\n')
    return render_report(tmp_path, tmp_path / "report.html")


def test_no_campaign_string_becomes_markup(report):
    html = report.read_text()
    assert "<script" not in html.lower()
    assert "alert(1)" in html and 'onerror="' not in html
    assert ESCAPED + "&#34; onerror=&#34;alert(2)" in html


def test_hostile_strings_are_shown_escaped_in_every_section(report):
    html = without_notation(report.read_text())
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert ESCAPED in title
    sections = dict(re.findall(r'<section id="([a-z]+)">(.*?)</section>', html, re.S))
    assert list(sections) == ["verdicts", "claims", "training", "inversion", "membership", "audits", "provenance"]
    for name, body in sections.items():
        assert ESCAPED in body, name
    verdicts = sections["verdicts"]
    assert f"Refuted by its audit (one seed run): {ESCAPED}" in verdicts
    assert f"<dt>Sound</dt><dd>ε 1: {ESCAPED}" in verdicts  # the sound method, in the row's details
    assert f'<span class="muted caption">{ESCAPED}' in verdicts  # the best reconstruction's attack
    assert f'alt="audit bound against samples: {ESCAPED}' in sections["audits"]
    assert f"failed: {ESCAPED}" in sections["audits"]


def test_figures_draw_labels_with_dollars_literally(report):
    html = report.read_text()
    assert html.count('src="data:image/png;base64,') >= 4  # training, trace, ROC, audit curve


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed (make test-browser installs it)")
def test_a_browser_runs_nothing_from_the_campaign(report):
    from privaudit.reports.browser_check import check_report

    line = check_report(report, report.with_suffix(".png"), shutil.which("chromium"))
    assert line.startswith("browser check passed") and report.with_suffix(".png").stat().st_size > 0
