"""Membership inference on released models (issue 38 item 4): `[[membership]]` tables take
`released_model` and `released_average`, refuse what those threats cannot take in one line, score
each victim's records against the final model of the released agent (its references the same
agent position's final model of their own runs), pool several victims with each one's own metrics
beside the pooled ones, and say what was released in the row and the report."""

import numpy as np
import pytest
import torch

from privaudit.attacks.membership.methods import METHODS
from privaudit.attacks.membership.scores import loss_scores, membership_metrics
from privaudit.campaign.cells import build_defense, expand, expand_membership
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.jobs import run_cell
from privaudit.campaign.membership_findings import _outputs, attacker_data, reference_models
from privaudit.campaign.run import run_campaign
from privaudit.reports.html import render_report
from privaudit.store import ResultsStore
from tests.helpers import one_line_error, without_notation

DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "topology": "ring", "model": "logreg", "rounds": 8,
         "eval_every": 8, "batch_size": 5, "lr": 0.5}
DATA = {"dataset": "digits", "max_train": 80, "test_fraction": 0.5}
SMALL = {"references": 2, "bootstrap": 50, "rmia_samples": 100}
OWN = {"label": "own", "threat": "released_model", "victims": [0, 2], "non_members": 40} | SMALL
OBSERVED = OWN | {"label": "agent 1", "observer": 1}
AVERAGE = {"label": "average", "threat": "released_average"} | SMALL


def _campaign(memberships, attacks=()):
    return parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": DATA, "defense": [DPSGD],
                           "membership": list(memberships), "attack": list(attacks)})


def test_membership_tables_take_the_released_threats():
    """Fails before issue 38 item 4: every released threat was refused in [[membership]] tables."""
    campaign = _campaign([OWN, OBSERVED, AVERAGE, AVERAGE | {"label": "named", "target": "average"}])
    cells = expand_membership(campaign, expand(campaign))
    assert [cell.round for cell in cells] == [None] * 4
    assert all(table.final for table in campaign.membership)
    assert [table.held for table in campaign.membership] == ["released final model"] * 2 + ["final average model"] * 2
    assert campaign.membership[0].model_copy(update={"label": None}).name == "membership (released_model)"


