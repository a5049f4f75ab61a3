"""Directed eavesdropping (issue 24): a tap on i → j hears what i sends to j and i's broadcasts,
never what j sends back, and mixes freely with undirected links; campaign tables spell it
`directed_links = [[i, j]]` without moving the ids of tables that do not use it."""

import inspect
import json

import pytest
import torch

from privaudit.attacks.audit.canary_audit import make_game
from privaudit.attacks.views import EXTRACTORS, MODEL_VIEWS
from privaudit.campaign.audit_findings import game_options
from privaudit.campaign.cells import expand, expand_all, expand_attacks
from privaudit.campaign.config import AuditConfig, parse_campaign, read_campaign
from privaudit.campaign.inversion_findings import attack_taps, unheard
from privaudit.campaign.run import run_campaign
from privaudit.errors import ConfigError
from privaudit.threats import build_tap
from privaudit.topology import Topology
from privaudit.wire import Eavesdropper, Kind, Wire
from tests.demo_rows import STORED

RING = Topology.build("ring", 5)  # 0-1-2-3-4-0
LT_ADMM = {"kind": "lt_admm_dp", "label": "LT", "topology": "ring", "agents": 4, "model": "logreg",
           "model_options": {"binary": True}, "rounds": 2, "eval_every": 2, "tau": 1, "batch_size": 2,
           "sigma_e": 0.5}


def _traffic(wire: Wire) -> None:
    """Every agent broadcasts its model and sends a cross-gradient to each neighbour, once."""
    for i in range(RING.n):
        wire.broadcast(0, i, Kind.MODEL, torch.full((3,), float(i)))
        for j in RING.neighbours(i):
            wire.send(0, i, j, Kind.CROSS_GRADIENT, torch.full((2,), float(10 * i + j)))


def _heard(tap) -> set[tuple[int, int | None]]:
    return {(m.sender, m.receiver) for m in tap.messages}


def test_a_directed_eavesdropper_hears_one_direction_and_only_its_senders_broadcasts():
    tap = Eavesdropper(directed=[(0, 1)])
    _traffic(Wire(RING, [tap]))
    assert _heard(tap) == {(0, 1), (0, None)}
    assert tap.hears(0, 1, RING) and tap.hears(0, None, RING)
    assert not tap.hears(1, 0, RING) and not tap.hears(1, None, RING)


def test_a_tap_mixes_undirected_and_directed_links():
    tap = build_tap("eavesdropper", 0, RING, links=[(2, 3)], directed_links=[(0, 1), (4, 0)])
    _traffic(Wire(RING, [tap]))
    assert _heard(tap) == {(2, 3), (3, 2), (2, None), (3, None), (0, 1), (0, None), (4, 0), (4, None)}


def test_directed_links_alone_replace_the_default_of_every_victim_link():
    tap = build_tap("eavesdropper", 0, RING, directed_links=[(1, 0)])
    assert tap.hears(1, 0, RING) and not tap.hears(0, 1, RING) and not tap.hears(0, None, RING)
    everything = build_tap("eavesdropper", 0, RING)
    assert all(everything.hears(*arc, RING) for arc in [(0, 1), (1, 0), (0, 4), (4, 0), (0, None)])


@pytest.mark.parametrize("arc", [(0, 2), (3, 3)])
def test_a_directed_link_off_the_topology_is_a_one_line_error(arc):
    i, j = arc
    one_line = f"^eavesdropper directed link {i} → {j} is not an edge of the ring topology$"
    with pytest.raises(ValueError, match=one_line):
        build_tap("eavesdropper", 0, RING, directed_links=[arc])
    with pytest.raises(ValueError, match="is not an edge"):
        Wire(RING, [Eavesdropper(links=[(0, 1)], directed=[arc])])


