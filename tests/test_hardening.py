"""Issue 15: every bad input is one line on stderr with exit code 2 and no traceback; the work a
command asks for is bounded before anything is expanded; a diverging run is a failed row; rows
are strict JSON; unreadable result lines are named; one run writes a results folder at a time;
the report and transcripts are written and read safely; a thread policy is set at start-up."""

import json
import math
import os
import subprocess
import sys
import time

import pytest
import torch

from privaudit.defenses import DEFENSES
from privaudit.campaign.cells import expand, expand_attacks, expand_audits, expand_membership
from privaudit.campaign.config import parse_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError, PrivauditError
from privaudit.store import ResultsStore
from privaudit.topology import Topology
from privaudit.wire import Eavesdropper, Kind, PublicKnowledge, Transcript, Wire
from privaudit.reports.html import render_report
from tests.helpers import one_line_error, small_campaign

TINY = """
[campaign]
name = "tiny"
[data]
dataset = "digits"
max_train = 300
[[defense]]
kind = "dpsgd"
agents = 4
rounds = 2
eval_every = 2
batch_size = 8
"""


_one_line_error = one_line_error


def _campaign_error(tmp_path, capsys, body: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(body)
    return _one_line_error(capsys, ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])


# 1. A campaign file that is not UTF-8


@pytest.mark.parametrize("command", ["run", "claims"])
def test_a_campaign_file_that_is_not_utf8_is_one_line(tmp_path, capsys, command):
    path = tmp_path / "latin1.toml"
    path.write_bytes('[campaign]\nname = "café"\n[[defense]]\nkind = "dpsgd"\n'.encode("latin-1"))
    err = _one_line_error(capsys, [command, str(path)])
    assert err == f"privaudit: error: {path}: not UTF-8 text (byte 0xe9 on line 2); TOML files are UTF-8"


# 2. Non-finite numbers, seeds, and argparse's type errors


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["audit", "laplace", "--param", "eps=inf"],
         "laplace: --param eps: Input should be a finite number (got 'inf')"),
        (["audit", "gaussian", "--param", "sigma=nan"],
         "gaussian: --param sigma: Input should be a finite number (got 'nan')"),
        (["audit", "ternary", "--seed", "-1"], "--seed: must be at least 0, got -1"),
        (["audit", "ternary", "--seed", str(2**32)], "--seed must be in 0..4294967295, got 4294967296"),
        (["audit", "ternary", "--dim", "abc"], "--dim: expected a whole number, got 'abc'"),
        (["audit", "ternary", "--releases", "1.5"], "--releases: expected a whole number, got '1.5'"),
        (["audit", "ternary", "--samples", "many"], "--samples: expected a whole number, got 'many'"),
        (["audit", "ternary", "--samples", "10"], "--samples: must be at least 100, got 10"),
        (["audit", "ternary", "--delta", "inf"], "--delta: expected a finite number, got 'inf'"),
        (["audit", "ternary", "--confidence", "nan"], "--confidence: expected a finite number, got 'nan'"),
        (["audit", "ternary", "--confidence", "high"], "--confidence: expected a number, got 'high'"),
        (["audit", "ternary", "--threads", "two"], "--threads: expected a whole number, got 'two'"),
        (["run", "--workers", "many"], "--workers: expected a whole number, got 'many'"),
        (["claims", "--threads", "-1"], "--threads: must be at least 0, got -1"),
        (["report", "somewhere", "--threads", "100000"], "--threads: must be at most 1024, got 100000"),
        (["audit"], "audit: the following arguments are required: mechanism"),
    ],
)
def test_bad_command_lines_are_one_line_and_exit_2(capsys, argv, expected):
    assert _one_line_error(capsys, argv) == f"privaudit: error: {expected}"


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[[defense]]\nkind = "dpsgd"\nlr = inf\n', "defense[0].lr: must be a finite number, got inf"),
        ('[[defense]]\nkind = "dpsgd"\nlr = nan\n', "defense[0].lr: must be a finite number, got nan"),
        ('[data]\ntest_fraction = -inf\n[[defense]]\nkind = "dpsgd"\n', "data.test_fraction: must be a finite number"),
        ('[[defense]]\nkind = "dpsgd"\nmodel_options = { scale = inf }\n', "defense[0].model_options.scale: must be"),
        ('[[defense]]\nkind = "dpsgd"\ngrid = { lr = [0.1, inf] }\n', "defense[0].grid.lr[1]: must be a finite number"),
        ('[[defense]]\nkind = "dpsgd"\n[[attack]]\nkind = "dlg"\nrounds = [0]\ntolerance = nan\n',
         "attack[0].tolerance: must be a finite number, got nan"),
        ('[[defense]]\nkind = "dpsgd"\n[[audit]]\nkind = "mechanism"\nmechanism = "laplace"\nparams = { eps = inf }\n',
         "audit[0].params.eps: must be a finite number, got inf"),
        ('[campaign]\nseeds = [0, -1]\n[[defense]]\nkind = "dpsgd"\n',
         "campaign.seeds[1]: Input should be greater than or equal to 0"),
        ('[[defense]]\nkind = "dpsgd"\n[[attack]]\nkind = "dlg"\nrounds = [0]\ndtype = "float16"\n',
         "attack[0].dtype: Input should be 'float32' or 'float64'"),
    ],
)
def test_bad_numbers_in_a_campaign_are_one_line(tmp_path, capsys, body, expected):
    assert expected in _campaign_error(tmp_path, capsys, body)


