"""The privacy gate (`privaudit.reports.gate`, `--fail-on`): a run or a report exits 1 when a verdict has a
status the flag names, 0 otherwise, and writes the verdicts as JSON and as a JUnit suite a CI
system parses. The refuted case runs in `tests/test_law_free_audit.py` (a third-party defense
whose claim the law-free canary audit refutes)."""

import json
import xml.etree.ElementTree as ElementTree

import pytest

from privaudit.cli import main
from privaudit.errors import UsageError
from privaudit.reports.gate import junit, statuses
from tests.helpers import one_line_error

CAMPAIGN = ('[campaign]\nname = "gate"\n[data]\ndataset = "digits"\nmax_train = 60\n[[defense]]\nkind = "dp_dpsgd"\n'
            'label = "DP"\nagents = 3\nrounds = 2\neval_every = 2\nmodel = "logreg"\nbatch_size = 4\n'
            'noise_multiplier = 1.0\n')


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """A run without a refuted verdict, gated on refuted."""
    folder = tmp_path_factory.mktemp("gate")
    (folder / "c.toml").write_text(CAMPAIGN)
    code = main(["run", str(folder / "c.toml"), "--out", str(folder / "out"), "--quiet", "--fail-on", "refuted"])
    return code, folder / "out"


def test_a_run_without_the_gated_verdict_passes_and_writes_its_verdicts(gated, capsys):
    code, out = gated
    assert code == 0
    suite = ElementTree.parse(out / "verdicts.junit.xml").getroot()
    assert suite.get("failures") == "0" and int(suite.get("tests")) == 1
    assert json.loads((out / "verdicts.json").read_text())["verdicts"][0]["subject"] == "DP"


def test_a_report_gated_on_a_verdict_present_fails_and_names_it(gated, capsys):
    _, out = gated
    status = json.loads((out / "verdicts.json").read_text())["verdicts"][0]["status"]
    assert main(["report", str(out), "--fail-on", f"refuted,{status}"]) == 1
    err = capsys.readouterr().err
    assert f"privacy gate failed: 1 of 1 verdicts refuted or {status}: DP ({status})" in err
    assert ElementTree.parse(out / "verdicts.junit.xml").getroot().get("failures") == "1"


def test_an_unknown_verdict_is_refused_before_any_work(tmp_path, capsys):
    err = one_line_error(capsys, ["run", "--fail-on", "refutd", "--out", str(tmp_path / "o"), "--quiet"])
    assert "--fail-on: unknown verdict 'refutd'" in err and not (tmp_path / "o").exists()
    with pytest.raises(UsageError):
        statuses(["refuted, nope"])
    assert statuses(["refuted", "understated,refuted"]) == ["refuted", "understated"]


def test_the_junit_suite_parses_whatever_the_subjects_hold():
    found = {"verdicts": [{"subject": "a <b> & \x1b[31m\x00", "status": "refuted", "eps_claimed": "1", "eps_sound": "—",
                           "eps_lb": 2.0, "eps_estimate": None}]}
    suite = ElementTree.fromstring(junit(found, ["refuted"]).split("\n", 1)[1])
    assert suite.get("failures") == "1" and suite[0].get("name") == "a <b> & \\x1b[31m\\x00"


def test_one_seed_shows_its_value_without_a_spread(gated):
    """Issue 27, item 2: "±" only with several seeds (a "± 0.000" reads as a measured spread)."""
    _, out = gated
    page = (out / "report.html").read_text()
    training = page[page.index('<section id="training">'):]
    training = training[:training.index("</section>")]
    table = training.split("</table>", 1)[0]
    assert "accuracy" in table and "±" not in table


def test_a_refuted_claim_that_is_also_understated_fails_a_gate_on_either():
    """A claim below the sound accountant that an audit also refutes is "refuted" with the finding
    "understated": `--fail-on understated` must not pass it (a newcomer's plugin hit this)."""
    from privaudit.reports.gate import failing, gate_line

    found = {"verdicts": [{"subject": "mine", "status": "refuted", "findings": ["understated"], "eps_claimed": "2",
                           "eps_sound": "8", "eps_lb": 3.4, "eps_estimate": 7.8},
                          {"subject": "other", "status": "consistent", "findings": [], "eps_claimed": "2",
                           "eps_sound": "1", "eps_lb": 0.5, "eps_estimate": 0.9}]}
    assert [record["subject"] for record in failing(found, ["understated"])] == ["mine"]
    assert gate_line(found, ["understated"]) == ("privacy gate failed: 1 of 2 verdicts understated: "
                                                 "mine (refuted, understated)")
    failure = ElementTree.fromstring(junit(found, ["understated"])).find("testcase/failure")
    assert failure.get("type") == "understated"
