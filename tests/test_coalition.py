"""The coalition threat model (privaudit/attacks/coalition/knowledge.py, privaudit/campaign/coalition_findings.py):
exact recovery where the algebra is exact, identifiability computed from the system, and a
campaign that runs it on every shipped defense it names."""

import numpy as np
import pytest
import torch

from privaudit.attacks.coalition.knowledge import exposure, knowledge_system, recover
from privaudit.errors import ConfigError
from privaudit.topology import Topology
from privaudit.wire import Disclosure, Kind, Message, PublicKnowledge, Transcript


def _gossip(topology: Topology, gradients: np.ndarray, rounds: int, lr: float, members: list[int]) -> Transcript:
    """What `members` hear of D-PSGD when every agent's gradient is the constant row of
    `gradients` (float64 payloads): the case where the similarity assumption is exact."""
    W = topology.W
    x0 = np.linspace(-1, 1, gradients.shape[1])
    states = np.tile(x0, (len(W), 1))
    heard = {j for c in members for j in topology.neighbours(c)} | set(members)
    messages, disclosures = [], []
    for t in range(rounds + 1):
        messages += [Message(t, k, None, Kind.MODEL, torch.from_numpy(states[k].copy())) for k in heard]
        disclosures += [Disclosure(t, c, "gradient", torch.from_numpy(gradients[c].copy())) for c in members]
        states = W @ states - lr * gradients
    public = PublicKnowledge("dpsgd", topology.name, W, "none", (1,), 1, torch.from_numpy(x0), hyper={"lr": lr})
    return Transcript("coalition", None, messages, disclosures, public)


def test_a_curious_end_of_a_line_recovers_every_constant_gradient():
    """Where the gradients really are constant, the assumption costs nothing: every agent's is
    recovered to rounding; only the neighbour is determined without the assumption."""
    topology = Topology.build("line", 6)
    gradients = np.random.default_rng(0).normal(size=(6, 5))
    found = recover(_gossip(topology, gradients, 8, 0.1, [0]), [0], 0, 8)
    assert [(r.agent, r.exposure) for r in found] == [(1, "exact")] + [(k, "assumed") for k in range(2, 6)]
    for r in found:
        error = np.linalg.norm(r.target.gradient.numpy() - gradients[r.agent]) / np.linalg.norm(gradients[r.agent])
        assert error < 1e-6, (r.agent, error)


def test_a_window_shorter_than_the_distance_hides_the_far_agents():
    """Information crosses one link per round: after 2 rounds agent 0 of a line has heard nothing
    that depends on agents 3..5, and the system says so."""
    topology = Topology.build("line", 6)
    assert exposure(topology, [0], "dpsgd", 2) == {1: "exact", 2: "assumed", 3: "hidden", 4: "hidden", 5: "hidden"}
    assert "hidden" not in exposure(topology, [0], "dpsgd", 6).values()


def test_fresh_quantization_draws_hide_everyone_from_a_coalition_on_a_ring():
    """Ternary agents mix each other's random draws; the coalition never hears those of
    non-neighbours, so each round adds unknowns as fast as equations."""
    assert set(exposure(Topology.build("ring", 8), [0], "ternary", 8).values()) == {"hidden"}


def test_the_system_has_one_equation_per_heard_message():
    topology = Topology.build("ring", 5)
    system = knowledge_system(_gossip(topology, np.ones((5, 3)), 4, 0.1, [0]), [0], 0, 4)
    assert system.matrix.shape == (3 * 5, 4) and system.observations.shape == (15, 3)
    per_round = knowledge_system(_gossip(topology, np.ones((5, 3)), 4, 0.1, [0]), [0], 0, 4, constant=False)
    assert per_round.matrix.shape == (15, 4 * 4)


def _campaign(defenses, attack):
    base = {"topology": "line", "agents": 6, "model": "mlp", "rounds": 8, "eval_every": 8, "batch_size": 1}
    return {"campaign": {"name": "coalition-test", "seeds": [0]},
            "data": {"dataset": "digits", "max_train": 6, "min_size": 1},
            "defense": [base | d for d in defenses], "attack": [attack]}


def test_a_coalition_campaign_runs_and_reports_each_agent(tmp_path):
    """Acceptance: a campaign with threat = "coalition" on a small graph, in the suite (< 30 s)."""
    from privaudit.campaign.config import parse_campaign
    from privaudit.campaign.run import run_campaign
    from privaudit.reports.html import render_report

    raw = _campaign([{"kind": "dpsgd", "label": "D-PSGD", "lr": 0.2,
                      "model_options": {"hidden": [16], "activation": "sigmoid"}},
                     {"kind": "dpdl", "label": "DPDL", "noise_multiplier": 1.0}],
                    {"kind": "idlg", "label": "coalition", "threat": "coalition", "agents": [0], "rounds": [0],
                     "window": 6, "defense": ["D-PSGD", "DPDL"]})
    store = run_campaign(parse_campaign(raw), "# t", tmp_path / "out", progress=False, say=lambda _: None)
    rows = store.rows()
    found = {row["defense_label"]: row for row in rows if row.get("type") == "coalition"}
    dpsgd, dpdl = found["D-PSGD"], found["DPDL"]
    assert dpsgd["status"] == "ok" and dpsgd["exposed"] == 5 and dpsgd["exact"] == 1 and dpsgd["fitted"] == 4
    assert dpsgd["record_fit"]["status"] == "accepted" and dpsgd["record_fit"]["residual"] < 1e-6
    assert [a["exposure"] for a in dpsgd["agents"]] == ["exact"] + ["fitted"] * 4
    for agent in dpsgd["agents"]:
        assert agent["relative_error"] < 1e-4 and agent["metrics"]["psnr"] > 30, agent["agent"]
        assert agent["leak"]["leak"] and len(agent["floor"]["ssim"]) == 199
    assert dpdl["status"].startswith("failed: DPDL") and dpdl["agents"] == []
    assert 'id="coalition"' in render_report(tmp_path / "out").read_text()


@pytest.mark.parametrize("attack, message", [
    ({"threat": "coalition", "rounds": [0]}, "agents"),
    ({"threat": "coalition", "agents": [0], "victim": 2, "rounds": [0]}, "victim"),
    ({"threat": "global_listener", "agents": [0], "rounds": [0]}, "agents"),
    ({"threat": "coalition", "agents": [0], "rounds": [0], "scenario": "state_difference"}, "scenario"),
])
def test_coalition_fields_are_checked(attack, message):
    from privaudit.campaign.config import parse_campaign

    raw = _campaign([{"kind": "dpsgd", "label": "D-PSGD", "lr": 0.001}], {"kind": "idlg"} | attack)
    with pytest.raises(ConfigError, match=message):
        parse_campaign(raw)


def test_a_coalition_membership_table_is_refused():
    from privaudit.campaign.config import parse_campaign

    with pytest.raises(ConfigError, match=r"\[\[attack\]\] tables only"):
        parse_campaign({"campaign": {"name": "x"}, "data": {"dataset": "digits"},
                        "defense": [{"kind": "dpsgd", "rounds": 3}],
                        "membership": [{"threat": "coalition", "agents": [0], "rounds": [1]}]})
