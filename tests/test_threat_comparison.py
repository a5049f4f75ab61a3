"""Threat models side by side (issue 17, item 6): an attack whose attacker cannot hear what it
needs is a row saying so and the campaign goes on; one run attacked by several threat models is
compared in one table of the report."""

from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.reports.html import render_report
from privaudit.reports.threat_comparison import threat_comparisons

DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "topology": "ring", "rounds": 2, "eval_every": 2,
         "batch_size": 1, "lr": 0.1}
ATTACK = {"kind": "idlg", "rounds": [0], "victim": 0}


def test_an_eavesdropper_on_one_link_and_a_global_listener_against_the_same_run(tmp_path):
    campaign = parse_campaign({
        "campaign": {"name": "threats"}, "data": {"dataset": "digits"}, "defense": [DPSGD],
        "attack": [ATTACK | {"label": "listener", "threat": "global_listener"},
                   ATTACK | {"label": "one link", "threat": "eavesdropper", "links": [[0, 1]]},
                   ATTACK | {"label": "neighbour", "threat": "curious_neighbour", "observer": 1}]})
    store = run_campaign(campaign, "# t", tmp_path, progress=False, say=lambda _: None)
    rows = {row["label"]: row for row in store.rows() if row["type"] == "inversion"}
    assert rows["listener"]["status"] == "ok" and rows["listener"]["metrics"]["psnr"] > 30
    link = rows["one link"]
    assert link["status"].startswith("not possible for this attacker: the eavesdropper tap")
    assert "does not hear agent 3's broadcasts" in link["status"] and link["metrics"]["psnr"] is None
    (table,) = threat_comparisons(store.rows())
    names = [a["name"] for a in table["attackers"]]
    assert names == ["global listener", "eavesdropper on 0–1", "curious neighbour 1"]
    assert table["attackers"][1]["cells"][0]["status"].startswith("not possible")
    page = render_report(tmp_path).read_text()
    assert "Threat models side by side" in page and "not possible for this attacker" in page
