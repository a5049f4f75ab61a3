"""The report's membership-inference section, rendered from hand-written rows: the lead's verdict
against chance, tables with intervals or mean ± std over seeds, TPR at an FPR the non-members
cannot resolve shown as not resolvable, inline log-log ROC figures, the AUC-against-ε figure only
when a table covers runs at different ε, failed cells with their reasons, and escaping."""

import base64
import re

import pytest

from privaudit.store import ResultsStore
from privaudit.reports.html import render_report
from privaudit.reports.membership import needed_non_members, resolvable
from tests.helpers import without_notation

SCRIPT = "<script>alert(1)</script>"
FAILURE = "failed: reference model 3 gives a non-finite loss on some records (diverged training?)"
ROC = {"fpr": [0.0, 0.0, 0.01, 0.1, 0.5, 1.0], "tpr": [0.0, 0.1, 0.2, 0.45, 0.8, 1.0]}


def _claim(eps_sound: float | None) -> dict:
    if eps_sound is None:
        return {"notion": "none", "adjacency": "none", "eps_claimed": None, "eps_stated": None, "eps_sound": None,
                "delta": None, "horizon": 300, "equation": "no privacy claimed", "sound_method": "-",
                "assumptions": []}
    return {"notion": "(ε, δ)-DP", "adjacency": "add/remove", "eps_claimed": eps_sound * 1.2, "eps_stated": None,
            "eps_sound": eps_sound, "delta": 1e-5, "horizon": 300, "equation": "RDP", "sound_method": "PLD",
            "assumptions": []}


def _training_row(cell: str, label: str, seed: int = 0, eps_sound: float | None = None) -> dict:
    return {
        "type": "training", "cell": cell, "group": f"group-{label}", "defense": "dpsgd", "label": label,
        "title": "D-PSGD", "seed": seed, "config": {"run": {"rounds": 300, "topology": "ring", "agents": 10}},
        "metrics": {"avg_acc": 0.9, "agent_acc_mean": 0.88}, "claim": _claim(eps_sound),
        "history": [{"round": 0, "avg_acc": 0.1, "agent_acc_mean": 0.1},
                    {"round": 300, "avg_acc": 0.9, "agent_acc_mean": 0.88}],
        "messages": {"model": 6000}, "wall_s": 1.0, "version": "0",
    }


def _metrics(auc: float, auc_ci: list[float], tpr1: float, tpr1_ci: list[float], non_members: int) -> dict:
    return {
        "auc": auc, "auc_ci": auc_ci,
        "tpr@0.001": 0.05, "tpr@0.001_ci": [0.0, 0.1],
        "tpr@0.01": tpr1, "tpr@0.01_ci": tpr1_ci,
        "balanced_accuracy": 0.66, "balanced_accuracy_ci": [0.58, 0.74],
        "members": 30, "non_members": non_members, "confidence": 0.95, "bootstrap": 1000, "roc": ROC,
    }


def _membership_row(cell: str, training: str, run: str, *, table: str = "MIA", round_: int | None = 299,
                    seed: int = 0, auc: float = 0.73, auc_ci: tuple = (0.60, 0.85), tpr1: float = 0.2,
                    tpr1_ci: tuple = (0.08, 0.35), non_members: int = 100, status: str = "ok",
                    rmia_a: tuple | None = (0.45, "chosen on reference models")) -> dict:
    ok = status == "ok"
    return {
        "type": "membership", "cell": cell, "group": f"g-{table}-{run}-{round_}", "training": training,
        "label": table, "defense": "dpsgd", "defense_label": run, "defense_table": run,
        "setting": {"topology": "ring", "agents": 10},
        "target": "average" if round_ is None else "intercepted",
        "threat": "output" if round_ is None else "curious_neighbour", "victims": [0], "round": round_,
        "seed": seed, "references": 8, "reference_seeds": list(range(8)), "reference_wall_s": 2.0,
        "data": {"members": 30, "non_members": non_members, "rmia_population": 200, "reference_pool": 600},
        "status": status,
        "metrics": {method: (_metrics(auc - shift, [auc_ci[0] - shift, auc_ci[1] - shift], tpr1, list(tpr1_ci),
                                      non_members) if ok else None)
                    for method, shift in (("loss", 0.1), ("lira", 0.0), ("rmia", 0.02))},
        **({"rmia_a": rmia_a[0], "rmia_a_from": rmia_a[1]} if ok and rmia_a else {}),
        "artifacts": {"scores": f"artifacts/{cell}/scores.npz"} if ok else {},
        "score_wall_s": 0.1, "wall_s": 2.1, "config": {"membership": {"label": table}, "round": round_},
        "version": "0",
    }


def _render(directory, rows: list[dict]) -> str:
    store = ResultsStore(directory)
    for row in rows:
        store.append(row)
    return without_notation(render_report(directory, directory / "report.html").read_text())


def _section(html: str) -> str:
    return html[html.index('<section id="membership">'):html.index('<section id="provenance">')]


def _lead(html: str) -> str:
    return _section(html).split("<ul>")[1].split("</ul>")[0]


