"""Muffliato's own setting by position (issue 38 item 5): averaging, one noisy private value per agent
and then gossip steps, each heard (`privaudit.defenses.muffliato.averaging`: gossip_steps ≥ rounds).

* on a line of 3, one step, the averaging formula as its authors' code computes it gives a third of
  the local loss where the exact loss of the view it bounds is a half (worked by hand here);
* the position audit of an averaging run puts, per pair, its ε lower bound beside the formula's ε
  and the exact loss; the bound never exceeds the exact loss (10 seeds); the formula's shortfall is
  a finding about the formula as computed, never a verdict ("refuted") on the theorem;
* the report's position section shows the three per pair and draws them on a log ε axis.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

from privaudit.attacks.audit.position import position_audit, positions
from privaudit.campaign.audit_findings import game_for_table
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.defenses import DEFENSES
from privaudit.network_accounting import averaging_loss, muffliato_averaging_claim
from privaudit.reports import figures
from privaudit.reports.html import render_report
from privaudit.topology import Topology
from tests.helpers import without_notation

DATA = {"dataset": "digits", "max_train": 100}
AVERAGING = {"kind": "muffliato", "topology": "line", "agents": 5, "model": "logreg", "batch_size": 20, "lr": 0.5,
             "clip": 1.0, "noise_multiplier": 0.5, "rounds": 4, "gossip_steps": 4, "eval_every": 4, "delta": 0.05}
"""A line of 5, 20 records per agent all in the value (q = 1), σ = 0.5, one noisy value then 3
gossip steps heard; δ = 0.05, where the exact loss (4.57) is within reach of 512 runs."""


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: one intra-op thread, as privaudit runs


@pytest.fixture(scope="module")
def game():
    return game_for_table(AVERAGING, DATA)


def test_on_a_line_of_three_one_step_the_formula_gives_a_third_where_the_view_loses_a_half():
    """Line 0 − 1 − 2, Metropolis weights (1/3 on each edge), Δ = σ = 1, victim 2, attacker 0.
    The authors' code indexes the messages t = 1..T: after one step agent 0 hears x_1^1 = (x̃_0 +
    x̃_1 + x̃_2)/3 (x̃ the noisy values) and knows x̃_0. The formula: w_12²/‖W_1‖² = (1/9)/(3/9) = 1/3
    of the local loss Δ²/(2σ²) = 1/2. The view by hand: A = [[1/3, 1/3, 1/3], [1, 0, 0]], the
    canary moves it by A e_2 = (1/3, 0) under covariance A Aᵀ = [[1/3, 1/3], [1/3, 1]], whose
    inverse is (9/2) [[1, −1/3], [−1/3, 1/3]]: μ² = (1/9)(9/2) = 1/2, a half of the local loss
    μ_local² = 1. On privaudit's own indexing (the noisy values are the first messages sent), two
    steps: the formula still gives a third, and agent 0, which heard x̃_1 too, solves for x̃_2: the
    whole local loss."""
    W = Topology.build("line", 3, "metropolis").W
    assert np.allclose(W, [[2 / 3, 1 / 3, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 3, 2 / 3]])
    A = np.array([[1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0]])
    shift = A @ np.array([0.0, 0.0, 1.0])
    mu_squared = shift @ np.linalg.solve(A @ A.T, shift)
    assert mu_squared == pytest.approx(1 / 2)
    local = 1 / 2  # ρ of the noisy value itself: Δ²/(2σ²)
    claim = muffliato_averaging_claim(W, 2, 0, 1, 1.0, 1e-5, first=1)
    exact = averaging_loss(W, 2, 0, 1, 1.0, 1e-5, first=1)
    assert claim.rho == pytest.approx(local / 3)
    assert exact.rho == pytest.approx(mu_squared / 2) == pytest.approx(local / 2)
    assert muffliato_averaging_claim(W, 2, 0, 2, 1.0, 1e-5).rho == pytest.approx(local / 3)
    assert averaging_loss(W, 2, 0, 2, 1.0, 1e-5).rho == pytest.approx(local)
    with pytest.raises(ValueError, match="first must be 0"):
        averaging_loss(W, 2, 0, 1, 1.0, 1e-5, first=2)


def test_an_averaging_run_is_one_noisy_value_then_gossip_and_claims_the_averaging_formula(game):
    """gossip_steps ≥ rounds: one noisy update, at round 0, then pure gossip; the pairwise claim is
    the averaging formula at Δ/σ = 1/σ over the rounds − 1 states heard, not the optimisation one."""
    defense = DEFENSES["muffliato"](game.params, game.setup)
    assert defense.averaging(4) and not defense.averaging(5)
    assert [defense.updates_at(t) for t in range(4)] == [True, False, False, False]
    W = game.setup.topology.W
    assert defense.pairwise_claim(0, 3, 4) == muffliato_averaging_claim(W, 0, 3, 3, 0.5, 0.05)


def test_each_pair_shows_its_bound_beside_the_formula_and_the_exact_loss_and_the_bound_is_sound(game):
    """Victim 0 at the end of the line, attackers 1, 3 and the coalition (3, 4), 512 runs per side,
    seeds 0–9. Every reached attacker's view determines the victim's noisy value (exact loss: the
    local loss, μ = 2, ε = 4.57 at δ = 0.05); the formula gives the neighbour ε 5.60 (its Rényi curve
    the view's, converted loosely) and agent 3 ε 0.647. Measured: ε_LB 1.8–2.8 for both, never
    above the exact loss; above the formula's ε for agent 3 in every seed. The statistic's model
    is the accountant's view (separation² = the exact loss's share)."""
    records = []
    for seed in range(10):
        records.append(position_audit(game, [1, 3, (3, 4)], runs=512, seed=seed))
    for pairs in records:
        for pair in pairs:
            exact = pair["pairwise"]["linear"]
            assert pair["eps_pair_linear"] == exact["epsilon"]
            assert pair["eps_lb"] <= exact["epsilon"]
            assert pair["verdict"] is None
        neighbour, far, coalition = pairs
        assert "averaging formula" in neighbour["pairwise"]["reason"]
        assert neighbour["eps_pair_claimed"] == pytest.approx(5.602, abs=1e-3)
        assert far["eps_pair_claimed"] == pytest.approx(0.647, abs=1e-3)
        assert far["eps_pair_linear"] == pytest.approx(4.573, abs=1e-3)
        assert far["formula_finding"]["below"] and far["formula_finding"]["audit_above"]
        assert not neighbour["formula_finding"]["below"]
        assert coalition["pairwise"]["claimed"] is None and coalition["formula_finding"] is None
        for pair in (neighbour, far):
            text = pair["formula_finding"]["text"]
            assert "formula as computed" in text and "refut" not in text.replace("not a refutation", "")
    found = positions(game, [1, 3])
    for position in found:
        exact = averaging_loss(game.setup.topology.W, 0, position.agents, 3, 0.5, 0.05)
        assert position.separation ** 2 == pytest.approx((exact.mu * 0.5) ** 2, rel=1e-6)


def test_the_report_shows_the_three_per_pair_and_a_log_eps_axis(tmp_path, monkeypatch):
    """A campaign of the averaging run and a position audit: the row keeps the formula finding, the
    position table gives ε_LB, the formula's ε and the exact loss per pair with the finding in the
    verdict column (never "refuted"), and the figure's ε axis is logarithmic with 0 on its floor."""
    campaign = parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": DATA,
                               "defense": [AVERAGING | {"label": "averaging"}],
                               "audit": [{"kind": "position", "victim": 0, "attackers": [1, 3, 4], "runs": 128}]})
    store = run_campaign(campaign, "# t", tmp_path, progress=False, say=lambda _: None)
    (row,) = [row for row in store.rows() if row.get("kind") == "position"]
    far = next(pair for pair in row["pairs"] if pair["attacker"] == [3])
    assert far["formula_finding"]["below"] and far["pairwise"]["claimed"]["rho"] < far["pairwise"]["linear"]["rho"]
    drawn = []
    monkeypatch.setattr(figures, "to_data_uri", lambda figure: drawn.append(figure) or "data:image/png;base64,")
    monkeypatch.setattr(figures, "_DRAWN_FIGURES", OrderedDict())  # every figure drawn here, none kept after
    html = without_notation(render_report(tmp_path).read_text())
    section = html[html.index('<section id="position">'):html.index('<section id="provenance">')]
    assert f'<td class="num">{far["eps_pair_claimed"]:.4g}</td>' in section
    assert f'<td class="num">{far["eps_pair_linear"]:.4g}</td>' in section
    assert "finding: formula below the exact loss of its view" in section
    assert "refuted" not in section
    (figure,) = [figure for figure in drawn if figure.axes[0].get_xlabel().startswith("graph distance")]
    figure.canvas.draw()
    axis = figure.axes[0]
    assert axis.get_yscale() == "log"
    floor = axis.get_ylim()[0]
    unreached = [pair for pair in row["pairs"] if pair["eps_lb"] == 0]
    assert unreached and floor < min(pair["eps_pair_claimed"] for pair in row["pairs"] if pair["eps_pair_claimed"])
    labels = {tick.get_text() for tick in axis.get_yticklabels() if math.isclose(tick.get_position()[1], floor)}
    assert labels == {"0"}
