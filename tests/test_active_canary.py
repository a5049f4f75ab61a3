"""Issue 39 item 3: active record-canary audits. An `[[audit]]` canary table with threat =
"malicious" steers the victim every round for a record canary (`privaudit.attacks.active.steering`):
it parses and checks, is refused in one line where it does not apply, runs on an audit's batched
worlds exactly as its worlds read one by one, gives ε_LB = 0 on a null audit, never exceeds the
sound ε on small runs, and its row says who lied and what it assumed."""

import copy

import pytest
import torch

from privaudit.attacks.active.steering import ACTIVATION, UNIT
from privaudit.attacks.audit.canary_audit import _scores_of, audit_game, world
from privaudit.campaign.audit_findings import game_for_table
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main
from privaudit.defenses import DEFENSES
from privaudit.errors import ConfigError
from privaudit.grads import per_sample_grads
from privaudit.rows import AuditRow
from privaudit.sim import simulate
from privaudit.wire import Kind
from privaudit.worlds import Replicated, one_world
from tests.helpers import campaign_file, one_line_error

DATA = {"dataset": "digits", "max_train": 200}
DP = {"kind": "dp_dpsgd", "label": "DP", "topology": "complete", "agents": 4, "rounds": 4, "eval_every": 4,
      "model": "mlp", "model_options": {"hidden": [16]}, "lr": 0.5, "batch_size": 10, "clip": 1.0,
      "noise_multiplier": 1.0, "delta": 1e-5}
AUDIT = {"kind": "canary", "threat": "malicious", "canary": "record", "runs": 16}


def _toml(tmp_path, audit=AUDIT, defense=DP):
    return campaign_file(tmp_path / "active_audit.toml", defense, "audit", audit, data=("max_train = 200",))


@pytest.fixture(scope="module")
def game():
    return game_for_table(DP, DATA, canary="record", threat="malicious")


