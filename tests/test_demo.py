"""The embedded default campaign is valid and its undefended run learns (acceptance of the
foundation: D-PSGD on digits, Dirichlet 0.5, ring of 8, average model ≥ 90 % test accuracy) and
shows the whole suite."""

from privaudit.campaign import build_defense, expand, read_campaign, run_cell


def test_demo_campaign_parses_and_names_both_baselines():
    campaign, text = read_campaign(None)
    assert "[[defense]]" in text
    kinds = [run.kind for run in campaign.defense]
    assert kinds[:2] == ["dpsgd", "dp_dpsgd"]


def test_demo_dpsgd_reaches_90_percent_and_dp_variant_states_its_epsilon():
    campaign, _ = read_campaign(None)
    cells = expand(campaign)
    dpsgd = next(cell for cell in cells if cell.run.kind == "dpsgd")
    assert (dpsgd.data.dataset, dpsgd.data.partition, dpsgd.data.alpha) == ("digits", "dirichlet", 0.5)
    assert (dpsgd.run.topology, dpsgd.run.agents) == ("ring", 8)
    row, _ = run_cell(dpsgd)
    assert row["metrics"]["avg_acc"] >= 0.90

    private = next(cell for cell in cells if cell.run.kind == "dp_dpsgd")
    claim = build_defense(private).claim(private.run.rounds)
    assert claim.notion == "(ε, δ)-DP" and claim.eps_sound > 0 and claim.delta == 1e-5


def test_demo_campaign_shows_the_whole_suite():
    """Issue 7's embedded default: undefended D-PSGD, DPDL and ternary quantization, inversion at
    two rounds, membership inference, the ternary quantizer audit and a canary audit."""
    campaign, _ = read_campaign(None)
    kinds = {run.kind for run in campaign.defense}
    assert {"dpsgd", "dp_dpsgd", "dpdl", "ternary"} <= kinds
    assert [len(table.rounds) for table in campaign.attack] == [2]
    assert campaign.membership
    assert [(table.kind, table.mechanism or table.method) for table in campaign.audit] == [
        ("mechanism", "ternary"), ("canary", "repeated"), ("canary", "one_run")]
