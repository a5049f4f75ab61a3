"""The command line: one-line errors with exit code 2, results and report on success."""

import json

import pytest

from privaudit.campaign.config import load_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError
from privaudit.store import ResultsStore
from tests.helpers import one_line_error
from privaudit.reports.html import render_report

TINY = """
[campaign]
name = "tiny"
seeds = [0, 1]
[data]
dataset = "digits"
[[defense]]
kind = "dpsgd"
label = "{label}"
agents = 4
rounds = 4
eval_every = 2
batch_size = 8
"""


def _error(capsys, *argv):
    """The exit code and stderr without its warnings (a table that leaves `agents` to its default
    is warned about before the run's pre-flight checks, which may then fail)."""
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    return code, "\n".join(line for line in err if not line.startswith("privaudit: warning:"))


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[[defense]]\nkind = "dpsgd"\ntopology = "rng"\n',
         "defense[0].topology: unknown topology 'rng' (choose from ring, line,"),
        ('[data]\ndataset = "digts"\n[[defense]]\nkind = "dpsgd"\n', "data.dataset: unknown dataset 'digts'"),
        ('[[defense]]\nkind = "dpsgd"\nlrr = 0.1\n', "defense[0].lrr: unknown field"),
        ('[[defense]]\nkind = "dpsgd"\nlr = -1\n', "defense[0].lr: Input should be greater than 0"),
        ('[[defense]]\nkind = "nope"\n', "defense[0].kind: unknown defense 'nope'"),
        ('[campaign]\nname = "x"\n', "defense: required field is missing"),
        ('[[defense]]\nkind = "dpsgd"\nagents = 2\n', "topology 'ring' needs at least 3 agents"),
        ('[[defense]]\nkind = "dpsgd"\nbatch_size = 5000\n', "batch_size 5000 exceeds the smallest local dataset"),
        ('[data\n', "invalid TOML"),
        ('[[defense]]\nkind = "dpsgd"\n[[attack]]\nkind = "dgl"\nrounds = [0]\n',
         "attack[0].kind: unknown attack 'dgl' (choose from dlg, idlg, ig, batch, analytic, trap_weights)"),
        ('[[defense]]\nkind = "dpsgd"\n[[audit]]\nkind = "mechanism"\nmechanism = "ternry"\n',
         "audit[0].mechanism: unknown mechanism 'ternry'"),
    ],
)
def test_bad_campaigns_give_one_line_and_exit_2(tmp_path, capsys, body, expected):
    path = tmp_path / "c.toml"
    path.write_text(body)
    code, err = _error(capsys, "run", str(path), "--out", str(tmp_path / "out"), "--quiet")
    assert code == 2
    assert expected in err
    assert len(err.splitlines()) == 1 and err.startswith("privaudit: error:")


