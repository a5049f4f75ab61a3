"""Know before you run, and the answer in the terminal: `privaudit list`, `privaudit check`, the
verdict table `privaudit run` ends with and `privaudit report --format json` (issue 17, items 7–8)."""

import contextlib
import io
import json

import pytest

from privaudit.attacks.audit.mechanisms import MECHANISMS
from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.views import EXTRACTORS
from privaudit.defenses import DEFENSES
from privaudit.campaign.catalogue import CATEGORIES, parameters
from privaudit.cli import main
from privaudit.store import ResultsStore
from privaudit.threats import THREATS
from privaudit.reports.summary import summary

SMALL = """
[campaign]
name = "small"
[data]
dataset = "digits"
[[defense]]
kind = "dpsgd"
label = "D-PSGD (B=1)"
agents = 4
rounds = 2
eval_every = 2
batch_size = 1
[[attack]]
kind = "idlg"
label = "iDLG B=2"
rounds = [0]
batch_size = 2
evaluations = 20
[[attack]]
kind = "idlg"
label = "iDLG"
rounds = [0]
evaluations = 20
[[audit]]
kind = "mechanism"
label = "Ternary"
mechanism = "ternary"
params = { r = 10 }
samples = 10000
"""


def _main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue().strip()


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One small campaign run: training, an attack whose batch_size is not the defense's, one that
    takes the defense's, and a mechanism audit; (results directory, stdout, stderr)."""
    root = tmp_path_factory.mktemp("small")
    path = root / "small.toml"
    path.write_text(SMALL)
    code, out, err = _main("run", str(path), "--out", str(root / "out"), "--quiet")
    assert code == 0, err
    return root / "out", out, err


def test_list_names_every_defense_with_its_parameters_types_and_defaults():
    code, out, _ = _main("list", "defenses")
    assert code == 0 and out.startswith("defenses")
    for kind, cls in DEFENSES.items():
        assert f"\n  {kind} — {cls.title}" in out
        for field in cls.Params.model_fields:
            assert f"\n    {field}: " in out
    assert "\n    lr: float > 0 = 0.1 — step size η" in out
    assert "\n    agents: int ≥ 2 = 8" in out
    assert "attacks" not in out.split("\n", 1)[0]


def test_list_json_parses_narrows_and_names_every_registry():
    code, out, _ = _main("list", "--json")
    assert code == 0
    found = json.loads(out)
    assert list(found) == list(CATEGORIES)
    assert [entry["kind"] for entry in found["defenses"]["kinds"]] == list(DEFENSES)
    inversion = found["attacks"]["inversion"]["kinds"]
    assert [entry["kind"] for entry in inversion] == list(INVERSIONS)
    assert {"lr", "evaluations"} <= {p["name"] for p in inversion[0]["params"]}
    assert [entry["name"] for entry in found["attacks"]["audits"]["mechanisms"]] == list(MECHANISMS)
    assert [(e["defense"], e["scenario"]) for e in found["scenarios"]] == list(EXTRACTORS)
    assert all(e["needs"] for e in found["scenarios"])
    threats = {entry["name"]: entry for entry in found["threats"]}
    assert list(threats) == list(THREATS) and "coalition" in threats
    assert all(entry["description"] for entry in threats.values())
    assert {f["name"] for f in threats["coalition"]["fields"]} == {"agents", "window"}

    code, out, _ = _main("list", "threats", "--json")
    assert code == 0 and list(json.loads(out)) == ["threats"]


def test_parameters_read_types_bounds_and_defaults_off_the_validating_schema():
    by_name = {p["name"]: p for p in parameters(INVERSIONS["ig"])}
    assert by_name["optimizer"]["type"] == '"lbfgs" | "adam"' and by_name["optimizer"]["default"] == "lbfgs"
    assert by_name["iterations"]["type"] == "int ≥ 1"
    assert by_name["milestones"]["default"] == [0.375, 0.625, 0.875]


def test_list_of_an_unknown_category_is_one_line_and_help_names_every_category(capsys, monkeypatch):
    code, _, err = _main("list", "defence")
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("privaudit: error: list: unknown category 'defence' (choose from defenses, attacks")
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    shown = capsys.readouterr().out
    assert all(category in shown for category in CATEGORIES), shown