@pytest.mark.parametrize("table, words", [
    ({"threat": "released_model", "rounds": [3]}, "membership[0].rounds: released_model holds a final model"),
    ({"threat": "released_model", "target": "intercepted"}, "membership[0].target: released_model holds a final"),
    ({"threat": "released_model", "target": "average"}, "membership[0].target: released_model holds one agent's"),
    ({"threat": "released_average", "observer": 1}, "membership[0].observer: released_average receives the average"),
    ({"threat": "released_average", "rounds": [3]}, "membership[0].rounds: released_average holds a final model"),
    ({"threat": "released_model", "links": [[0, 1]]}, "membership[0].links: only the eavesdropper threat"),
    ({"threat": "released_model", "agents": [1]}, "membership[0].agents: only the coalition and malicious threats have agents"),
    ({"threat": "released_model", "observer": 9}, "observer 9 is not an agent (0..3)"),
    ({"threat": "released_model", "victims": [0, 1, 2], "non_members": 2}, "leaves some of the 3 victims without"),
])
def test_released_membership_tables_refuse_what_they_cannot_take_in_one_line(tmp_path, capsys, table, words):
    path = tmp_path / "c.toml"
    path.write_text(_toml(table | {"references": 2}))
    err = one_line_error(capsys, ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    assert words in err, err
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_an_inversion_still_refuses_a_released_threat_and_names_membership(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(_toml(None, '[[attack]]\nkind = "idlg"\nrounds = [0]\nthreat = "released_model"\n'))
    err = one_line_error(capsys, ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    assert "attack[0].threat" in err and "[[membership]] tables only" in err, err


def _toml(membership: dict | None, extra: str = "") -> str:
    def value(v):
        return repr(v).replace("'", '"').replace("(", "[").replace(")", "]")

    lines = ["[campaign]", 'name = "t"', "[data]"] + [f"{k} = {value(v)}" for k, v in DATA.items()]
    lines += ["[[defense]]"] + [f"{k} = {value(v)}" for k, v in DPSGD.items()]
    if membership is not None:
        lines += ["[[membership]]"] + [f"{k} = {value(v)}" for k, v in membership.items()]
    return "\n".join(lines) + "\n" + extra


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """One campaign: each victim's own final model, agent 1's for both victims, the average."""
    out = tmp_path_factory.mktemp("released")
    campaign = _campaign([OWN, OBSERVED, AVERAGE])
    lines = []
    store = run_campaign(campaign, "# test", out, progress=False, say=lines.append)
    rows = {row["label"]: row for row in store.rows() if row["type"] == "membership"}
    return campaign, out, rows, lines


def test_released_rows_say_what_was_released_and_carry_each_victims_metrics(released):
    _, out, rows, lines = released
    own, observed, average = rows["own"], rows["agent 1"], rows["average"]
    for row in rows.values():
        assert row["status"] == "ok" and row["round"] is None and row["target"] == "released"
    assert (own["threat"], observed["threat"], average["threat"]) == ("released_model", "released_model",
                                                                       "released_average")
    assert [(r["victim"], r["agents"]) for r in own["released"]] == [(0, [0]), (2, [2])]
    assert [(r["victim"], r["agents"]) for r in observed["released"]] == [(0, [1]), (2, [1])]
    assert observed["released"][0]["words"] == "the final model of agent 1, nothing of the transcript"
    assert average["released"][0]["agents"] == [0, 1, 2, 3] and "by_victim" not in average
    assert "released final model" in lines[1] and "final average model" in lines[3]
    scores = np.load(out / own["artifacts"]["scores"])
    for k, name in enumerate(METHODS):
        pooled = membership_metrics(scores[name], scores["is_member"], fprs=(0.001, 0.01), bootstrap=50, seed=k)
        assert own["metrics"][name]["auc"] == pooled.auc and own["metrics"][name]["auc_ci"] == list(pooled.auc_ci)
        assert [entry["victim"] for entry in own["by_victim"]] == [0, 2]
        for entry in own["by_victim"]:
            mine = scores["owners"] == entry["victim"]
            alone = membership_metrics(scores[name][mine], scores["is_member"][mine], fprs=(0.001, 0.01),
                                       bootstrap=50, seed=k)
            metrics = entry["metrics"][name]
            assert (metrics["auc"], metrics["tpr@0.001"], metrics["members"]) == (alone.auc, alone.tpr[0],
                                                                                  alone.members)
            assert metrics["members"] == int(scores["is_member"][mine].sum()) > 0 and "roc" not in metrics
    assert sum(entry["metrics"]["loss"]["members"] for entry in own["by_victim"]) == own["metrics"]["loss"]["members"]


def test_the_scored_model_is_the_final_model_of_the_released_agent(released):
    """The LOSS scores stored for victim 0's candidates are the losses under agent 0's final model
    (its own release) and under agent 1's (the observer's), and no other agent's; the reference
    runs give the observer's position too."""
    campaign, out, rows, _ = released
    cell = expand(campaign)[0]
    _, output = run_cell(cell)
    final = output.final_states
    defense = build_defense(cell)
    model = defense.setup.model
    for row, agent in ((rows["own"], 0), (rows["agent 1"], 1)):
        table = next(t for t in campaign.membership if t.label == row["label"])
        data = attacker_data(table, defense.setup)
        mine = data.owners == 0
        stored = np.load(out / row["artifacts"]["scores"])["loss"][mine]
        by_agent = [loss_scores(_outputs(model, final[a][None], data.candidates_x[mine], data.candidates_y[mine])[0][0])
                    for a in range(4)]
        assert [np.allclose(stored, scores, rtol=1e-6, atol=1e-9) for scores in by_agent] == [a == agent
                                                                                           for a in range(4)]
    observed = next(t for t in campaign.membership if t.label == "agent 1")
    own = observed.model_copy(update={"observer": None, "victims": [0, 1]})
    ours, theirs = (reference_models(table, "dpsgd", cell.params, defense.setup, attacker_data(table, defense.setup),
                                     cell.run.rounds).views for table in (own, observed))
    assert torch.equal(theirs[None, 0], ours[None, 1]) and not torch.equal(theirs[None, 0], ours[None, 0])


def test_the_report_shows_the_release_and_each_victim(released):
    _, out, _, _ = released
    page = without_notation(render_report(out, out / "report.html").read_text())
    section = page[page.index('id="membership"'):]
    assert "released_model: the final model of agent 1, nothing of the transcript" in section
    assert "released model of each victim" in section and "released model of agent 1" in section
    assert section.count("victim 0 alone") == 2 and section.count("victim 2 alone") == 2
    assert ResultsStore(out).rows()  # every row read back under the schema
