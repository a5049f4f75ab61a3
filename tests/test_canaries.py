"""The canaries an auditor plants: planted gradients behave as one record's gradient, quiet
directions are quiet, crafted records are orthogonal to the victim's inputs."""

import math

import numpy as np
import pytest
import torch

from privaudit.attacks.audit.canaries import (PlantedModel, gradient_canaries, outlier_canaries, quiet_directions,
                                    record_canaries, with_records)
from privaudit.grads import batch_grad, per_sample_grads


def _setup(**table):
    from privaudit.campaign.cells import build_setup, expand
    from tests.helpers import small_campaign

    base = {"kind": "dp_dpsgd", "topology": "complete", "agents": 4, "model": "logreg", "rounds": 4, "batch_size": 10}
    return build_setup(expand(small_campaign([base | table], max_train=200))[0])


def test_a_planted_record_has_its_gradient_at_every_point_and_others_keep_theirs():
    setup = _setup()
    canaries = gradient_canaries(setup, 0, 2, norm=3.0, seed=0)
    model = canaries.model(setup.model)
    assert isinstance(model, PlantedModel)
    x, y = setup.local.shard(0)
    batch_x = torch.cat([x[:3], canaries.x[:1], canaries.anti_x[1:2]])
    batch_y = torch.cat([y[:3], canaries.y[:1], canaries.anti_y[1:2]])
    for seed in range(3):
        point = setup.model.initial() + torch.randn(setup.model.dim, generator=torch.Generator().manual_seed(seed))
        grads = per_sample_grads(model, point, batch_x, batch_y)
        assert torch.allclose(grads[:3], per_sample_grads(setup.model, point, x[:3], y[:3]), atol=1e-6)
        assert torch.allclose(grads[3], 3.0 * canaries.u[0], atol=1e-6)
        assert torch.allclose(grads[4], -3.0 * canaries.u[1], atol=1e-6)
        assert torch.allclose(batch_grad(model, point, batch_x, batch_y), grads.mean(0), atol=1e-6)


def test_quiet_directions_are_orthogonal_to_the_victims_gradients_of_a_linear_model_everywhere():
    setup = _setup()
    u = quiet_directions(setup, 1, 3, seed=0)
    assert torch.allclose(u @ u.T, torch.eye(3), atol=1e-5)
    x, y = setup.local.shard(1)
    for seed in range(3):
        point = torch.randn(setup.model.dim, generator=torch.Generator().manual_seed(10 + seed)) * 2
        grads = per_sample_grads(setup.model, point, x, y)
        assert (grads @ u.T).abs().max() < 1e-4 * grads.norm(dim=1).max()


def test_a_coordinate_canary_picks_the_quietest_coordinates():
    setup = _setup()
    u = quiet_directions(setup, 0, 2, seed=0, coordinate=True)
    assert ((u == 0) | (u == 1)).all() and (u.sum(1) == 1).all()


def test_a_crafted_record_is_orthogonal_to_the_victims_inputs_and_long():
    setup = _setup()
    canaries = record_canaries(setup, 2, 1, label=3, scale=2.0, seed=0)
    x, _ = setup.local.shard(2)
    flat = canaries.x.reshape(1, -1)
    assert (x.reshape(len(x), -1) @ flat.T).abs().max() < 1e-3 * flat.norm()
    assert flat.norm() == pytest.approx(2.0 * math.sqrt(flat.shape[1]), rel=1e-5)
    assert int(canaries.y) == 3 and torch.equal(canaries.anti_x, -canaries.x)


def test_record_canaries_point_along_their_own_gradient():
    setup = _setup()
    canaries = outlier_canaries(setup, 2, label=None, scale=2.0, seed=0)
    points = setup.model.initial()[None].expand(3, -1)
    grads = per_sample_grads(setup.model, points[0], canaries.x, canaries.y)
    vectors = torch.randn(3, setup.model.dim, generator=torch.Generator().manual_seed(0))
    projected, lengths = canaries.projections(setup.model, points, vectors)
    assert projected.shape == lengths.shape == (3, 2)
    assert torch.allclose(lengths[0], grads.norm(dim=1), atol=1e-5)
    assert torch.allclose(projected, vectors @ (grads / grads.norm(dim=1, keepdim=True)).T, atol=1e-4)
    assert torch.allclose(canaries.projections(setup.model, points, grads[:1].expand(3, -1))[0][:, 0],
                          grads[0].norm().expand(3), rtol=1e-5)


def test_record_canaries_directions_are_formed_a_few_canaries_at_a_time(monkeypatch):
    """200 record canaries on a ResNet-18 are 18 GB of directions in float64: they are formed for as
    many canaries as fit the memory limit, with the same projections and lengths (here one canary
    a chunk under a 1 MB limit)."""
    import privaudit.attacks.audit.canaries as module

    setup = _setup()
    canaries = outlier_canaries(setup, 5, label=None, scale=2.0, seed=0)
    points = setup.model.initial()[None].expand(2, -1).double()
    vectors = torch.randn(2, setup.model.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    whole = canaries.projections(setup.model, points, vectors)
    chunks = []
    real = module.per_sample_grads_agents
    monkeypatch.setattr(module, "per_sample_grads_agents", lambda *a: chunks.append(a[2].shape[1]) or real(*a))
    monkeypatch.setattr(module, "chunk_rows", lambda parameters, itemsize: 2)
    parts = canaries.projections(setup.model, points, vectors)
    assert chunks == [1] * 5
    assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-9) for a, b in zip(whole, parts))


def test_with_records_appends_to_the_victim_only_and_keeps_the_sampling_sizes():
    setup = _setup()
    canaries = outlier_canaries(setup, 2, label=0, scale=2.0, seed=0)
    after = with_records(setup, 2, canaries.x, canaries.y)
    assert after.local.sizes.tolist() == [s + 2 * (i == 2) for i, s in enumerate(setup.local.sizes.tolist())]
    assert torch.equal(after.local.shard(2)[0][-2:], canaries.x)
    assert torch.equal(after.sampling_sizes, setup.local.sizes)
    for agent in (0, 1, 3):
        assert torch.equal(after.local.shard(agent)[0], setup.local.shard(agent)[0])


def test_gradient_canaries_of_a_regression_task_carry_its_target_shape():
    from privaudit.campaign.cells import build_setup, expand
    from privaudit.campaign.config import parse_campaign

    campaign = parse_campaign({"data": {"dataset": "estimation_wz", "samples_per_agent": 20},
                               "defense": [{"kind": "tvss_gradient", "agents": 3, "model": "linear_estimator"}]})
    setup = build_setup(expand(campaign)[0])
    canaries = gradient_canaries(setup, 0, 1, norm=0.1, seed=0, coordinate=True)
    assert canaries.y.shape[1:] == setup.data.y_train.shape[1:]
    model = canaries.model(setup.model)
    grads = per_sample_grads(model, setup.model.initial(), canaries.x, canaries.y)
    assert np.allclose(grads.numpy(), 0.1 * canaries.u.numpy(), atol=1e-6)