def test_an_extractor_needing_both_directions_says_which_one_is_missing():
    view = MODEL_VIEWS["lt_admm_dp"]
    assert view.missing(Eavesdropper(directed=[(0, 1)]), 0, RING) == "it does not hear agent 1's messages to agent 0"
    assert view.missing(Eavesdropper(directed=[(1, 0)]), 0, RING) == "it does not hear agent 0's messages to agent 1"
    assert view.missing(Eavesdropper(directed=[(0, 1), (1, 0)]), 0, RING) is None
    assert view.missing(Eavesdropper(links=[(4, 0)], directed=[(0, 1)]), 0, RING) is None


def _lt_campaign(attack: dict):
    return parse_campaign({"campaign": {"name": "t"}, "data": {"dataset": "logistic", "samples_per_agent": 8},
                           "defense": [LT_ADMM], "attack": [attack]})


def test_an_attack_table_with_directed_links_is_checked_against_the_extractor(tmp_path):
    attack = {"kind": "dlg", "scenario": "bridge", "rounds": [0], "threat": "eavesdropper",
              "directed_links": [[0, 1], [0, 3]]}
    campaign = _lt_campaign(attack)
    assert campaign.attack[0].directed_links == [(0, 1), (0, 3)]
    cell = expand_attacks(campaign, expand(campaign))[0]
    topology = Topology.build("ring", 4)
    tap, _ = attack_taps(cell.attack, "lt_admm_dp", "bridge", 0, topology)
    why = unheard(cell.attack, "lt_admm_dp", "bridge", 0, tap, topology)
    assert why.startswith("not possible for this attacker: the eavesdropper tap cannot feed the attack (it does not "
                          "hear agent 1's "
                          "messages to agent 0")
    store = run_campaign(campaign, "# test", tmp_path, progress=False, say=lambda line: None)
    [row] = [row for row in store.read().rows if row["cell"] == cell.id]
    assert "does not hear agent 1's messages to agent 0" in json.dumps(row)
    assert EXTRACTORS["lt_admm_dp", "bridge"].missing(build_tap("eavesdropper", 0, topology), 0, topology) is None


@pytest.mark.parametrize("table, expected", [
    ({"threat": "curious_neighbour", "directed_links": [[0, 1]]},
     "attack[0].directed_links: only the eavesdropper threat has links"),
    ({"threat": "eavesdropper", "directed_links": [[0, 2]]}, "eavesdropper directed link 0 → 2 is not an edge"),
    ({"threat": "eavesdropper", "directed_links": [[0, 1, 2]]}, "attack[0].directed_links"),
])
def test_bad_directed_links_in_a_table_give_one_line(table, expected):
    with pytest.raises((ConfigError, ValueError)) as raised:
        campaign = _lt_campaign({"kind": "dlg", "scenario": "bridge", "rounds": [0]} | table)
        cell = expand_attacks(campaign, expand(campaign))[0]
        attack_taps(cell.attack, "lt_admm_dp", "bridge", 0, Topology.build("ring", 4))
    assert expected in str(raised.value) and len(str(raised.value).strip().splitlines()) == 1


def test_tables_without_directed_links_keep_their_dump_and_cell_ids():
    plain = {"kind": "dlg", "scenario": "bridge", "rounds": [0], "threat": "eavesdropper", "links": [[0, 1]]}
    without = _lt_campaign(plain)
    assert "directed_links" not in without.attack[0].model_dump(mode="json")
    directed = _lt_campaign(plain | {"directed_links": [[0, 3]]})
    assert directed.attack[0].model_dump(mode="json")["directed_links"] == [[0, 3]]
    ids = [expand_attacks(c, expand(c))[0].id for c in (without, directed)]
    assert ids[0] != ids[1]
    stored = {row["cell"] for row in json.loads(STORED.read_text())["rows"]}
    assert {cell.id for kind in expand_all(read_campaign(None)[0]) for cell in kind} == stored


def test_a_canary_audit_table_passes_its_directed_links_to_the_game():
    table = AuditConfig(kind="canary", threat="eavesdropper", directed_links=[(0, 1)])
    assert game_options(table)["directed_links"] == [(0, 1)]
    assert "directed_links" in inspect.signature(make_game).parameters
