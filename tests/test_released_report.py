"""The released model's held-out threshold and report section (issue 38, acceptance 1 and item 6):
a normal law is fitted to the scores with the canary only where they look normal, and the report's
"Released model" section sets each run's last-iterate audits beside its transcript audits."""

from pathlib import Path

import numpy as np
import pytest

from privaudit.attacks.audit.canary_statistics import (held_out_bound, looks_normal, predicted_test,
                                                      predicted_threshold)
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.reports.html import render_report
from privaudit.reports.released import released_section
from tests.helpers import without_notation


def test_only_a_sample_that_looks_normal_is_fitted_by_a_normal_law():
    generator = np.random.default_rng(0)
    assert looks_normal(generator.normal(0.0, 1.0, 2000))
    assert not looks_normal(generator.exponential(1.0, 2000))
    assert not looks_normal(generator.normal(0.0, 1.0, 10)) and not looks_normal(np.zeros(100))


def test_a_skewed_sample_with_the_canary_keeps_the_empirical_threshold():
    generator = np.random.default_rng(1)
    out, into = generator.normal(0.0, 1.0, 4000), 1.0 + generator.exponential(1.0, 4000)
    assert held_out_bound(out, into, "eps", 1e-5, 0.95, fit_in=True) == held_out_bound(out, into, "eps", 1e-5, 0.95)


def test_a_normal_sample_with_the_canary_chooses_a_threshold_nearer_the_ideal():
    """Two unit normals 0.8 apart, 2,000 held-out runs each, 6,000 fresh: the ideal threshold is the
    one the law itself predicts best (`predicted_threshold` on 200,000 draws of it); the fitted
    threshold lands nearer it than the empirical fraction's in most of 24 draws (about 7 in 10 over other seeds)."""
    generator = np.random.default_rng(0)
    law = generator.normal(0.0, 1.0, 200_000), generator.normal(0.8, 1.0, 200_000)
    ideal = predicted_threshold(*law, 6000, 6000, "eps", 1e-5, 0.95)
    nearer = 0
    for _ in range(24):
        out, into = generator.normal(0.0, 1.0, 2000), generator.normal(0.8, 1.0, 2000)
        fitted = predicted_test(out, into, 1e-5, 0.95, 6000, 6000, fit_in=True)[1]
        empirical = predicted_test(out, into, 1e-5, 0.95, 6000, 6000)[1]
        nearer += abs(fitted - ideal) < abs(empirical - ideal)
    assert nearer >= 15, nearer


DP = {"kind": "dp_dpsgd", "label": "DP-D-PSGD", "topology": "complete", "agents": 4, "model": "logreg", "rounds": 4,
      "eval_every": 4, "batch_size": 10, "lr": 0.5, "clip": 1.0, "noise_multiplier": 0.5, "delta": 1e-5}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("released")
    campaign = parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": {"max_train": 100},
                               "defense": [DP],
                               "audit": [{"kind": "canary", "label": "heard", "runs": 64},
                                         {"kind": "canary", "label": "final model", "runs": 64,
                                          "threat": "released_model"}],
                               "membership": [{"label": "on released models", "threat": "released_model",
                                               "victims": [0, 1], "references": 2, "non_members": 20,
                                               "rmia_samples": 20, "bootstrap": 0}]})
    store = run_campaign(campaign, "# t", out, progress=False, say=lambda _: None)
    return out, store.rows()


def test_the_section_sets_the_last_iterate_beside_the_transcript(finished):
    out, rows = finished
    [run] = released_section(rows)["runs"]
    scopes = [entry["scope"] for entry in run["entries"]]
    assert run["subject"] == "DP-D-PSGD" and scopes == ["transcript", "last iterate"]
    assert "released_model" in run["entries"][1]["received"] and "global_listener" in run["entries"][0]["received"]
    assert run["comparison"] is not None and "last iterate" in run["comparison"]
    section = without_notation(render_report(out).read_text()).split('<section id="released">')[1]
    assert "Released model" in section and "never support a smaller" in section and "final model" in section


