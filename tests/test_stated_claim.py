"""`privaudit audit MECHANISM --claim-eps E [--claim-delta D]` tests a claim you state (issue 27,
item 4): a Gaussian of σ = 1 claimed 0.5-DP at δ = 1e-5 is refuted (its exact ε there is about
4.4), a Laplace of ε = 1 claimed 3-DP is consistent, and a malformed claim is one line."""

import json

import pytest

from privaudit.cli import main
from tests.helpers import one_line_error


def _audit(capsys, *args: str) -> dict:
    assert main(["audit", *args, "--samples", "20000", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_stated_claim_below_the_mechanisms_loss_is_refuted_at_its_own_delta(capsys):
    row = _audit(capsys, "gaussian", "--param", "sigma=1", "--claim-eps", "0.5", "--claim-delta", "1e-5")
    assert row["verdict"]["status"] == "refuted" and row["delta"] == 1e-5
    assert row["claim"]["audited_eps"] == row["claim"]["eps_stated"] == 0.5
    assert row["eps_lb"] > 0.5


def test_a_stated_claim_above_the_mechanisms_loss_is_consistent(capsys):
    row = _audit(capsys, "laplace", "--param", "eps=1", "--claim-eps", "3")
    assert row["verdict"]["status"] == "consistent" and row["claim"]["audited_delta"] == 0 and row["eps_lb"] <= 3


@pytest.mark.parametrize("args, message", [
    (["--claim-delta", "0.1"], "--claim-delta needs --claim-eps"),
    (["--claim-eps", "-1"], "--claim-eps must be a finite number >= 0"),
    (["--claim-eps", "1", "--claim-delta", "1"], "--claim-delta must be in [0, 1)"),
])
def test_a_malformed_stated_claim_is_one_line(capsys, args, message):
    assert message in one_line_error(capsys, ["audit", "laplace", *args])