def test_missing_data_folder_and_missing_file(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(f'[data]\ndataset = "mnist"\ndata_root = "{tmp_path / "nowhere"}"\n[[defense]]\nkind = "dpsgd"\n')
    code, err = _error(capsys, "run", str(path), "--out", str(tmp_path / "out"), "--quiet")
    assert code == 2 and "dataset 'mnist': no data under" in err and "nowhere" in err
    code, err = _error(capsys, "run", str(tmp_path / "absent.toml"), "--quiet")
    assert code == 2 and err == f"privaudit: error: campaign file not found: {tmp_path / 'absent.toml'}"


def test_run_writes_rows_and_report_and_resumes(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(TINY.format(label="ring of four"))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"report:  {(out / 'report.html').resolve()}" in printed
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [row["seed"] for row in rows] == [0, 1]
    assert {"cell", "defense", "seed", "metrics", "claim"} <= set(rows[0])
    assert rows[0]["claim"]["notion"] == "none"

    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert "2 of 2 cells already finished" in capsys.readouterr().out
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_report_is_self_contained_and_escapes_campaign_strings(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(TINY.format(label="<script>alert(1)</script>"))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    html = render_report(out, tmp_path / "again.html").read_text()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html and "https://" not in html
    assert 'src="data:image/png;base64,' in html


def test_report_of_an_empty_directory_is_an_error(tmp_path, capsys):
    code, err = _error(capsys, "report", str(tmp_path))
    assert code == 2 and "no results in" in err


def test_torn_last_line_is_skipped_and_named_then_cut_off_by_the_next_row(tmp_path):
    store = ResultsStore(tmp_path)
    store.append({"cell": "a", "type": "audit", "value": 1})
    with open(store.path, "a") as handle:
        handle.write('{"cell": "b", "val')
    reading = store.read()
    assert [row["cell"] for row in reading.rows] == ["a"]
    assert [(s.line, s.reason) for s in reading.skipped] == [(2, "not JSON (a torn write?)")]
    store.append({"cell": "c", "type": "audit", "value": 3})
    reading = store.read()
    assert [row["cell"] for row in reading.rows] == ["a", "c"] and reading.skipped == []
    assert '"b"' not in store.path.read_text()


def test_grid_expands_a_table_into_labelled_runs():
    from privaudit.campaign.cells import expand
    from tests.helpers import small_campaign

    campaign = small_campaign(
        [{"kind": "dpsgd", "label": "base", "grid": {"topology": ["ring", "complete"], "lr": [0.1, 0.2]}}], seeds=(0, 1)
    )
    cells = expand(campaign)
    assert len(cells) == 8 and len({cell.id for cell in cells}) == 8
    assert cells[0].label == "base (topology=ring, lr=0.1)"
    assert (cells[3].run.topology, cells[3].params.lr) == ("ring", 0.2)


def test_a_defense_table_can_bring_its_own_data():
    """A whole data table when it names a dataset, keys over the campaign's otherwise; a table
    without `data` keeps the campaign's, and its cell id does not change for having the option."""
    from privaudit.campaign.cells import expand
    from tests.helpers import small_campaign

    plain = expand(small_campaign([{"kind": "dpsgd"}], max_train=200))[0]
    cells = expand(small_campaign([
        {"kind": "dpsgd"},
        {"kind": "dpsgd", "data": {"alpha": 1.0, "partition": "dirichlet"}},
        {"kind": "tvss_gradient", "model": "linear_estimator", "data": {"dataset": "estimation_wz",
                                                                        "samples_per_agent": 20}},
    ], max_train=200))
    assert cells[0].id == plain.id and cells[0].data == plain.data
    assert (cells[1].data.dataset, cells[1].data.max_train, cells[1].data.alpha) == ("digits", 200, 1.0)
    assert (cells[2].data.dataset, cells[2].data.max_train) == ("estimation_wz", None)
    assert len({cell.id for cell in cells}) == 3


def test_a_bad_table_data_field_is_one_line_naming_the_table(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[defense]]\nkind = "dpsgd"\ndata = { dataset = "digits", max_trian = 3 }\n')
    with pytest.raises(ConfigError, match=r"defense\[0\]\.data\.max_trian: unknown field"):
        load_campaign(path)


@pytest.mark.parametrize(
    "grid, expected",
    [
        ('{ topology = ["ring", "rng"] }', "defense[0].grid.topology: unknown topology 'rng'"),
        ('{ lrr = [0.1] }', "defense[0].grid.lrr: unknown field"),
        ('{ lr = [0.1, -1] }', "defense[0].grid.lr: Input should be greater than 0"),
        ('{ kind = ["dpsgd"] }', "'kind' cannot vary in a grid"),
    ],
)
def test_bad_grids_name_the_grid_field(tmp_path, capsys, grid, expected):
    path = tmp_path / "c.toml"
    path.write_text(f'[[defense]]\nkind = "dpsgd"\ngrid = {grid}\n')
    code, err = _error(capsys, "run", str(path), "--quiet")
    assert code == 2 and expected in err


def test_claims_json_has_the_documented_keys(capsys):
    assert main(["claims", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = {"defense", "notion", "adjacency", "eps_claimed", "eps_stated", "eps_sound", "delta", "horizon", "assumptions"}
    assert all(keys <= set(row) for row in rows)
    private = next(row for row in rows if row["defense"] == "dp_dpsgd")
    assert private["eps_sound"] > 0 and private["delta"] == 1e-5


def test_claims_table_prints_one_line_per_run(capsys):
    assert main(["claims"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["label", "notion", "adjacency"]
    private = next(line for line in out.splitlines() if line.startswith("DP-D-PSGD σ=1 "))
    assert private.split()[2] == "(ε," and "1e-05" in private
    assert "  finding (vacuous claim): the claimed δ = 1 ≥ 1 constrains nothing" in out  # ternary at r = 1
    assert "  finding (outside its theorem's range): Theorem 1 holds only for ε ≤" in out  # DPDL ε = 8


def test_report_keeps_apart_two_configurations_sharing_a_label(tmp_path):
    path, out = tmp_path / "c.toml", tmp_path / "out"
    path.write_text(TINY.format(label="same"))
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    path.write_text(TINY.format(label="same").replace("rounds = 4", "rounds = 6"))
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    from privaudit.reports.html import runs_of

    runs = runs_of(ResultsStore(out).rows())
    assert len(runs) == 2 and all(label.startswith("same [") for label in runs)
    assert all(len(rows) == 2 for rows in runs.values())


def test_claims_names_a_claim_below_its_sound_accountant(capsys):
    from privaudit.cli import main

    assert main(["claims", "privaudit/presets/lt_admm_dp.toml"]) == 0
    out = capsys.readouterr().out
    assert "  understated: the claim's ε = " in out and "is below the sound accountant's" in out


@pytest.mark.parametrize("table, field, allowed", [
    ('[[audit]]\nkind = "canary"\nrun = 8000\n', "audit[0].run", "runs"),
    ("", "campaign.nme", "name"),
])
def test_an_unknown_field_of_any_table_lists_what_the_table_allows(tmp_path, capsys, table, field, allowed):
    head = '[campaign]\nnme = "t"\n' if field.startswith("campaign") else '[campaign]\nname = "t"\n'
    (tmp_path / "c.toml").write_text(head + '[[defense]]\nkind = "dpsgd"\nagents = 3\n' + table)
    error = one_line_error(capsys, ["check", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o")])
    assert f"{field}: unknown field (allowed: " in error and f" {allowed}," in error


def test_a_cells_preflight_error_names_the_campaign_file(tmp_path, capsys):
    (tmp_path / "c.toml").write_text('[campaign]\nname = "t"\n[data]\ndataset = "digits"\nmax_train = 60\n'
                                     '[[defense]]\nkind = "dpsgd"\nagents = 3\nbatch_size = 32\nrounds = 2\n')
    error = one_line_error(capsys, ["check", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o")])
    assert error.startswith(f"privaudit: error: {tmp_path / 'c.toml'}: defense[0] (dpsgd, seed 0): batch_size 32")


def test_report_given_a_file_says_it_takes_the_results_folder(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_text("")
    error = one_line_error(capsys, ["report", str(tmp_path / "results.jsonl")])
    assert error.endswith("is a file: report takes the results folder that holds results.jsonl")