@pytest.fixture
def one_seed(tmp_path):
    """D-PSGD (no DP) attacked at round 299 with 100 non-members and a clear signal."""
    return _render(tmp_path, [_training_row("t0", "D-PSGD"), _membership_row("m0", "t0", "D-PSGD")])


def test_resolution_needs_one_over_fpr_non_members():
    assert needed_non_members(0.001) == 1000 and needed_non_members(0.01) == 100
    assert resolvable(0.01, 100) and not resolvable(0.01, 99)
    assert resolvable(0.001, 1000) and not resolvable(0.001, 30)


def test_table_shows_auc_with_interval_and_the_lead_states_leakage(one_seed):
    section = _section(one_seed)
    assert "<h2>Membership inference</h2>" in section
    assert '<td class="num">0.73<br><span class="muted">[0.60, 0.85]</span></td>' in section
    assert '<td class="num">0.63<br><span class="muted">[0.50, 0.75]</span></td>' in section  # LOSS
    assert '<td class="num">20 %<br><span class="muted">[8 %, 35 %]</span></td>' in section
    assert "<th>TPR@0.1 %</th>" in section and "<th>TPR@1 %</th>" in section
    lead = _lead(one_seed)
    assert ("MIA: LiRA on D-PSGD&#39;s intercepted model at round 299 tells members from non-members with "
            "AUC 0.73 [0.60, 0.85] (chance 0.5).") in lead
    assert "It finds 20 % [8 %, 35 %] of members at 1 % false positives (chance 1 %)." in lead
    assert "Privacy of the run: no DP." in lead
    assert "no detectable" not in lead


def test_the_table_states_rmia_a_and_how_it_was_set(one_seed, tmp_path):
    assert '<span class="muted">RMIA a</span> 0.45 (chosen on reference models)</td>' in _section(one_seed)
    rows = [_training_row("t0", "D-PSGD"), _training_row("t1", "D-PSGD", seed=1),
            _membership_row("m0", "t0", "D-PSGD", rmia_a=(0.3, "paper's value 0.3")),
            _membership_row("m1", "t1", "D-PSGD", seed=1, rmia_a=(0.5, "set by the campaign"))]
    section = _section(_render(tmp_path / "two", rows))
    assert '<span class="muted">RMIA a</span> 0.3 (paper&#39;s value 0.3); 0.5 (set by the campaign)</td>' in section
    old = _section(_render(tmp_path / "old", [_training_row("t0", "D-PSGD"),
                                             _membership_row("m0", "t0", "D-PSGD", rmia_a=None)]))
    assert '<span class="muted">RMIA a</span> not stored</td>' in old


def test_interval_containing_chance_is_not_called_leakage(tmp_path):
    html = _render(tmp_path, [_training_row("t0", "D-PSGD"),
                              _membership_row("m0", "t0", "D-PSGD", auc=0.55, auc_ci=(0.41, 0.68))])
    lead = _lead(html)
    assert "AUC 0.55 [0.41, 0.68] (chance 0.5), no detectable membership leakage at this sample size" in lead
    assert "tells members" not in lead


def test_tpr_at_an_fpr_below_one_over_non_members_is_not_resolvable(tmp_path):
    html = _render(tmp_path, [_training_row("t0", "D-PSGD"), _membership_row("m0", "t0", "D-PSGD", non_members=30)])
    section = _section(html)
    assert '<td class="num">n/a<br><span class="muted">needs ≥ 1000 non-members</span></td>' in section
    assert '<td class="num">n/a<br><span class="muted">needs ≥ 100 non-members</span></td>' in section
    assert "5 %" not in section.split("<h3>MIA</h3>")[1].split('<table class="membership">')[1].split("</table>")[0]  # the stored 0.05 is hidden
    assert "Its TPR at 1 % false positives is not resolvable with 30 non-members (needs ≥ 100)." in _lead(html)


def test_tpr_at_one_percent_is_shown_with_enough_non_members(one_seed):
    section = _section(one_seed)
    assert section.count("needs ≥ 1000 non-members") == 3  # TPR@0.1 % of each method
    assert "needs ≥ 100 non-members" not in section


def test_roc_figure_is_an_inline_png(one_seed):
    found = re.search(r'alt="membership ROC, log-log: MIA · D-PSGD · round 299" src="data:image/png;base64,([^"]+)"',
                      one_seed)
    assert found
    assert base64.b64decode(found.group(1)).startswith(b"\x89PNG\r\n\x1a\n")


def test_several_seeds_give_mean_and_std(tmp_path):
    rows = [_training_row("t0", "D-PSGD", 0), _training_row("t1", "D-PSGD", 1),
            _membership_row("m0", "t0", "D-PSGD", seed=0, auc=0.70, auc_ci=(0.58, 0.82)),
            _membership_row("m1", "t1", "D-PSGD", seed=1, auc=0.76, auc_ci=(0.48, 0.90))]
    html = _render(tmp_path, rows)
    assert '<td class="num">0.73 ± 0.03<br><span class="muted">2 seeds</span></td>' in _section(html)
    assert ("AUC 0.73 ± 0.03 over 2 seeds (chance 0.5); the 95 % interval lies above 0.5 in only 1 of 2 seeds"
            in _lead(html))


