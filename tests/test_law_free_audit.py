"""The law-free canary audit (issue 24, item 1): any defense whose view has extractors is audited
from its own code and the runs alone — no hand-written law — and the audit is calibrated.

* A defense written outside the package, whose messages are noisier to one attacker than to
  another (it sends its noise beside its model to one neighbour), is audited from a campaign file
  alone: refuted against the global listener, who hears the noise and removes it; not against a
  curious neighbour, who does not.
* Null audits (canary absent on both sides) give ε_LB = 0 in ≥ 19 of 20 seeds; a defense of known
  ε (the worked example's Laplace gossip, pure ε, at three scales) is never refuted in 20 seeds,
  and is detected where its ε is large.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from privaudit.attacks import views
from privaudit.attacks.audit.canary_audit import audit_game
from privaudit.defenses.external import Consent, resolve
from privaudit.campaign.audit_findings import game_for_table
from privaudit.cli import main
from privaudit.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SHARE_GOSSIP = ROOT / "examples" / "share_gossip.py"
DATA = {"dataset": "digits", "max_train": 40}


def test_null_law_free_audits_find_nothing_in_19_of_20_seeds():
    table = {"kind": "dp_dpsgd", "topology": "complete", "agents": 4, "model": "logreg", "rounds": 2,
             "eval_every": 2, "batch_size": 5, "lr": 0.5, "clip": 1.0, "noise_multiplier": 1.0}
    game = game_for_table(table, DATA, statistic="projection")
    found = [audit_game(game, runs=64, seed=seed, null=True) for seed in range(20)]
    assert {record["statistic"] for record in found} == {"projection"}
    assert sum(record["eps_lb"] == 0 for record in found) >= 19


@pytest.mark.parametrize("epsilon, detected", [(0.25, 0), (1.0, 1), (4.0, 15)])
def test_a_defense_of_known_eps_is_never_refuted_law_free(epsilon, detected, third_party):
    """Laplace gossip is ε₀-DP per round (pure, one record replaced): T = 2 rounds claim 2ε₀. In 20
    seeds the law-free bound never exceeds the claim, and it finds the leak that is there (at
    ε₀ = 4, ε_LB > 0 in at least 15 seeds)."""
    resolve("examples.laplace_gossip:LaplaceGossip", Consent(("examples.laplace_gossip",), given=True))
    table = {"kind": "laplace_gossip", "topology": "complete", "agents": 4, "model": "logreg", "rounds": 2,
             "eval_every": 2, "batch_size": 10, "lr": 0.1, "clip": 1.0, "epsilon": epsilon}
    game = game_for_table(table, DATA, statistic="projection", canary_norm=1.0)
    found = [audit_game(game, runs=64, seed=seed) for seed in range(20)]
    claimed = found[0]["eps_claimed"]
    assert claimed == pytest.approx(2 * epsilon)
    assert max(record["eps_lb"] for record in found) <= claimed
    assert sum(record["eps_lb"] > 0 for record in found) >= detected


def test_a_view_with_a_law_is_scored_with_it_and_the_row_says_so():
    table = {"kind": "dp_dpsgd", "topology": "complete", "agents": 4, "model": "logreg", "rounds": 2,
             "eval_every": 2, "batch_size": 5, "lr": 0.5, "clip": 1.0, "noise_multiplier": 1.0}
    law = audit_game(game_for_table(table, DATA), runs=32, seed=0)
    free = audit_game(game_for_table(table, DATA, statistic="projection"), runs=32, seed=0)
    assert (law["statistic"], free["statistic"]) == ("law", "projection")
    assert "law-free" in free["statistic_method"] and free["protocol"] == "held-out"


def test_a_defense_with_no_extractor_cannot_be_audited_law_free(tmp_path, monkeypatch, third_party):
    """Nothing to read, nothing to audit: a one-line error, not a score of zeros."""
    source = SHARE_GOSSIP.read_text().split("\ndef _state")[0].replace('name = "share_gossip"', 'name = "mute_gossip"')
    (tmp_path / "mute_gossip.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    resolve("mute_gossip:ShareGossip", Consent(("mute_gossip",), given=True))
    table = {"kind": "mute_gossip", "topology": "complete", "agents": 4, "model": "logreg", "rounds": 2}
    with pytest.raises(ConfigError, match="has no extractor"):
        game_for_table(table, DATA)


def test_a_third_party_defense_is_refuted_against_the_attacker_who_removes_its_noise(tmp_path, monkeypatch,
                                                                                    third_party):
    """From a campaign file alone (examples/share_gossip.toml): the defense's view registers two
    extractors and no law. The global listener hears the noise each agent sends to its lowest
    neighbour and subtracts it: the release is noiseless and the claim (ε ≈ 1.85 at σ = 4, T = 3)
    is refuted. Curious neighbour 3 hears every broadcast but no share of agent 0's: its bound
    stays within the claim."""
    monkeypatch.chdir(ROOT)
    # the privacy gate (issue 27): the refuted claim fails the run, and the JUnit file says which
    assert main(["run", "examples/share_gossip.toml", "--out", str(tmp_path / "out"), "--quiet", "--allow-code",
                 "--fail-on", "refuted"]) == 1
    suite = ElementTree.parse(tmp_path / "out" / "verdicts.junit.xml").getroot()
    failed = [case.get("name") for case in suite if case.find("failure") is not None]
    assert suite.get("failures") == "1" and len(failed) == 1 and "share gossip" in failed[0].lower()
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    audits = {row["label"]: row for row in rows if row["type"] == "audit"}
    listener, neighbour = audits["global listener"], audits["curious neighbour 3"]
    assert listener["detail"]["statistic"] == neighbour["detail"]["statistic"] == "projection"
    assert "law-free" in listener["attack"]
    assert listener["detail"]["channels"] == ["noisy", "exact"] and neighbour["detail"]["channels"] == ["noisy"]
    assert listener["relation"]["same"] and listener["verdict"]["status"] == "refuted", listener["verdict"]
    assert listener["eps_lb"] > listener["eps_claimed"]
    assert neighbour["verdict"]["status"] != "refuted" and neighbour["eps_lb"] <= neighbour["eps_claimed"]
    assert views.described("share_gossip")["canary_audit"] == "law-free"  # what `privaudit list` says of it
