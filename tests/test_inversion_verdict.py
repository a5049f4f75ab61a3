"""Issue 36 item 5 (acceptance 4): an inversion that leaks on a run with a DP claim gives that run a
reconstruction bound and a verdict other than "not audited"; one that does not leak adds nothing.

The campaign is DP-D-PSGD on digits with a logistic regression, B = 1 and two records per agent
(Poisson rate ½), so the claim exists; with σ = 0.001 it is ε ≈ 10⁶ and iDLG rebuilds the round-0
record at ~47 dB. With σ = 5 the same attack finds nothing, and nothing may be invented from it.
"""

import json

import pytest

from tests.helpers import one_line_error

CAMPAIGN = """[campaign]
name = "rero"
[data]
dataset = "digits"
max_train = 8
min_size = 1
[[defense]]
kind = "dp_dpsgd"
agents = 4
rounds = 2
eval_every = 2
batch_size = 1
model = "logreg"
clip = 10.0
noise_multiplier = {sigma}
[[attack]]
kind = "idlg"
rounds = [0]
batch_size = 1
evaluations = 100
"""
"""No `bound_trials`: the game is played by default (20 trials), with nothing to configure."""


def _run(tmp_path, sigma: float):
    """Run the campaign at noise multiplier `sigma`: its one defense run's verdict record and its
    inversion row."""
    from privaudit.cli import main
    from privaudit.reports.summary import summary

    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(sigma=sigma))
    out = tmp_path / "out"
    assert main(["run", str(campaign), "--out", str(out), "--quiet"]) == 0
    (verdict,) = summary(out)["verdicts"]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (inversion,) = [row for row in rows if row.get("type") == "inversion"]
    return verdict, inversion


def test_a_leaking_inversion_gives_its_dp_run_a_reconstruction_bound(tmp_path):
    verdict, inversion = _run(tmp_path, 0.001)
    assert inversion["leak"]["leak"] and inversion["metrics"]["psnr"] > 30
    assert verdict["kind"] == "defense run" and verdict["status"] != "not audited"
    game = inversion["reconstruction_audit"]
    detail = game["detail"]
    assert game["kind"] == "reconstruction" and game["training"] == inversion["training"]
    assert detail["trials"] == game["samples"] == 20 and detail["threshold_db"] == 30.0
    assert 0 < detail["kappa_lower"] <= detail["kappa"] < 0.01
    assert detail["successes"] == sum(psnr is not None and psnr >= 30 for psnr in detail["psnr"]) >= 1
    assert detail["attack"] == "idlg" and detail["round"] == 0
    assert verdict["eps_lb"] == pytest.approx(game["eps_lb"]) and game["eps_lb"] > 0
    # The add/remove claim of ε ≈ 10⁶ bounds no replacement of one record, so the game cannot judge it:
    # its verdict says so, with the trials and the baseline it rests on, and refutes nothing.
    assert verdict["status"] == "not evaluable"
    assert f"{detail['successes']} of 20 trials" in verdict["sentence"] and "κ ≤" in verdict["sentence"]
    assert "refuted" not in verdict["status"]


def test_an_inversion_that_does_not_leak_adds_no_bound(tmp_path):
    verdict, inversion = _run(tmp_path, 5.0)
    assert inversion["leak"] is not None and not inversion["leak"]["leak"]
    assert "reconstruction_audit" not in inversion
    assert verdict["status"] == "not audited" and verdict["eps_lb"] is None


def test_a_coalition_attack_plays_no_reconstruction_game(tmp_path, capsys):
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(sigma=1.0) + 'bound_trials = 5\nthreat = "coalition"\nagents = [1, 2]\n')
    err = one_line_error(capsys, ["check", str(campaign)])
    assert "bound_trials" in err and "plays no reconstruction game" in err
