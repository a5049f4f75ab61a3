"""The device all work runs on (`privaudit.devices`): chosen once, from `PRIVAUDIT_DEVICE`
or what torch sees, refused in one line when it names no usable device; on a CUDA device every
shipped defense's worlds run, are read stacked as on the CPU, and score with the CPU's law (the
draws differ, so samples are compared as distributions). Every row of a campaign names its device;
on CUDA a small campaign trains, inverts (DLG), infers membership with reference models, plays a
reconstruction game and a coalition attack there. The CUDA tests run where torch sees a GPU."""

import numpy as np
import pytest
import torch

from privaudit.attacks.audit.canary_audit import _scores_of, audit_game, scores
from privaudit import devices
from privaudit.campaign.audit_findings import game_for_table
from privaudit.errors import ConfigError
from tests.test_canary import DATA, DP, EVERY_DEFENSE

CUDA = torch.device("cuda")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


def test_the_device_is_the_variable_else_cuda_where_torch_sees_one(monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_DEVICE", "cpu")
    assert devices.work_device() == torch.device("cpu")
    monkeypatch.delenv("PRIVAUDIT_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.work_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.work_device() == CUDA


@pytest.mark.parametrize("value, message", [("gpu0", "names no device"), ("meta", "only cpu and cuda"),
                                            ("cuda:7", "CUDA device")])
def test_a_device_that_cannot_be_used_is_a_one_line_error(monkeypatch, value, message):
    monkeypatch.setenv("PRIVAUDIT_DEVICE", value)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match=message):
        devices.work_device()


def test_an_audit_row_names_its_device():
    assert audit_game(game_for_table(DP, DATA), runs=16)["device"] == "cpu"


def test_a_set_up_stays_itself_on_the_cpu():
    game = game_for_table(DP, DATA)
    assert game.setup.to(torch.device("cpu")) is game.setup


GAMES = [("dp_dpsgd", DATA, {k: v for k, v in DP.items() if k != "kind"})] + [row[:3] for row in EVERY_DEFENSE]


@needs_cuda
@pytest.mark.parametrize("kind, data, table", GAMES, ids=[kind for kind, _, _ in GAMES])
def test_every_shipped_defense_runs_its_worlds_on_cuda_with_the_cpus_law(kind, data, table):
    from scipy.stats import ks_2samp

    game = game_for_table({"kind": kind, **table}, data)
    present = torch.ones(len(game.canaries), dtype=torch.bool)
    cpu = _scores_of(game, present, 5, 300, "check", torch.device("cpu"))
    gpu = _scores_of(game, present, 5, 300, "check", CUDA)
    on_cpu, on_gpu, features = cpu.values, gpu.values, gpu.features
    assert gpu.reading == cpu.reading
    assert np.isfinite(on_gpu).all() and np.isfinite(features).all() and features.shape[0] == 300
    # rounded: a defense whose scores take a few values (ternary) puts mass on atoms that the two
    # devices' arithmetic places a rounding error apart, and KS would read that as a different law
    assert ks_2samp(np.round(on_cpu, 4), np.round(on_gpu, 4)).pvalue > 1e-3


@needs_cuda
def test_closed_form_clipped_sums_on_cuda_equal_autograd_there():
    game = game_for_table(DP, DATA)
    model = game.setup.model.to(CUDA)
    x, y = (t.to(CUDA) for t in game.setup.local.shards())
    flats = torch.randn(8, model.dim, device=CUDA) * 0.1
    mask = torch.rand(8, x.shape[1], device=CUDA) < 0.3
    closed = model.clipped_sums(flats, x, y, mask.float(), 1.0)
    plain = model.without_closed_forms()
    grads = plain.sample_grads(flats.repeat_interleave(x.shape[1], 0), torch.cat([x, x]).flatten(0, 1),
                               torch.cat([y, y]).flatten())
    clipped = grads * torch.clamp(1.0 / (grads.norm(dim=1, keepdim=True) + 1e-12), max=1.0)
    reference = (clipped.reshape(8, x.shape[1], -1) * mask[..., None]).sum(1)
    torch.testing.assert_close(closed, reference, rtol=1e-4, atol=1e-5)


@needs_cuda
def test_a_whole_audit_on_cuda_bounds_below_the_sound_eps(monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_DEVICE", "cuda")
    game = game_for_table({**DP, "rounds": 30}, DATA)
    record = audit_game(game, runs=4000)
    assert record["device"] == "cuda:0" and record["worlds_per_simulation"] > 1024
    assert 0 < record["eps_lb"] <= record["eps_sound"]
    cpu = scores(game, 400, True, seed=1, side=1, device=torch.device("cpu"))[0]
    assert abs(float(np.mean(cpu)) - record["scores"]["with"]["mean"]) < 0.5 * float(np.std(cpu))


DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "rounds": 3, "eval_every": 3, "batch_size": 1, "lr": 0.1,
         "model": "logreg"}
SMALL = {"campaign": {"name": "devices", "seeds": [0]}, "data": {"dataset": "digits", "test_fraction": 0.5},
         "defense": [DPSGD],
         "attack": [{"kind": "dlg", "label": "DLG", "rounds": [0], "evaluations": 20}],
         "membership": [{"label": "LOSS", "target": "average", "references": 2, "non_members": 50,
                         "rmia_samples": 50, "bootstrap": 20}],
         "audit": [{"kind": "reconstruction", "label": "rebuild", "trials": 2},
                   {"kind": "mechanism", "label": "ternary", "mechanism": "ternary", "params": {"r": 10},
                    "samples": 2000}]}
COALITION = {"campaign": {"name": "devices-coalition", "seeds": [0]},
             "data": {"dataset": "digits", "max_train": 6, "min_size": 1},
             "defense": [{"kind": "dpsgd", "label": "D-PSGD", "topology": "line", "agents": 6, "model": "mlp",
                          "rounds": 8, "eval_every": 8, "batch_size": 1, "lr": 0.2,
                          "model_options": {"hidden": [16], "activation": "sigmoid"}}],
             "attack": [{"kind": "idlg", "label": "coalition", "threat": "coalition", "agents": [0], "rounds": [0],
                         "window": 6}]}

CPU_COALITION = COALITION | {"defense": [COALITION["defense"][0] | {"agents": 3, "rounds": 3, "eval_every": 3}],
                             "attack": [COALITION["attack"][0] | {"window": 2, "evaluations": 20}]}
"""The coalition campaign on a line of 3 over 2 rounds, for the CPU's test: its row names the device
whatever the attack recovers, at a tenth of the work (1 s of CPU against 11 s)."""


def _rows(raw, out):
    from privaudit.campaign.config import parse_campaign
    from privaudit.campaign.run import run_campaign

    return run_campaign(parse_campaign(raw), "# t", out, progress=False, say=lambda _: None).rows()


def _devices(rows):
    """The device every row names, by row type (a leak's reconstruction audit as its own)."""
    named: dict[str, set] = {}
    for row in rows:
        named.setdefault(row["type"], set()).add(row.get("device"))
        if row.get("reconstruction_audit"):
            named.setdefault("reconstruction_audit", set()).add(row["reconstruction_audit"].get("device"))
    return named


def test_a_cuda_device_is_named_with_its_index(monkeypatch):
    assert devices.name(torch.device("cpu")) == "cpu"
    assert devices.name(torch.device("cuda", 1)) == "cuda:1"
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert devices.name(CUDA) == "cuda:0"


def test_every_row_of_a_campaign_names_the_cpu_it_ran_on(tmp_path):
    from privaudit.rows import MODELS

    named = _devices(_rows(SMALL, tmp_path / "small") + _rows(CPU_COALITION, tmp_path / "coalition"))
    assert set(MODELS) <= named.keys()
    assert all(found == {"cpu"} for found in named.values()), named
    assert all("device" in model.model_fields for model in MODELS.values())


@needs_cuda
def test_a_campaign_trains_inverts_infers_and_audits_on_cuda(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_DEVICE", "cuda")
    rows = _rows(SMALL, tmp_path / "small") + _rows(COALITION, tmp_path / "coalition")
    for row in rows:
        if row["type"] == "audit" and row["kind"] == "mechanism":
            assert row["device"] == "cpu"
        else:
            assert row["device"].startswith("cuda:"), (row["type"], row["device"])
        assert row.get("status", "ok") == "ok" or row["type"] == "coalition", (row["type"], row.get("status"))
    by_type = {row["type"]: row for row in rows if row["type"] != "audit"}
    assert 0.0 <= by_type["training"]["metrics"]["avg_acc"] <= 1.0
    inversion = by_type["inversion"]["metrics"]
    assert inversion["psnr"] is not None and 0 < inversion["psnr"] < 200 and 0 <= inversion["mse"] <= 1
    assert 0.0 <= by_type["membership"]["metrics"]["loss"]["auc"] <= 1.0
    (rebuild,) = [row for row in rows if row["type"] == "audit" and row["kind"] == "reconstruction"]
    assert rebuild["detail"]["trials"] == 2 and rebuild["eps_lb"] >= 0
    coalition = by_type["coalition"]
    assert coalition["status"] == "ok" and coalition["exposed"] == 5
    assert all(agent["metrics"]["psnr"] > 30 for agent in coalition["agents"])
