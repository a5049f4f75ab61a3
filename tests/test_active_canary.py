"""Issue 39 item 3: active record-canary audits. An `[[audit]]` canary table with threat =
"malicious" steers the victim every round for a record canary (`privaudit.attacks.active.steering`):
it parses and checks, is refused in one line where it does not apply, runs on an audit's batched
worlds exactly as its worlds read one by one (tests/test_active_audit_seeds.py, with the seed
algorithms), gives ε_LB = 0 on a null audit, never exceeds the sound ε on small runs, and its row
says who lied and what it assumed."""

import pytest
import torch

from privaudit.attacks.active.steering import ACTIVATION, UNIT
from privaudit.attacks.audit.canary_audit import audit_game
from privaudit.campaign.audit_findings import game_for_table
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError
from privaudit.grads import per_sample_grads
from privaudit.rows import AuditRow
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
