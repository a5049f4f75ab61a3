"""Per-sample gradients are formed in chunks that fit the `memory` limit (`privaudit.grads.chunk_rows`),
with the results of forming them at once; a reduction (`masked_sums`) never holds more than a chunk.

A tiny limit (1 MB) on small models forces many chunks; the reference is the same call under the
default limit (8 GB), where every batch here is one chunk. Equal to float32 rounding, not bitwise:
a matrix product of fewer rows may sum its terms in another order (7 rows of a 20,000-feature
logistic regression moved entries by 8e-6 of their size)."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from privaudit import flatmodel
from privaudit.flatmodel import FlatModel
from privaudit.grads import (WORKING_COPIES, chunk_rows, clip_l2, masked_sums, per_sample_grads,
                             per_sample_grads_agents)
from privaudit.models import build_model

TINY_MB = 1


def _mlp(hidden: int) -> FlatModel:
    """An MLP on 4 × 4 inputs whose gradient rows are (16 + 4) · hidden + 4 values."""
    torch.manual_seed(0)
    return FlatModel(build_model("mlp", (1, 4, 4), 4, hidden=[hidden]))


def _logreg(features: int) -> FlatModel:
    """Logistic regression (closed-form per-sample gradients) with features · 4 + 4 parameters."""
    torch.manual_seed(0)
    return FlatModel(build_model("logreg", (features,), 4))


def _assert_close(chunked: torch.Tensor, whole: torch.Tensor) -> None:
    """Equal to float32 rounding of sums over thousands of terms, relative to the largest entry."""
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-5 * float(whole.abs().max()))


def _counting_losses(model: FlatModel) -> list[int]:
    """Calls of `model.sample_loss`: `vmap` calls it once per chunk, with the chunk batched."""
    calls: list[int] = []
    plain = model.sample_loss

    def counted(flat, x, y):
        calls.append(1)
        return plain(flat, x, y)

    model.sample_loss = counted
    return calls


def _counting_rows(model: FlatModel) -> list[int]:
    """Rows of each `model.sample_grads` call (masked_sums forms its gradients there)."""
    rows: list[int] = []
    plain = model.sample_grads

    def counted(points, x, y):
        rows.append(len(points))
        return plain(points, x, y)

    model.sample_grads = counted
    return rows


def test_chunk_rows_divide_the_memory_limit_by_a_rows_working_copies(monkeypatch):
    monkeypatch.delenv("PRIVAUDIT_MAX_MEMORY_MB", raising=False)
    resnet_parameters = 11_173_962
    assert chunk_rows(resnet_parameters) == 8192 * 2**20 // (WORKING_COPIES * 4 * resnet_parameters) == 48
    assert chunk_rows(resnet_parameters, itemsize=8) == 24
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", str(TINY_MB))
    assert chunk_rows(10_000) == 2**20 // (WORKING_COPIES * 4 * 10_000) == 6
    assert chunk_rows(10**9) == 1, "one row at least: the model's own size is checked at `check`"


@pytest.mark.parametrize("hidden", [300, 3000], ids=["10-rows", "1-row"])
def test_per_sample_grads_in_chunks_equal_them_at_once(monkeypatch, hidden):
    model = _mlp(hidden)
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(23, 1, 4, 4, generator=generator), torch.randint(0, 4, (23,), generator=generator)
    flat = model.initial()
    whole = per_sample_grads(model, flat, x, y)
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", str(TINY_MB))
    rows = chunk_rows(model.dim)
    assert rows < len(x) / 2, "the tiny limit must force several chunks"
    calls = _counting_losses(model)
    chunked = per_sample_grads(model, flat, x, y)
    assert len(calls) == math.ceil(len(x) / rows)
    _assert_close(chunked, whole)


def test_closed_form_per_sample_grads_are_chunked_too(monkeypatch):
    model = _logreg(20_000)
    generator = torch.Generator().manual_seed(2)
    x, y = torch.randn(7, 20_000, generator=generator), torch.randint(0, 4, (7,), generator=generator)
    flat = model.initial() + 0.01
    whole = per_sample_grads(model, flat, x, y)
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", str(TINY_MB))
    assert chunk_rows(model.dim) < 7
    rows = _counting_rows(model)
    _assert_close(per_sample_grads(model, flat, x, y), whole)
    assert max(rows) <= chunk_rows(model.dim) and sum(rows) == 7


@pytest.mark.parametrize("batch", [3, 10], ids=["agents-per-chunk", "slots-per-chunk"])
@pytest.mark.parametrize("kind", ["autograd", "closed-form"])
def test_agents_per_sample_grads_in_chunks_equal_them_at_once(monkeypatch, batch, kind):
    """Whole batches of several agents per chunk (batch 3 under 8 rows) and parts of one agent's
    batch (10 over 8 rows) are both put back in their places."""
    model = _mlp(380) if kind == "autograd" else _logreg(1_900)
    agents = 5
    generator = torch.Generator().manual_seed(3)
    flats = model.initial() + 0.05 * torch.randn(agents, model.dim, generator=generator)
    x = torch.randn((agents, batch, 1, 4, 4) if kind == "autograd" else (agents, batch, 1_900), generator=generator)
    y = torch.randint(0, 4, (agents, batch), generator=generator)
    whole = per_sample_grads_agents(model, flats, x, y)
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", str(TINY_MB))
    assert chunk_rows(model.dim) == 8
    chunked = per_sample_grads_agents(model, flats, x, y)
    assert chunked.shape == (agents, batch, model.dim)
    _assert_close(chunked, whole)


def test_masked_sums_reduce_chunk_by_chunk(monkeypatch):
    """The clipped sums of padded batches, shared by two copies of the agents, equal those formed
    at once, and no call forms more than a chunk of per-sample gradients."""
    model = _mlp(1500)
    agents, slots = 6, 9
    generator = torch.Generator().manual_seed(4)
    flats = model.initial() + 0.05 * torch.randn(agents, model.dim, generator=generator)
    x = torch.randn(agents // 2, slots, 1, 4, 4, generator=generator)
    y = torch.randint(0, 4, (agents // 2, slots), generator=generator)
    mask = (torch.rand(agents, slots, generator=generator) < 0.6).float()
    mask[2] = 0.0
    whole = masked_sums(model, flats, x, y, mask, lambda g: clip_l2(g, 0.5))
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", str(TINY_MB))
    step = chunk_rows(model.dim)
    assert step < mask.sum() / 4
    rows = _counting_rows(model)
    chunked = masked_sums(model, flats, x, y, mask, lambda g: clip_l2(g, 0.5))
    assert max(rows) <= step and sum(rows) == mask.sum()
    _assert_close(chunked, whole)
    assert torch.equal(chunked[2], torch.zeros(model.dim))


def test_the_loop_over_samples_gives_vmaps_gradients(monkeypatch):
    """Models of millions of parameters loop over samples on the CPU (`LOOP_MIN_PARAMETERS`): the
    same gradients as `vmap`, in every function and chunked, at one point and at one per row."""
    model = _mlp(300)
    generator = torch.Generator().manual_seed(5)
    flats = model.initial() + 0.05 * torch.randn(3, model.dim, generator=generator)
    x, y = torch.randn(3, 7, 1, 4, 4, generator=generator), torch.randint(0, 4, (3, 7), generator=generator)
    mask = torch.ones(3, 7)
    with_vmap = (per_sample_grads(model, flats[0], x[0], y[0]), per_sample_grads_agents(model, flats, x, y),
                 masked_sums(model, flats, x, y, mask, lambda g: clip_l2(g, 0.5)))
    assert not model.loops_samples(flats)
    monkeypatch.setattr(flatmodel, "LOOP_MIN_PARAMETERS", model.dim)
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", str(TINY_MB))
    assert model.loops_samples(flats)
    calls = _counting_losses(model)
    looped = (per_sample_grads(model, flats[0], x[0], y[0]), per_sample_grads_agents(model, flats, x, y),
              masked_sums(model, flats, x, y, mask, lambda g: clip_l2(g, 0.5)))
    assert len(calls) == 7 + 21 + 21, "one loss per sample"
    for chunked, whole in zip(looped, with_vmap):
        _assert_close(chunked, whole)


@pytest.mark.slow
def test_privaudits_resnet_per_sample_grads_equal_opacuss():
    """bench/per_sample_grads.py's comparison on two samples: the same ResNet-18 (group norm),
    privaudit's gradients (one sample at a time on the CPU) against Opacus's hooks. Slow (17 s
    on 2 shared cores) and skipped without the bench extra's Opacus."""
    pytest.importorskip("opacus")
    spec = importlib.util.spec_from_file_location("bench_per_sample_grads",
                                                  Path(__file__).parent.parent / "bench" / "per_sample_grads.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    module = build_model("resnet18", (3, 32, 32), 10)
    model = FlatModel(module)
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 3, 32, 32, generator=generator), torch.tensor([1, 7])
    ours = per_sample_grads(model, model.initial(), x, y)
    assert model.loops_samples(model.initial())
    assert bench.row_errors(ours, bench.opacus_grads(module, x, y)()) <= bench.AGREEMENT
