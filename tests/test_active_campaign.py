"""Issue 39 in campaign files: `threat = "malicious"` with an `[[attack]] kind = "trap_weights"` table
runs end to end, its row is an inversion row with an `active` record and the passive attack on the
same run beside it, its assumptions are refused in one line at `check`, `privaudit list` names the
defenses it applies to, and the report shows active beside passive."""

import math
import re

import pytest

from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError
from privaudit.reports.html import render_report
from privaudit.rows import InversionRow
from tests.helpers import campaign_file, one_line_error

RING = {"kind": "dpsgd", "label": "D-PSGD", "topology": "ring", "agents": 4, "rounds": 4, "eval_every": 4,
        "model": "mlp", "model_options": {"hidden": [256]}, "lr": 0.1, "batch_size": 16}
TRAP = {"kind": "trap_weights", "label": "trap", "threat": "malicious", "agents": [1, 3], "rounds": [1]}


def _raw(attack=TRAP, defense=RING):
    return {"campaign": {"name": "t", "seeds": [0]}, "data": {"dataset": "digits"}, "defense": [defense],
            "attack": [attack]}


def _toml(tmp_path, attack=TRAP, defense=RING):
    return campaign_file(tmp_path / "active.toml", defense, "attack", attack)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    out = tmp_path_factory.mktemp("active")
    store = run_campaign(parse_campaign(_raw()), "# test", out, progress=False, say=lambda line: None)
    return out, store.rows()


def test_the_campaign_runs_and_its_row_is_an_inversion_row_with_the_passive_attack_beside(ran):
    out, rows = ran
    assert [row["type"] for row in rows] == ["training", "inversion"]
    row = rows[1]
    InversionRow.model_validate(row)
    assert row["attack"] == "trap_weights" and row["threat"] == "malicious" and row["status"] == "ok"
    assert row["metrics"]["psnr"] > 40 and row["leak"]["leak"] is True
    assert (out / row["artifacts"]["reconstruction"]).is_file()
    active = row["active"]
    assert (active["liar"], active["agents"], active["victim"], active["round"]) == (1, [1, 3], 0, 1)
    assert any("rushing" in line for line in active["assumptions"])
    assert active["sent"]["to"] == 0 and active["sent"]["message_norm"] > 0
    assert len(active["active"]["psnr"]) == len(active["passive"]["psnr"]) == active["records"] == 16
    assert active["passive"]["label"] == "passive (the same agents listening)"
    assert active["active"]["recovered"] >= 12 > active["passive"]["recovered"]
    assert math.isfinite(active["passive"]["metrics"]["psnr"])


def test_a_row_whose_active_record_lacks_its_passive_side_does_not_validate(ran):
    row = dict(ran[1][1])
    row["active"] = {key: value for key, value in row["active"].items() if key != "passive"}
    with pytest.raises(ValueError, match="passive"):
        InversionRow.model_validate(row)


def test_the_report_shows_active_beside_passive(ran, tmp_path):
    out, _ = ran
    render_report(out, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    section = page.index('<section id="active">')
    assert "Participants who lie" in page[section:section + 200]
    assert "Claim's threat model: <strong>none: the run claims no privacy</strong>" in page[section:]
    active = page.index("active (malicious neighbour sent crafted messages)", section)
    passive = page.index("passive (the same agents listening)")
    assert 0 < passive - active < 600


@pytest.mark.parametrize("attack, defense, error", [
    ({**TRAP, "agents": [1]}, RING, r"malicious agents \[1\] cannot steer and read agent 0: .*give agents"),
    ({**TRAP, "rounds": [2]}, RING, "reads the victim's release from round 4, but the run has rounds 0..3"),
    ({**TRAP, "liar": 2, "agents": [1, 2, 3]}, RING, "the liar 2 must be a neighbour of the victim 0"),
    ({**TRAP, "threat": "global_listener"}, RING, "attack\\[0\\].threat: the trap_weights attack lies"),
    ({"kind": "analytic", "threat": "malicious", "rounds": [1]}, RING, "attack\\[0\\].kind: the malicious threat"),
    ({**TRAP, "bound_trials": 5}, RING, "an active attack plays no reconstruction game"),
])
def test_check_refuses_what_the_plan_cannot_do_in_one_line(tmp_path, capsys, attack, defense, error):
    err = one_line_error(capsys, ["check", _toml(tmp_path, attack, defense), "--out", str(tmp_path / "out")])
    assert re.search(error, err), err


def test_the_malicious_threat_is_refused_on_other_tables():
    raw = _raw() | {"membership": [{"threat": "malicious", "rounds": [1]}]}
    with pytest.raises(ConfigError, match="membership\\[0\\].threat: the malicious threat speaks through an active"):
        parse_campaign(raw)


def test_privaudit_list_names_the_defenses_the_active_attack_applies_to(capsys):
    assert main(["list", "attacks"]) == 0
    printed = capsys.readouterr().out
    line = printed.index("trap_weights — active")
    assert "applies to: dpsgd, dp_dpsgd, muffliato, dpdl, ternary, lt_admm_dp, tvss_gradient, tvss_output" in \
        printed[line:line + 800]
    assert main(["list", "threats"]) == 0
    assert "malicious" in capsys.readouterr().out