def test_parameter_models_refuse_inf_and_nan_when_built_from_code():
    with pytest.raises(ValueError, match="finite number"):
        DEFENSES["dpsgd"].Params.model_validate({"lr": math.inf})


# 3. and 5. Limits on the work asked for, checked before anything is expanded


def test_huge_rounds_are_refused_naming_the_limit_and_how_to_lift_it(tmp_path, capsys):
    err = _campaign_error(tmp_path, capsys, '[[defense]]\nkind = "dpsgd"\nrounds = 999999999999999999\n')
    assert ("defense[0].rounds: 999,999,999,999,999,999 exceeds the limit of 1,000,000 rounds of one training "
            "run; set PRIVAUDIT_MAX_ROUNDS=999999999999999999 to run it anyway") in err


def test_a_limit_is_lifted_by_its_environment_variable(monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_MAX_ROUNDS", "5")
    with pytest.raises(ConfigError, match="6 exceeds the limit of 5 rounds"):
        small_campaign([{"kind": "dpsgd", "rounds": 6}])
    assert small_campaign([{"kind": "dpsgd", "rounds": 5}]).defense[0].rounds == 5
    monkeypatch.setenv("PRIVAUDIT_MAX_ROUNDS", "lots")
    with pytest.raises(ConfigError, match="PRIVAUDIT_MAX_ROUNDS: expected a whole number >= 1, got 'lots'"):
        small_campaign([{"kind": "dpsgd", "rounds": 5}])


def test_a_grid_of_a_million_runs_is_refused_before_it_is_expanded(tmp_path, capsys):
    values = ", ".join(map(str, range(1, 1001)))
    started = time.perf_counter()
    err = _campaign_error(tmp_path, capsys, f'[[defense]]\nkind = "dpsgd"\ngrid = {{ batch_size = [{values}], '
                                            f'eval_every = [{values}] }}\n')
    assert time.perf_counter() - started < 5
    assert ("defense[0].grid: 1,000,000 combinations × 1 seed(s) = 1,000,000 exceeds the limit of 10,000 cells in "
            "one campaign") in err and "set PRIVAUDIT_MAX_CELLS=1000000 to run it anyway" in err


@pytest.mark.parametrize(
    "field, expected",
    [
        ("agents = 100000", "defense[0].agents: 100,000 exceeds the limit of 1,000 agents"),
        ("references = 1000000", "membership[0].references: 1,000,000 exceeds the limit of 100,000 repetitions"),
    ],
)
def test_sizes_of_a_run_are_bounded(tmp_path, capsys, field, expected):
    defense, membership = ('[[defense]]\nkind = "dpsgd"\n', '[[membership]]\nrounds = [1]\n')
    body = defense + field + "\n" if field.startswith("agents") else defense + membership + field + "\n"
    assert expected in _campaign_error(tmp_path, capsys, body)


def test_a_model_too_large_for_its_agents_is_refused_before_it_is_allocated(tmp_path, capsys):
    body = TINY + "model_options = { hidden = [100000000] }\n"
    started = time.perf_counter()
    err = _campaign_error(tmp_path, capsys, body)
    assert time.perf_counter() - started < 30
    assert ("defense[0] (dpsgd, seed 0): agents × model parameters = 4 × 7,500,000,010: 30,000,000,040 exceeds the "
            "limit of 250,000,000 model parameters") in err and "PRIVAUDIT_MAX_PARAMETERS=30000000040" in err


def test_finding_cells_count_against_the_cell_limit_before_they_are_made(monkeypatch):
    raw = {"campaign": {"seeds": [0, 1, 2]}, "data": {"dataset": "digits"},
           "defense": [{"kind": "dpsgd", "grid": {"lr": [0.1, 0.2]}}, {"kind": "dp_dpsgd"}],
           "attack": [{"kind": "dlg", "rounds": [0, 1]}],
           "membership": [{"rounds": [1], "defense": ["dpsgd"]}],
           "audit": [{"kind": "mechanism", "mechanism": "laplace"}, {"kind": "canary", "defense": ["dp_dpsgd"]}]}
    campaign = parse_campaign(raw)
    cells = expand(campaign)
    made = (len(cells) + len(expand_attacks(campaign, cells)) + len(expand_membership(campaign, cells))
            + len(expand_audits(campaign, cells)))
    assert campaign.cell_count() == made == 9 + 18 + 6 + 3 + 3
    monkeypatch.setenv("PRIVAUDIT_MAX_CELLS", str(made - 1))
    with pytest.raises(ConfigError, match=f"the campaign's cells: {made} exceeds the limit of {made - 1} cells"):
        parse_campaign(raw)


@pytest.mark.parametrize(
    "argv, sizes",
    [(["--dim", "10000000"], "10,000,000 × 1 × 10,000"), (["--releases", "100000"], "1 × 100,000 × 10,000"),
     (["--samples", "1000000000"], "1 × 1 × 1,000,000,000")],
)
def test_audits_too_large_are_refused_before_sampling(capsys, argv, sizes):
    started = time.perf_counter()
    err = _one_line_error(capsys, ["audit", "ternary", *argv])
    assert time.perf_counter() - started < 5
    assert f"dim × releases × samples = {sizes}: " in err and "set PRIVAUDIT_MAX_SAMPLES=" in err


def test_an_audit_table_too_large_is_refused_with_the_campaign(tmp_path, capsys):
    body = '[[defense]]\nkind = "dpsgd"\n[[audit]]\nkind = "mechanism"\nmechanism = "ternary"\ndim = 10000000\n'
    err = _campaign_error(tmp_path, capsys, body)
    assert "audit[0]: dim × releases × samples = 10,000,000 × 1 × 10,000: " in err


# 6. Duplicate cells are refused, naming the repeat


@pytest.mark.parametrize(
    "defenses, seeds, expected",
    [
        ([{"kind": "dpsgd"}], (0, 0), "campaign.seeds: seed 0 appears twice"),
        ([{"kind": "dpsgd", "grid": {"lr": [0.1, 0.2, 0.1]}}], (0,),
         "defense[0].grid: grid 'lr' repeats the value 0.1"),
        ([{"kind": "dpsgd", "grid": {"agents": [8, 8.0]}}], (0,),
         "defense[0].grid: grid 'agents' repeats the value 8.0"),
        ([{"kind": "dpsgd", "lr": 0.2}, {"kind": "dpsgd", "lr": 0.2}], (0, 1),
         "defense[1] (dpsgd, seed 0): the same cell as defense[0] (dpsgd, seed 0)"),
    ],
)
def test_duplicate_cells_are_refused_naming_the_repeat(defenses, seeds, expected):
    with pytest.raises(ConfigError) as error:
        expand(small_campaign(defenses, seeds=seeds))
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_two_identical_attack_tables_are_refused():
    attack = {"kind": "dlg", "rounds": [0]}
    campaign = parse_campaign({"data": {"dataset": "digits"}, "defense": [{"kind": "dpsgd"}],
                               "attack": [attack, attack]})
    with pytest.raises(ConfigError, match=r"attack\[1\] \(dlg on dpsgd, seed 0, round 0\): the same cell as "
                                          r"attack\[0\]"):
        expand_attacks(campaign, expand(campaign))


# 4. A diverging run is a failed row, and so is every finding on it; rows are strict JSON

DIVERGING = TINY.replace('kind = "dpsgd"\n', 'kind = "dpsgd"\nlabel = "blown"\nlr = 1e10\n').replace(
    "rounds = 2\neval_every = 2", "rounds = 6\neval_every = 3") + """
[[defense]]
kind = "dpsgd"
label = "fine"
agents = 4
rounds = 2
eval_every = 2
batch_size = 8
[[attack]]
kind = "dlg"
defense = ["blown"]
rounds = [0]
evaluations = 5
[[membership]]
defense = ["blown"]
rounds = [1]
references = 2
"""


def _strict(line: str) -> dict:
    def refuse(token):
        raise AssertionError(f"non-strict JSON token {token}")

    return json.loads(line, parse_constant=refuse)


def test_a_diverging_run_is_a_failed_row_with_its_findings_and_the_campaign_goes_on(tmp_path, capsys):
    path, out = tmp_path / "c.toml", tmp_path / "out"
    path.write_text(DIVERGING)
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert "blown seed 0: failed: diverged in round " in capsys.readouterr().out
    for line in (out / "results.jsonl").read_text().splitlines():
        _strict(line)
    rows = {(row["type"], row["label"]): row for row in ResultsStore(out).rows()}
    blown = rows["training", "blown"]
    assert blown["status"].startswith("failed: diverged in round ") and "non-finite" in blown["status"]
    assert blown["metrics"] == {} and all(math.isfinite(v) for point in blown["history"] for v in point.values())
    reason = f"failed: training run {blown['status'].removeprefix('failed: ')}"
    assert rows["inversion", "dlg"]["status"] == reason and rows["inversion", "dlg"]["metrics"]["psnr"] is None
    assert rows["membership", "membership (intercepted)"]["status"] == reason
    assert "status" not in rows["training", "fine"] and rows["training", "fine"]["metrics"]["avg_acc"] > 0
    html = render_report(out).read_text()
    assert "seed 0 failed: diverged in round" in html


def test_rows_are_strict_json_and_their_non_finite_numbers_come_back(tmp_path):
    store = ResultsStore(tmp_path)
    store.append({"cell": "a", "type": "audit", "label": "nan", "eps": math.inf,
                  "curve": [{"x": -math.inf}, {"x": math.nan}], "by": {1: math.inf}})
    line = store.path.read_text()
    assert "Infinity" not in line and "NaN" not in line
    _strict(line)
    (row,) = store.rows()
    assert row["eps"] == math.inf and row["curve"][0]["x"] == -math.inf and math.isnan(row["curve"][1]["x"])
    assert row["label"] == "nan" and row["by"] == {"1": math.inf} and "nonfinite" not in row


def test_claims_json_is_strict_json(tmp_path, capsys):
    """A sound ε of ∞ (noise far too small for a finite bound) is the string "inf", not a bare
    Infinity token."""
    path = tmp_path / "c.toml"
    path.write_text('[data]\ndataset = "digits"\n[[defense]]\nkind = "lt_admm_dp"\nsigma_e = 0.001\n'
                    'model = "logreg"\nrounds = 10\n')
    assert main(["claims", str(path), "--json"]) == 0
    (row,) = _strict(capsys.readouterr().out)
    assert row["eps_sound"] == "inf"


# 7. One reader: unreadable lines are skipped and named, by the CLI and in the report


def test_unreadable_result_lines_are_named_by_report_and_resume(tmp_path, capsys):
    path, out = tmp_path / "c.toml", tmp_path / "out"
    path.write_text(TINY)
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    with open(out / "results.jsonl", "ab") as handle:
        handle.write(b'123\n{}\n\xff\xfe\n{"cell": "x", "type": "bogus"}\n{"cell": "t')
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    skipped = (f"{out / 'results.jsonl'}: skipped 5 unreadable lines (line 2: not a row (a JSON int); line 3: not a "
               "row (no cell id); line 4: not UTF-8; line 5: unknown row type 'bogus'; line 6: not JSON (a torn "
               "write?))")
    assert capsys.readouterr().err.strip() == f"privaudit: warning: {skipped}"
    html = (out / "report.html").read_text()
    assert 'id="skipped"' in html and "skipped 5 unreadable lines (line 2: not a row" in html
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"warning: {skipped}; their cells run again" in printed and "1 of 1 cells already finished" in printed


def test_a_results_file_of_garbage_alone_is_one_line(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_bytes(b"\x80\n[]\n")
    err = _one_line_error(capsys, ["report", str(tmp_path)])
    assert "no results in" in err and "skipped 2 unreadable lines (line 1: not UTF-8; line 2: not a row" in err


# 8. One run writes a results folder at a time

HOLD = """
import sys, time
from privaudit.store import ResultsStore
with ResultsStore(sys.argv[1]).lock():
    print("locked", flush=True)
    time.sleep(120)
"""


def test_a_second_run_on_a_locked_results_folder_exits_2_naming_the_holder(tmp_path, capsys):
    path, out = tmp_path / "c.toml", tmp_path / "out"
    path.write_text(TINY)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        err = _one_line_error(capsys, ["run", str(path), "--out", str(out), "--quiet"])
        assert err == (f"privaudit: error: results folder {out} is in use by another privaudit run (process "
                       f"{holder.pid}): wait for it to end, or write the results elsewhere")
        assert not (out / "results.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert len(ResultsStore(out).rows()) == 1


# 9. The report is replaced atomically; transcripts load without running code


def test_the_report_is_replaced_atomically(tmp_path):
    path, out = tmp_path / "c.toml", tmp_path / "out"
    path.write_text(TINY)
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    first = os.stat(out / "report.html").st_ino
    render_report(out)
    assert os.stat(out / "report.html").st_ino != first
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def _transcript() -> Transcript:
    ring = Topology.build("ring", 4)
    tap = Eavesdropper(links=[(0, 1)])
    wire = Wire(ring, [tap])
    wire.broadcast(0, 0, Kind.MODEL, torch.arange(3.0))
    wire.send(1, 1, 0, Kind.CROSS_GRADIENT, torch.ones(2))
    return tap.transcript(PublicKnowledge("dpsgd", "ring", ring.W, "mlp", (3,), 2, torch.zeros(3), {"lr": 0.1}))


def test_a_transcript_round_trips_through_plain_tensors(tmp_path):
    transcript = _transcript()
    transcript.save(tmp_path / "t.pt")
    loaded = Transcript.load(tmp_path / "t.pt")
    assert [(m.round, m.sender, m.receiver, m.kind) for m in loaded.messages] == \
        [(m.round, m.sender, m.receiver, m.kind) for m in transcript.messages]
    assert torch.equal(loaded.payload("model", 0, 0, None), torch.arange(3.0))
    assert (loaded.public.W == transcript.public.W).all() and loaded.public.in_shape == (3,)
    assert loaded.public.hyper == {"lr": 0.1} and loaded.threat_model == transcript.threat_model


class _Payload:
    """A pickle that creates a file when loaded in full."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_loading_a_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    torch.save(_Payload(marker), tmp_path / "evil.pt")
    with pytest.raises(PrivauditError, match="evil.pt: not a privaudit transcript"):
        Transcript.load(tmp_path / "evil.pt")
    assert not marker.exists()


# 10. The thread policy, set by the CLI before torch is imported

PROBE = """
import os, sys
from privaudit.cli import main
main(["report", sys.argv[1], *sys.argv[2:]])
import torch
print(torch.get_num_threads(), os.environ["OMP_WAIT_POLICY"])
"""


@pytest.mark.parametrize("flags, expected", [([], "1 PASSIVE"), (["--threads", "2"], "2 PASSIVE")])
def test_the_cli_chooses_threads_before_torch_is_imported(tmp_path, flags, expected):
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), *flags], env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == expected, done.stderr
    assert "no results in" in done.stderr and "Traceback" not in done.stderr
