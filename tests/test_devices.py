"""The device an audit's worlds run on (`privaudit.devices`): chosen once, from `PRIVAUDIT_DEVICE`
or what torch sees, refused in one line when it names no usable device; on a CUDA device every
shipped defense's worlds run, are read stacked as on the CPU, and score with the CPU's law (the
draws differ, so samples are compared as distributions). The CUDA tests run where torch sees a GPU."""

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
    assert record["device"] == "cuda" and record["worlds_per_simulation"] > 1024
    assert 0 < record["eps_lb"] <= record["eps_sound"]
    cpu = scores(game, 400, True, seed=1, side=1, device=torch.device("cpu"))[0]
    assert abs(float(np.mean(cpu)) - record["scores"]["with"]["mean"]) < 0.5 * float(np.std(cpu))
