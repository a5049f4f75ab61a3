"""`privaudit check` says how long a run will take (issue 27, item 3): one line per cell a run would
compute, each labelled an estimate and saying what it was estimated from, and a total; the total
is within an order of magnitude of the time the run then takes. A sanity test of the cost model,
not a timing test: it must hold on a shared, loaded 2-core machine, hence a factor of 10."""

import contextlib
import io
import re
import time

from privaudit.campaign.config import read_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main

CAMPAIGN = """
[campaign]
name = "estimate"
[data]
dataset = "digits"
max_train = 200
test_fraction = 0.5
[[defense]]
kind = "dp_dpsgd"
label = "DP"
agents = 4
rounds = 80
eval_every = 20
batch_size = 10
lr = 0.5
noise_multiplier = 1.0
[[defense]]
kind = "dpsgd"
label = "B=1"
agents = 4
rounds = 2
eval_every = 2
batch_size = 1
[[defense]]
kind = "dp_dpsgd"
label = "canary-sized"
agents = 4
topology = "complete"
model = "logreg"
rounds = 6
eval_every = 6
batch_size = 10
lr = 0.5
noise_multiplier = 1.0
[[attack]]
kind = "idlg"
label = "iDLG"
defense = ["B=1"]
rounds = [0]
evaluations = 200
tolerance = 0
[[membership]]
label = "MIA"
defense = ["DP"]
rounds = [79]
references = 2
non_members = 100
rmia_samples = 50
bootstrap = 50
[[audit]]
kind = "canary"
label = "canary"
defense = ["canary-sized"]
runs = 100
[[audit]]
kind = "mechanism"
label = "Gaussian"
mechanism = "gaussian"
samples = 20000
"""

UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
CELL = re.compile(r"^  (?P<what>.+): (at most )?about (?P<value>[0-9.e+-]+) (?P<unit>s|min|h), an estimate from .+")
TOTAL = re.compile(r"^a run would take about (?P<value>[0-9.e+-]+) (?P<unit>s|min|h), an estimate from the "
                   r"(?P<cells>\d+) cells above")


def _seconds(match: re.Match) -> float:
    return float(match["value"]) * UNITS[match["unit"]]


def test_check_estimates_each_cell_and_the_run_takes_within_a_factor_of_ten(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["check", str(path), "--out", str(tmp_path / "out")]) == 0
    summary, *said = printed.getvalue().strip().splitlines()
    heading, *cells, total = said[next(i for i, line in enumerate(said) if line.startswith("time of each cell")):]
    assert summary.startswith("campaign 'estimate' passes every pre-flight check: 7 cells")
    assert heading.startswith("time of each cell a run would compute, an estimate")
    matched = [CELL.match(line) for line in cells]
    assert len(cells) == 7 and all(matched), cells
    assert {m["what"] for m in matched} >= {"DP seed 0", "MIA on DP seed 0 round 79", "iDLG on B=1 seed 0 round 0",
                                             "canary on canary-sized seed 0", "Gaussian seed 0"}
    assert "at most about" in next(line for line in cells if line.startswith("  iDLG"))
    found = TOTAL.match(total)
    assert found and int(found["cells"]) == 7, total
    estimate = _seconds(found)
    assert estimate >= sum(_seconds(m) for m in matched)

    campaign, text = read_campaign(str(path))
    started = time.perf_counter()
    run_campaign(campaign, text, tmp_path / "out", progress=False, say=lambda _: None)
    measured = time.perf_counter() - started
    print(f"estimate {estimate:.2f} s, measured {measured:.2f} s", *cells, sep="\n")
    assert measured / 10 <= estimate <= 10 * measured, (estimate, measured)


def test_a_finished_campaign_has_nothing_to_estimate(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[defense]]\nkind = "dpsgd"\nagents = 4\nrounds = 2\neval_every = 2\n')
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["check", str(path), "--out", str(tmp_path / "out")]) == 0
    assert len(printed.getvalue().strip().splitlines()) == 1 and "a run would compute none" in printed.getvalue()