def test_each_agent_shows_its_membership_beside_its_last_iterate_bounds(finished):
    """Victim 0 is both the canary audits' victim and a membership victim: its line holds its own
    AUCs and the last-iterate bound; agent 1 has membership alone."""
    out, rows = finished
    [run] = released_section(rows)["runs"]
    agents = {entry["agent"]: entry for entry in run["agents"]}
    assert set(agents) == {0, 1} and run["methods"] == ["LOSS", "LiRA", "RMIA"]
    membership = next(row for row in rows if row.get("type") == "membership")
    own = {entry["victim"]: entry["metrics"] for entry in membership["by_victim"]}
    for agent in (0, 1):
        assert agents[agent]["methods"]["LiRA"]["auc"] == f"{own[agent]['lira']['auc']:.4g}"
        assert "final model of agent" in agents[agent]["held"]
    assert agents[0]["bounds"] and agents[0]["bounds"][0].startswith("final model: ε ≥") and agents[1]["bounds"] == []
    section = without_notation(render_report(out).read_text()).split('<section id="released">')[1]
    assert "LiRA AUC" in section and "on released models" in section


def test_no_section_without_a_last_iterate_audit(finished):
    _, rows = finished
    heard = [row for row in rows if (row.get("detail") or {}).get("released") is None and not row.get("released")]
    assert released_section(heard) is None


def test_natural_canaries_are_held_out_records_and_their_released_audit_runs():
    """A natural canary is a held-out record of the task with its own label (its anti-record another
    one); a last-iterate audit plants and scores it; too many for the held-out split, or a label or
    scale given for one, is one line."""
    from privaudit.attacks.audit.canary_audit import audit_game
    from privaudit.campaign.audit_findings import game_for_table
    from privaudit.errors import ConfigError
    game = game_for_table(DP, {"max_train": 100}, threat="released_model", canary="natural")
    data = game.setup.data
    x, y = game.canaries.x[0], int(game.canaries.y[0])
    assert any(torch_equal(x, row) and int(label) == y for row, label in zip(data.x_test, data.y_test))
    assert not any(torch_equal(x, row) for row in game.setup.local.x[: len(data.x_train)])
    assert audit_game(game, runs=16, seed=0)["canary"] == "natural"
    with pytest.raises(ConfigError, match="held-out records") as error:
        game_for_table(DP, {"max_train": 100}, threat="released_model", canary="natural", count=10**5)
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="canary_label") as error:
        parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": {"max_train": 100}, "defense": [DP],
                        "audit": [{"kind": "canary", "canary": "natural", "canary_label": 1}]})


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def test_a_users_defense_without_a_view_has_its_released_model_audited(tmp_path, monkeypatch, third_party):
    """A defense a user brings with no view at all (no extractor, no model view: nothing reads its
    messages) still has final states: its released model takes canary audits and membership."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "data"))
    table = {"kind": "released_user_defense:NoisyLocal", "label": "mine", "topology": "ring", "agents": 4,
             "model": "logreg", "rounds": 4, "eval_every": 4, "sigma": 0.5}
    campaign = parse_campaign({"campaign": {"name": "t", "seeds": [0], "imports": ["released_user_defense"]},
                               "data": {"max_train": 100}, "defense": [table],
                               "audit": [{"kind": "canary", "label": "deployed", "threat": "released_model", "runs": 32},
                                         {"kind": "canary", "label": "deployed, natural", "runs": 32,
                                          "threat": "released_model", "canary": "natural"}],
                               "membership": [{"label": "deployed models", "threat": "released_model",
                                               "victims": [0, 1], "references": 2, "non_members": 20,
                                               "rmia_samples": 20, "bootstrap": 0}]}, allow_code=True)
    rows = run_campaign(campaign, "# t", tmp_path, progress=False, say=lambda _: None).rows()
    done = [row for row in rows if row.get("type") in ("audit", "membership")]
    assert len(done) == 3 and all(row["status"] == "ok" for row in done), [row.get("status") for row in done]
    [run] = released_section(rows)["runs"]
    assert [entry["scope"] for entry in run["entries"]] == ["last iterate", "last iterate"]
    assert {entry["agent"] for entry in run["agents"]} == {0, 1}
