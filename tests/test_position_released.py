"""The released model by position (issue 38 item 3, `privaudit.attacks.audit.position`, `released`):
from the same runs as the transcript audit, each single-agent attacker is also scored from its own
final model alone (the last iterate: the `released_model` threat), its ε_LB beside the transcript's.

* a released score reads its agent's final model only: NaN in every message the attackers receive,
  or in every other agent's final model, leaves it unchanged;
* undefended D-PSGD: the neighbour's released model still separates the worlds (ε_LB > 0);
* null audits (no canary on either side) give a released ε_LB of 0;
* the final model's reach is the transcript's: an agent too far is 0 exactly, unscored; a
  coalition has no released bound;
* `released = true` is accepted on a position table, refused (one line) elsewhere or where every
  attacker is a coalition; rows carry the bounds, typed; the report sets them side by side.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import torch

import privaudit.attacks.audit.position as position_module
from privaudit.attacks.audit.position import (_recurrence, play_positions, position_audit, positions, released_models,
                                              released_weight, reaches)
from privaudit.campaign.audit_findings import game_for_table
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.errors import ConfigError
from privaudit.reports.figures import RELEASED, _position_series
from privaudit.reports.html import render_report
from privaudit.reports.position import released_by_distance
from privaudit.rows import problem
from tests.helpers import one_line_error, without_notation

DATA = {"dataset": "digits", "max_train": 200}
LINE = {"topology": "line", "agents": 8, "model": "logreg", "batch_size": 10, "lr": 0.5}
NOISY = {"kind": "dp_dpsgd", **LINE, "clip": 1.0}

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: one intra-op thread, as privaudit runs


@pytest.fixture(scope="module")
def small():
    """DP-D-PSGD on the line of 8, σ = 1, 6 rounds, victim 0."""
    return game_for_table({**NOISY, "rounds": 6, "noise_multiplier": 1.0}, DATA)


def _nan(transcript, tap, network):
    """What an attacker receives, every payload replaced by NaN."""
    return dataclasses.replace(transcript, messages=[
        dataclasses.replace(m, payload=torch.full_like(m.payload, math.nan)) for m in transcript.messages])


def test_a_released_score_reads_its_agents_final_model_alone(small, monkeypatch):
    """The same 8 worlds scored twice, the second time with NaN in every message any attacker
    receives: the transcript scores turn NaN, the released models' scores do not move. And NaN in
    every other agent's final state leaves agent 4's released score as it was."""
    found = positions(small, [1, 4, (6, 7)])
    finals = released_models(small, found)
    assert finals[2] is None and [final.agent for final in finals[:2]] == [1, 4]
    present = torch.tensor([True])
    clean = play_positions(small, found, present, seed=3, copies=8, finals=finals[:2])
    monkeypatch.setattr(position_module, "received", _nan)
    blanked = play_positions(small, found, present, seed=3, copies=8, finals=finals[:2])
    assert clean.shape == (5, 8) and np.isfinite(clean).all()
    assert np.isnan(blanked[:3]).all()
    assert np.array_equal(blanked[3:], clean[3:])

    states = torch.randn(8 * 3, small.canaries.u.shape[1], generator=torch.Generator().manual_seed(0))
    direction = small.canaries.u[0].double()
    others = states.reshape(3, 8, -1).clone()
    others[:, [a for a in range(8) if a != 4]] = math.nan
    alone = finals[1].scores(others.reshape(24, -1), 8, direction)
    assert torch.equal(alone, finals[1].scores(states, 8, direction))
    assert torch.equal(alone, -(states.reshape(3, 8, -1)[:, 4].double() @ direction))


def test_undefended_dpsgd_neighbours_released_model_separates_the_worlds():
    """D-PSGD, no noise: agent 1's final model alone still tells the canary (measured ε_LB 1.25 on
    48 fresh runs per side, the transcript's 2.53: the neighbour recovers the victim's updates from
    the states it hears, while its final model mixes them with every other gradient along u)."""
    game = game_for_table({"kind": "dpsgd", **LINE, "rounds": 10}, DATA)
    (record,) = position_audit(game, [1], runs=64, seed=0, released=True)
    released = record["released"]
    assert released["agent"] == 1 and released["threat"] == "released_model"
    assert released["eps_lb"] > 0.5 and released["test"]["samples"] == 48
    assert released["ratio"] == pytest.approx(released["eps_lb"] / record["eps_lb"])
    assert released["scores"]["with"]["mean"] > released["scores"]["without"]["mean"]


def test_null_released_bounds_are_zero(small):
    """No canary on either side: the released ε_LB is positive in at most 1 of 10 seeds per agent
    (measured: 0 of 10 for agents 1 and 3)."""
    bounds = []
    for seed in range(10):
        records = position_audit(small, [1, 3], runs=64, seed=seed, null=True, released=True)
        bounds.append([record["released"]["eps_lb"] for record in records])
    assert (np.array(bounds) > 0).sum(axis=0).max() <= 1


def test_the_final_models_reach_is_the_transcripts_and_a_coalition_has_none(small):
    """On the line with 6 rounds the victim's updates reach agents 1–5 (its first update enters
    x_5^6, the final model); the model's released separation is positive exactly there. Agent 6 is
    not scored, 0 exactly; the coalition (3, 5) holds no one released model."""
    _, public = _recurrence(small)
    for agent in range(1, 8):
        sign, separation = released_weight(public, 0, agent, small.rounds)
        assert sign == -1.0 and (separation > 0) == reaches(agent, small.rounds), agent
    far, near, coalition = position_audit(small, [6, 1, (3, 5)], runs=16, seed=0, released=True)
    assert far["released"]["eps_lb"] == 0.0 and far["released"]["test"] is None
    assert far["released"]["unreached"].startswith("6 hops from the victim")
    assert near["released"]["test"]["samples"] == 12 and near["released"]["separation"] > 0
    assert coalition["released"] is None
    (without,) = position_audit(small, [1], runs=16, seed=0)
    assert without["released"] is None and without["eps_lb"] == near["eps_lb"]  # the same runs, scored once more


LINE6 = {"kind": "dp_dpsgd", "label": "line", "topology": "line", "agents": 6, "model": "logreg", "rounds": 8,
         "eval_every": 8, "batch_size": 10, "lr": 0.5, "clip": 1.0, "noise_multiplier": 2.0}


def _campaign(audit):
    return parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": {"max_train": 120, "partition": "iid"},
                           "defense": [LINE6], "audit": [audit]})


@pytest.mark.parametrize("audit, message", [
    ({"kind": "canary", "released": True}, "audit[0].released: not a field of a canary audit"),
    ({"kind": "position", "attackers": [[1, 2], [3, 4]], "released": True},
     "audit[0].released: every attacker is a coalition"),
])
def test_released_is_refused_where_it_means_nothing(audit, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        _campaign(audit)
    assert "\n" not in str(error.value)


def test_released_is_a_position_field_and_the_cli_refuses_it_in_one_line(tmp_path, capsys):
    table = _campaign({"kind": "position", "attackers": [1, [3, 4]], "released": True}).audit[0]
    assert table.released and not _campaign({"kind": "position"}).audit[0].released
    path = tmp_path / "c.toml"
    path.write_text('[[defense]]\nkind = "dp_dpsgd"\nagents = 4\n\n[[audit]]\nkind = "mechanism"\n'
                    'mechanism = "gaussian"\nreleased = true\n')
    assert "released: not a field of a mechanism audit" in one_line_error(capsys, ["check", str(path)])


def test_rows_carry_the_released_bounds_and_the_report_sets_them_beside_the_transcripts(tmp_path):
    audit = {"kind": "position", "label": "by position", "victim": 0, "runs": 64, "attackers": [1, 3, [4, 5]],
             "released": True}
    store = run_campaign(_campaign(audit), "# t", tmp_path, progress=False, say=lambda _: None)
    (row,) = [row for row in store.rows() if row.get("type") == "audit"]
    assert row["status"] == "ok" and problem(row) is None
    one, three, coalition = row["pairs"]
    assert coalition["released"] is None
    for pair in (one, three):
        assert pair["released"]["agent"] == pair["attacker"][0]
        assert {"eps_lb", "test", "ratio", "separation"} <= set(pair["released"])
    assert problem({**row, "pairs": [{**one, "released": {**one["released"], "eps_lb": "high"}}]}).endswith(
        "pairs.0.released.eps_lb: a str where a number belongs")

    shown = released_by_distance(row)
    assert shown["figure"].startswith("data:image/png;base64,")
    assert [(q["attacker"], q["distance"]) for q in shown["pairs"]] == [("agent 1", 1), ("agent 3", 3)]
    assert shown["pairs"][0]["released"] == f"{one['released']['eps_lb']:.4g}"
    assert RELEASED in _position_series(row["pairs"])
    assert released_by_distance({**row, "pairs": [{**pair, "released": None} for pair in row["pairs"]]}) is None

    page = without_notation(render_report(tmp_path).read_text())
    position = page.split('<section id="position">')[1].split("</section>")[0]
    assert 'the table of both bounds is in\n<a href="#released">Released model</a>' in position
    released = page.split('<section id="released">')[1]
    assert "By position:" in released and "<th>ratio released / transcript</th>" in released