def test_auc_against_epsilon_appears_only_for_runs_at_different_epsilon(tmp_path_factory):
    alt = 'alt="membership AUC against sound ε: MIA · final average: AUC against sound ε"'
    rows = [_training_row("t0", "D-PSGD"), _training_row("t1", "DP σ=1", eps_sound=2.0),
            _training_row("t2", "DP σ=2", eps_sound=0.8)]
    rows += [_membership_row(f"m{k}", f"t{k}", run, round_=None, auc=auc, auc_ci=(auc - 0.1, auc + 0.1))
             for k, (run, auc) in enumerate([("D-PSGD", 0.8), ("DP σ=1", 0.6), ("DP σ=2", 0.52)])]
    html = _render(tmp_path_factory.mktemp("three"), rows)
    assert html.count(alt) == 1
    assert '<td rowspan="3">DP σ=1</td><td rowspan="3">final average</td><td rowspan="3">ε 2</td>' in _section(html)
    assert "sound ε 0.8 (claimed 0.96, δ 1e-05)" in _section(html)

    single = _render(tmp_path_factory.mktemp("single"), rows[1:2] + rows[4:5])
    assert "AUC against sound ε" not in single
    same = [_training_row("t1", "DP σ=1", eps_sound=2.0), _training_row("t2", "DP other", eps_sound=2.0),
            _membership_row("m1", "t1", "DP σ=1", round_=None), _membership_row("m2", "t2", "DP other", round_=None)]
    assert "AUC against sound ε" not in _render(tmp_path_factory.mktemp("same"), same)


def test_failed_cell_is_listed_with_its_reason(tmp_path):
    rows = [_training_row("t0", "D-PSGD"), _membership_row("m0", "t0", "D-PSGD"),
            _membership_row("m1", "t0", "D-PSGD", round_=100, status=FAILURE)]
    html = _render(tmp_path, rows)
    section = _section(html)
    failures = section.split("<h3>Failed membership cells</h3>")[1].split("</table>")[0]
    assert failures.count("<tr>") == 2
    assert "<td>round 100</td>" in failures and "<code>m1</code>" in failures
    assert f"<td>{FAILURE}</td>" in failures
    assert "all failed" in section and "1 of 2 cells failed." in _lead(html)


def test_campaign_strings_are_escaped(tmp_path):
    rows = [_training_row("t0", SCRIPT),
            _membership_row("m0", "t0", SCRIPT, table=SCRIPT),
            _membership_row("m1", "t0", SCRIPT, table=SCRIPT, round_=100, status=f"failed: {SCRIPT}")]
    html = _render(tmp_path, rows)
    assert "<script>" not in html
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<h3>{escaped}</h3>" in _section(html)
    assert f"<td>failed: {escaped}</td>" in _section(html)


def test_provenance_describes_membership_rows(tmp_path):
    rows = [_training_row("t0", "D-PSGD"), _membership_row("m0", "t0", "D-PSGD"),
            _membership_row("m1", "t0", "D-PSGD", table="MIA avg", round_=None)]
    provenance = _render(tmp_path, rows).split('<section id="provenance">')[1]
    assert "<td>membership</td><td>D-PSGD · MIA, round 299" in provenance
    assert "D-PSGD · MIA avg, final average model" in provenance
    assert "attacked cell <code>t0</code>" in provenance
    assert "scores.npz" in provenance


def test_no_membership_rows_no_section(tmp_path):
    assert '<section id="membership">' not in _render(tmp_path, [_training_row("t0", "D-PSGD")])


@pytest.mark.slow
def test_a_real_campaign_renders_its_stored_numbers(tmp_path):
    """End to end: a tiny campaign with an undefended and a DP run, its report showing each
    row's stored AUC, an ROC figure per run and the AUC-against-ε figure."""
    from privaudit.campaign.config import parse_campaign
    from privaudit.campaign.run import run_campaign

    run = {"agents": 4, "rounds": 20, "eval_every": 20, "batch_size": 5, "lr": 0.5, "model": "mlp"}
    campaign = parse_campaign({
        "campaign": {"name": "t", "seeds": [0]}, "data": {"dataset": "digits", "max_train": 80, "test_fraction": 0.5},
        "defense": [{"kind": "dpsgd", "label": "plain", **run},
                    {"kind": "dp_dpsgd", "label": "private", "noise_multiplier": 1.0, **run}],
        "membership": [{"label": "MIA", "target": "average", "references": 2, "bootstrap": 50}],
    })
    store = run_campaign(campaign, "# test", tmp_path, progress=False, say=lambda line: None)
    section = _section(render_report(tmp_path, tmp_path / "report.html").read_text())
    for row in store.rows():
        if row.get("type") == "membership":
            lira = row["metrics"]["lira"]
            assert (f'<td class="num">{lira["auc"]:.2f}<br><span class="muted">'
                    f'[{lira["auc_ci"][0]:.2f}, {lira["auc_ci"][1]:.2f}]</span></td>') in section
    assert section.count('alt="membership ROC, log-log:') == 2
    assert section.count('alt="membership AUC against sound ε:') == 1