def test_a_malicious_canary_audit_table_parses_and_checks(tmp_path, capsys):
    campaign = parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": DATA, "defense": [DP],
                               "audit": [AUDIT | {"agents": [1, 2], "liar": 2}]})
    assert (campaign.audit[0].threat, campaign.audit[0].liar, campaign.audit[0].agents) == ("malicious", 2, [1, 2])
    assert main(["check", _toml(tmp_path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("change, named", [
    ({"canary": "gradient"}, "canary"),
    ({"method": "one_run", "runs": None}, "method"),
    ({"protocol": "model"}, "protocol"),
    ({"threat": "global_listener", "liar": 1}, "liar"),
    ({"threat": "global_listener", "agents": [1]}, "agents"),
])
def test_what_the_steering_cannot_serve_is_refused_in_one_line(tmp_path, capsys, change, named):
    audit = {k: v for k, v in (AUDIT | change).items() if v is not None}
    assert named in one_line_error(capsys, ["check", _toml(tmp_path, audit)])


def test_a_liar_that_cannot_hear_the_victims_neighbours_is_refused_in_one_line():
    ring = DP | {"topology": "ring"}
    with pytest.raises(ConfigError) as refused:
        game_for_table(ring, DATA, canary="record", threat="malicious")
    assert "cannot steer" in str(refused.value) and len(str(refused.value).splitlines()) == 1
    assert game_for_table(ring, DATA, canary="record", threat="malicious", agents=[1, 3]).active["agents"] == [1, 3]


def test_the_steered_point_isolates_the_canary_in_one_unit_and_misclassifies_it(game):
    model, detector = game.setup.model, game.tap.strategy.detector
    point = detector.steered(model, model.initial()[None])[0]
    (units, features), _, _, _ = model.shapes
    rows, biases = point[:units * features].reshape(units, features), point[units * features:units * (features + 1)]
    canary = game.canaries.x[0].reshape(-1).double()
    fired = rows @ canary + biases
    assert fired[UNIT] == pytest.approx(ACTIVATION)
    assert (torch.cat([fired[:UNIT], fired[UNIT + 1:]]) <= -ACTIVATION + 1e-9).all()
    public = game.setup.data.x_test.reshape(len(game.setup.data.x_test), -1).double()
    below = public @ detector.direction <= 2 * detector.threshold - detector.projection
    assert below.float().mean() > 0.9
    assert (public[below] @ rows[UNIT] + biases[UNIT] <= -ACTIVATION + 1e-9).all()
    gradient = per_sample_grads(model, point.float(), game.canaries.x, game.canaries.y)[0]
    assert gradient.norm() > 10 * DP["clip"]
    own, labels = game.setup.local.shard(game.victim)
    others = per_sample_grads(model, point.float(), own, labels)
    unit_row = others[:, UNIT * features:(UNIT + 1) * features]
    assert float(unit_row.abs().max()) == 0.0


def test_a_batched_steered_audit_equals_its_worlds_read_one_by_one(game):
    present = torch.ones(1, dtype=torch.bool)
    stacked = _scores_of(game, present, 7, 3, "stacked")
    alone = _scores_of(game, present, 7, 3, "alone")
    assert stacked.reading == "stacked"
    assert torch.allclose(torch.from_numpy(stacked.values), torch.from_numpy(alone.values), rtol=1e-6, atol=1e-9)
    setup = world(game, present, 7, 3)
    tap = Replicated(game.tap, game.setup.topology, 3)
    defense = DEFENSES[game.kind](game.params, setup)
    output = simulate(defense, game.rounds, taps=[tap], evaluation=False)
    transcript = output.transcripts[0]
    strategy, liar = game.tap.strategy, game.tap.strategy.plan.liar
    receivers = game.setup.topology.neighbours(liar)
    for round in range(game.rounds):
        (sent,) = transcript.find(Kind.MODEL, round=round, sender=liar, receiver=game.victim)
        for w in range(3):
            own = strategy.craft(round, Kind.MODEL, liar, receivers, one_world(transcript, w))[game.victim]
            assert torch.allclose(sent.payload[w].double(), own.float().double(), rtol=1e-6, atol=1e-6)


def test_one_stacked_world_lies_as_the_unstacked_wire_does(game):
    present = torch.ones(1, dtype=torch.bool)
    runs = []
    for tap in (Replicated(copy.deepcopy(game.tap), game.setup.topology, 1), copy.deepcopy(game.tap)):
        defense = DEFENSES[game.kind](game.params, world(game, present, 11, 1))
        simulate(defense, game.rounds, taps=[tap], evaluation=False)
        runs.append(defense.states.detach().clone())
    assert torch.equal(runs[0], runs[1])


def test_a_null_active_audit_bounds_nothing(game):
    record = audit_game(game, runs=32, seed=0, null=True)
    assert record["eps_lb"] == 0 and record["active"]["liar"] == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_active_audits_stay_below_the_sound_eps_on_small_runs(seed):
    quiet = game_for_table(DP | {"noise_multiplier": 20.0, "rounds": 3, "eval_every": 3}, DATA, seed=seed,
                           canary="record", threat="malicious")
    record = audit_game(quiet, runs=96, seed=seed)
    assert record["eps_sound"] < 0.5
    assert record["eps_lb"] <= record["eps_sound"]


def test_the_row_says_who_lied_what_it_assumed_and_the_claims_threat_model(tmp_path):
    raw = {"campaign": {"name": "t", "seeds": [0]}, "data": DATA, "defense": [DP], "audit": [AUDIT]}
    store = run_campaign(parse_campaign(raw), "# test", tmp_path, progress=False, say=lambda line: None)
    (row,) = [row for row in store.rows() if row["type"] == "audit"]
    AuditRow.model_validate(row)
    assert row["threat"] == "malicious" and row["active"]["liar"] == 1 and row["active"]["victim"] == 0
    assert any("lies at every round" in line for line in row["active"]["assumptions"])
    assert row["verdict"]["threat"].startswith("any adversary") and row["verdict"]["status"] != "refuted"
    assert "steers the victim" in row["attack"]
