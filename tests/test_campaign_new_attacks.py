"""The attack kinds of issue 16, item 3, from a campaign's [[attack]] table: "analytic" (exact
on an MLP, a failed row with its reason on a model it cannot read) and "batch", each named by its
title in the row the report reads."""

import math

from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.reports.html import render_report

EXACT_DB = 100.0


def _campaign(model: str, attack: dict, batch_size: int = 1):
    defense = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "rounds": 2, "eval_every": 2,
               "batch_size": batch_size, "lr": 0.1, "model": model}
    return parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": {"dataset": "digits"},
                           "defense": [defense], "attack": [{"rounds": [0], **attack}]})


def _inversion_row(campaign, out):
    store = run_campaign(campaign, "# test", out, progress=False, say=lambda line: None)
    (row,) = [row for row in store.rows() if row["type"] == "inversion"]
    return row


def test_the_analytic_attack_runs_from_a_campaign_and_is_named_in_its_row(tmp_path):
    row = _inversion_row(_campaign("mlp", {"kind": "analytic"}), tmp_path)
    assert row["status"] == "ok" and row["stopped_by"] == "closed form"
    assert row["attack"] == "analytic" and row["attack_title"] == "Analytic (first fully connected layer)"
    assert row["metrics"]["psnr"] > EXACT_DB and row["metrics"]["label_acc"] == 1.0
    page = render_report(tmp_path).read_text()
    assert '<span class="muted">Analytic (first fully connected layer)</span></td>' in page
    assert '<td class="num">—</td><td>closed form</td>' in page


def test_a_campaign_on_a_model_it_cannot_read_records_a_failed_row(tmp_path):
    row = _inversion_row(_campaign("lenet_dlg", {"kind": "analytic"}), tmp_path)
    assert row["status"].startswith("failed: the analytic attack needs a first layer that is fully connected")
    assert row["metrics"]["psnr"] is None and not math.isnan(row["wall_s"])


def test_batch_inversion_runs_from_a_campaign_with_its_parameters(tmp_path):
    attack = {"kind": "batch", "label": "batch", "evaluations": 20, "tv_weights": [1e-2, 1e-3]}
    row = _inversion_row(_campaign("mlp", attack, batch_size=4), tmp_path)
    assert row["status"] == "ok" and row["attack_title"] == "Batch inversion"
    assert row["iterations"] == 40 and row["batch_size"] == 4 and row["metrics"]["psnr"] > 0
