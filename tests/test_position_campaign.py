"""`[[audit]] kind = "position"` in campaigns: one cell per targeted run and seed, a row whose bound is
the strongest pair's and whose pairs keep every attacker with its graph distance, a report section
that draws them, and one-line errors for what a position audit cannot run."""

import pytest

from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.errors import ConfigError
from privaudit.reports.html import render_report
from tests.helpers import without_notation

LINE = {"kind": "dp_dpsgd", "label": "line", "topology": "line", "agents": 6, "model": "logreg", "rounds": 8,
        "eval_every": 8, "batch_size": 10, "lr": 0.5, "clip": 1.0, "noise_multiplier": 0.5}
POSITION = {"kind": "position", "label": "by position", "victim": 0, "runs": 512}


def _campaign(audits, defenses=(LINE,)):
    return parse_campaign({"campaign": {"name": "t", "seeds": [0]},
                           "data": {"max_train": 120, "partition": "iid"},
                           "defense": list(defenses), "audit": list(audits)})


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("position")
    store = run_campaign(_campaign([POSITION | {"attackers": [1, 3, 5, [4, 5]]}]), "# t", out, progress=False,
                         say=lambda _: None)
    return out, [row for row in store.rows() if row.get("type") == "audit"]


def test_the_row_keeps_every_pair_and_judges_the_claim_with_the_strongest(finished):
    _, (row,) = finished
    assert row["status"] == "ok" and row["kind"] == "position" and row["defense_label"] == "line"
    pairs = row["pairs"]
    assert [(pair["attacker"], pair["distance"]) for pair in pairs] == [([1], 1), ([3], 3), ([5], 5), ([4, 5], 4)]
    assert row["eps_lb"] == max(pair["eps_lb"] for pair in pairs)
    assert row["eps_lb"] <= row["eps_sound"]  # every attacker's view is post-processing of the victim's releases
    assert row["verdict"]["status"] in ("inconclusive", "consistent")
    assert row["graph"] == {"agents": 6, "edges": [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]}
    # the adjacent agent learns more than the far end (σ = 0.5, 512 runs per side: about 3 against 0 here)
    assert pairs[0]["eps_lb"] > pairs[2]["eps_lb"]


def test_the_report_draws_the_pairs_against_distance_and_the_run_verdict_uses_them(finished):
    out, _ = finished
    html = without_notation(render_report(out).read_text())
    section = html[html.index('<section id="position">'):html.index('<section id="provenance">')]
    assert section.count('src="data:image/png;base64,') == 2  # the distance figure and the graph
    assert "<td>coalition 4, 5</td><td class=\"num\">4</td>" in section
    verdicts = html[html.index('<section id="verdicts">'):html.index('<section id="claims">')]
    assert "not audited" not in verdicts  # the run's verdict rests on its position audit


def test_every_victim_attacker_pair_of_a_graph_in_one_table(tmp_path):
    """`victims = "all"`: every agent is a victim in turn, every other agent its attacker (a ring
    of 4: 12 pairs); the graph then shows what one chosen attacker learns about each agent."""
    ring = LINE | {"label": "ring", "topology": "ring", "agents": 4, "rounds": 4, "eval_every": 4}
    store = run_campaign(_campaign([{"kind": "position", "victims": "all", "runs": 64}], (ring,)), "# t", tmp_path,
                         progress=False, say=lambda _: None)
    (row,) = [row for row in store.rows() if row.get("type") == "audit"]
    assert row["status"] == "ok" and row["detail"]["victims"] == [0, 1, 2, 3]
    assert sorted((pair["victim"], pair["attacker"][0]) for pair in row["pairs"]) == [
        (v, a) for v in range(4) for a in range(4) if a != v]
    section = without_notation(render_report(tmp_path).read_text()).split('<section id="position">')[1]
    assert "victims 0, 1, 2, 3" in section and "graph coloured by what each agent learns" in section
    assert "<th>victim</th>" in section


CHECKED = LINE | {"noise_multiplier": 2.0}


@pytest.mark.parametrize("table, defenses, message", [
    (POSITION | {"attackers": [9]}, (CHECKED,), "attacker 9 names no agent of 0..5"),
    (POSITION | {"attackers": [[0, 2]]}, (CHECKED,), "holds the victim 0"),
    (POSITION | {"threat": "eavesdropper"}, (CHECKED,), "threat: not a field of a position audit"),
    (POSITION | {"victims": [0, 1]}, (CHECKED,), "give victim or victims, not both"),
    ({"kind": "position", "victims": [7]}, (CHECKED,), "victim 7 names no agent of 0..5"),
    ({"kind": "canary", "attackers": [1]}, (CHECKED,), "attackers: not a field of a canary audit"),
    (POSITION | {"defense": ["tern"]}, (CHECKED, {"kind": "ternary", "label": "tern", "agents": 6, "model": "logreg"}),
     "follows no exact public state recurrence"),
])
def test_what_a_position_audit_cannot_run_is_named_before_training(tmp_path, table, defenses, message):
    """Each refusal names the audit's own mistake, whatever the defense's noise: the line at σ = 2,
    whose claim the preflight's accountant computes in a third of σ = 0.5's time."""
    from privaudit.campaign.preflight import preflight

    with pytest.raises(ConfigError, match=message):
        preflight(_campaign([table], defenses), tmp_path)


@pytest.mark.slow
def test_the_preset_runs_and_shows_privacy_falling_with_distance_on_every_graph(tmp_path):
    """privaudit/presets/privacy_by_position.toml end to end (about 2–4 minutes on 2 cores): every
    position row ends, its closest attacker learns more than its farthest, and none exceeds the
    defense's sound ε."""
    from pathlib import Path

    from privaudit.campaign.config import load_campaign

    path = Path(__file__).parents[1] / "privaudit" / "presets" / "privacy_by_position.toml"
    store = run_campaign(load_campaign(path), path.read_text(), tmp_path, progress=False, say=lambda _: None)
    rows = [row for row in store.rows() if row.get("kind") == "position"]
    assert rows and all(row["status"] == "ok" for row in rows)
    for row in rows:
        pairs = sorted(row["pairs"], key=lambda pair: pair["distance"])
        closest = max(pair["eps_lb"] for pair in pairs if pair["distance"] == pairs[0]["distance"])
        farthest = max(pair["eps_lb"] for pair in pairs if pair["distance"] == pairs[-1]["distance"])
        assert closest <= row["eps_sound"], row["defense_label"]
        if pairs[-1]["distance"] > pairs[0]["distance"]:
            assert closest > farthest, row["defense_label"]
