"""Per-sample gradient throughput: torch.func (vmap ∘ grad) against a per-sample Python loop,
and against Opacus's GradSampleModule when Opacus is installed.

DPDL MNIST CNN, batch 216 (the paper's B), 28×28 inputs. Target: torch.func ≥ 5× the loop.
Run: python bench/per_sample_grads.py [--json] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import torch

from privaudit.flatmodel import FlatModel
from privaudit.grads import per_sample_grads
from privaudit.models import build_model

BATCH = 216


def _median_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _loop(model: FlatModel, flat, x, y):
    rows = []
    for xi, yi in zip(x, y):
        point = flat.clone().requires_grad_(True)
        rows.append(torch.autograd.grad(model.loss(point, xi[None], yi[None]), point)[0])
    return torch.stack(rows)


def _opacus(module, x, y):
    try:
        from opacus import GradSampleModule
    except ImportError:
        return None
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    wrapped = GradSampleModule(module.train())

    def run():
        wrapped.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(wrapped(x), y).backward()
        return [p.grad_sample for p in wrapped.parameters()]

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(0)
    module = build_model("dpdl_mnist", (1, 28, 28), 10)
    model = FlatModel(module)
    x, y = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
    flat = model.initial()
    assert torch.allclose(per_sample_grads(model, flat, x[:4], y[:4]), _loop(model, flat, x[:4], y[:4]), atol=1e-5)

    func_s = _median_seconds(lambda: per_sample_grads(model, flat, x, y), args.repeats)
    loop_s = _median_seconds(lambda: _loop(model, flat, x, y), args.repeats)
    figures = {
        "model": "dpdl_mnist",
        "batch": BATCH,
        "threads": torch.get_num_threads(),
        "torch_func_samples_per_s": BATCH / func_s,
        "loop_samples_per_s": BATCH / loop_s,
        "speedup_vs_loop": loop_s / func_s,
        "target_speedup": 5.0,
    }
    opacus = _opacus(module, x, y)
    if opacus is not None:
        opacus_s = _median_seconds(opacus, args.repeats)
        figures["opacus_samples_per_s"] = BATCH / opacus_s
        figures["speedup_vs_opacus"] = opacus_s / func_s
    if args.json:
        print(json.dumps(figures))
        return
    print(f"per-sample gradients, {figures['model']}, batch {BATCH}, {figures['threads']} threads")
    print(f"  torch.func : {figures['torch_func_samples_per_s']:9.0f} samples/s")
    print(f"  loop       : {figures['loop_samples_per_s']:9.0f} samples/s")
    if "opacus_samples_per_s" in figures:
        print(f"  opacus     : {figures['opacus_samples_per_s']:9.0f} samples/s")
    verdict = "meets" if figures["speedup_vs_loop"] >= 5 else "misses"
    print(f"  torch.func / loop = {figures['speedup_vs_loop']:.1f}× ({verdict} the 5× target)")


if __name__ == "__main__":
    main()