def test_check_of_the_demo_passes_without_training_or_writing(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("check trained a run")

    monkeypatch.setattr("privaudit.campaign.jobs.simulate", no_training)
    out = tmp_path / "out"
    code, printed, err = _main("check", "privaudit/presets/demo.toml", "--out", str(out))
    assert code == 0 and all(line.strip().startswith(("checking jobs:", "timing jobs:")) for line in err.splitlines())
    summary, *said = printed.strip().splitlines()
    timing = next(i for i, line in enumerate(said) if line.startswith("time of each cell"))
    reach, estimates = said[:timing], said[timing:]
    assert reach[0].startswith("what each canary audit can show") and len(reach) > 1
    assert all("an error-free" in line or "every guess right" in line for line in reach[1:])
    assert len(estimates) == 1 + 23 + 1 and all("an estimate" in line for line in estimates)
    assert summary.startswith("campaign 'demo' passes every pre-flight check: 23 cells (11 training, 4 attack, "
                              "2 membership, 6 audit).")
    assert "DPDL ε=0.25 (canary-sized) (dpdl)" in summary and "Canary, one run (canary audit)" in summary
    assert summary.endswith("a run would compute all 23 (none in " + str(out) + " yet).")
    assert not out.exists()


@pytest.mark.parametrize("body, expected", [
    ('[[defense]]\nkind = "dpsgd"\nrounds = 3\n[[attack]]\nkind = "idlg"\nrounds = [5]\n',
     "the 'state_difference' extractor reads round 6, but 'dpsgd' runs 3 rounds"),
    ('[[defense]]\nkind = "dpsgd"\ntopology = "rng"\n', "defense[0].topology: unknown topology 'rng'"),
])
def test_check_of_a_bad_campaign_exits_2_in_one_line(tmp_path, body, expected):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    code, printed, err = _main("check", str(path))
    assert code == 2 and printed == ""
    assert len(err.splitlines()) == 1 and err.startswith("privaudit: error:") and expected in err


def test_a_defense_table_without_agents_is_warned_about_at_check_and_run(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[defense]]\nkind = "dpsgd"\nlabel = "plain"\n'
                    '[[defense]]\nkind = "dpsgd"\nlabel = "gridded"\ngrid = { agents = [4, 6] }\n'
                    '[[defense]]\nkind = "dpsgd"\nlabel = "given"\nagents = 4\n')
    code, _, err = _main("check", str(path), "--out", str(tmp_path / "out"))
    assert code == 0
    assert err == "privaudit: warning: defense[0] (plain): agents not given; the default 8 is used"
    path.write_text('[[defense]]\nkind = "dpsgd"\nrounds = 2\neval_every = 2\n')
    code, _, err = _main("run", str(path), "--out", str(tmp_path / "out"), "--quiet")
    assert code == 0 and "defense[0] (dpsgd): agents not given; the default 8 is used" in err
    path.write_text('[[defense]]\nkind = "dpsgd"\nbatch_size = 5000\n')
    code, _, err = _main("run", str(path), "--out", str(tmp_path / "bad"), "--quiet")
    warning, error = err.splitlines()
    assert code == 2 and warning.startswith("privaudit: warning: defense[0]") and error.startswith("privaudit: error:")
    code, _, err = _main("check", str(path))
    assert code == 2 and err.startswith("privaudit: error:") and len(err.splitlines()) == 1


def test_run_ends_with_the_verdict_table(small_run):
    out, printed, _ = small_run
    lines = printed.rstrip().splitlines()
    verdicts = summary(out)["verdicts"]
    table = lines[-len(verdicts) - 2:]
    assert table[0].split("  ")[0] == "defense run / audit" and "empirical ε_LB (estimate)" in table[0]
    assert set(table[1]) == {"-", " "}
    assert [line.split("  ")[0] for line in table[2:]] == [record["subject"] for record in verdicts]
    assert table[2].endswith("no privacy") and "consistent" in table[3]
    assert "δ ≥ " in table[3]


def test_report_format_json_prints_the_same_summary(small_run, tmp_path):
    out, _, _ = small_run
    code, printed, _ = _main("report", str(out), "--format", "json")
    assert code == 0
    found = json.loads(printed)
    assert found == json.loads(json.dumps(summary(out)))
    statuses = {record["subject"]: record["status"] for record in found["verdicts"]}
    assert statuses["D-PSGD (B=1)"] == "no privacy"
    audit = found["verdicts"][-1]
    assert audit["kind"] == "mechanism audit" and audit["delta_lb"] > 0 and audit["eps_lb"] is None
    code, printed, _ = _main("report", str(out), "--format", "json", "-o", str(tmp_path / "v.json"))
    assert code == 0 and json.loads((tmp_path / "v.json").read_text()) == found


def test_an_attack_batch_other_than_the_defenses_is_warned_in_its_row_and_the_report(small_run):
    out, _, _ = small_run
    rows = {row["label"]: row for row in ResultsStore(out).rows() if row.get("type") == "inversion"}
    assert rows["iDLG"]["warnings"] == []
    assert rows["iDLG B=2"]["warnings"] == ["batch_size 2 differs from the defense's public batch size 1: the "
                                            "attack rebuilds 2 image(s) from messages computed on batches of 1"]
    html = (out / "report.html").read_text()
    assert "Warning, D-PSGD (B=1) · iDLG B=2: batch_size 2 differs from the defense&#39;s public batch size 1" in html
    assert "Warning, D-PSGD (B=1) · iDLG:" not in html


def test_the_verdict_table_names_analytic_findings_beside_the_status():
    from privaudit.reports.summary import summary_table

    record = {"subject": "Ternary quantization", "eps_claimed": "0", "eps_sound": "—", "eps_lb": None, "bound": None,
              "eps_estimate": None, "status": "not audited", "findings": ["premise violated", "vacuous claim"]}
    assert summary_table({"verdicts": [record]}).splitlines()[-1].endswith(
        "not audited (premise violated, vacuous claim)")
