"""Per-sample gradient throughput: torch.func (vmap ∘ grad) against a per-sample Python loop,
and against Opacus's GradSampleModule when Opacus is installed (`make .venv/.installed-bench`).

DPDL MNIST CNN, batch 216 (the paper's B), 28×28 inputs. Target: torch.func ≥ 5× the loop.
ResNet-18 with group normalisation (`build_model("resnet18")`, 11 M parameters), 32×32×3 inputs,
10 classes, batch 32: privaudit's per-sample gradients (`privaudit.grads.per_sample_grads` on its
FlatModel) against Opacus's on the same weights and batch, timed alternately (the machine's load
moves between calls), medians. Target: privaudit / Opacus ≥ 1.0 on the CPU. Opacus's backward hooks
cannot take torchvision's in-place `out += identity` and ReLU(inplace=True), so Opacus gets a copy
computing the same functions out of place (`_opacus_resnet`). Also the time of one step of Inverting
Gradients (the paper's Adam, 24,000 of them on a ResNet) on that model, batch 1, the attack's
float64: the median over the steps of a short run. Threads follow privaudit's policy
(`privaudit.threads`: one unless `--threads N`), for Opacus too.
Run: python bench/per_sample_grads.py [--json] [--repeats N] [--ig-steps N] [--threads N]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
import types
import warnings

import torch

from privaudit import devices, threads
from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.gradient_matching import InvertingGradients
from privaudit.data import Normalisation
from privaudit.flatmodel import FlatModel
from privaudit.grads import batch_grad, per_sample_grads
from privaudit.models import build_model

BATCH = 216
RESNET_BATCH = 32
AGREEMENT = 5e-3
"""The most privaudit's and Opacus's ResNet-18 per-sample gradients may differ, relative to each
row's norm. Not float32's 1e-6: both are off a float64 reference by about 3e-4 of the norm on
this batch (oneDNN's convolutions; printed), and privaudit's and Opacus's by 6e-4."""


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


def _opacus_resnet(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of torchvision's ResNet with the same weights and functions, computed out of place
    (ReLU not in place, each block's residual sum a new tensor): Opacus's full backward hooks
    refuse an in-place change of a hooked layer's output."""
    from torchvision.models.resnet import BasicBlock

    def forward(block, x):
        out = torch.relu(block.bn1(block.conv1(x)))
        out = block.bn2(block.conv2(out))
        return torch.relu(out + (x if block.downsample is None else block.downsample(x)))

    twin = copy.deepcopy(module)
    for layer in twin.modules():
        if isinstance(layer, torch.nn.ReLU):
            layer.inplace = False
        if isinstance(layer, BasicBlock):
            layer.forward = types.MethodType(forward, layer)
    return twin


def opacus_grads(module: torch.nn.Module, x: torch.Tensor, y: torch.Tensor):
    """A function forming Opacus's per-sample gradients of `module` on (x, y) as rows [B, P] in the
    module's parameter order (privaudit's flat order); None without Opacus."""
    try:
        from opacus import GradSampleModule
    except ImportError:
        return None
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    wrapped = GradSampleModule(_opacus_resnet(module).train())

    def run():
        wrapped.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(wrapped(x), y).backward()
        return torch.cat([p.grad_sample.reshape(len(x), -1) for p in wrapped.parameters()], dim=1)

    return run


def row_errors(grads: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest ‖g − r‖ / ‖r‖ over rows."""
    grads, reference = grads.double(), reference.double()
    return float(((grads - reference).norm(dim=1) / reference.norm(dim=1)).max())


def _float64_rows(model: FlatModel, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample gradients in float64, one sample at a time: the reference both are held to."""
    double = FlatModel(copy.deepcopy(model.module).double())
    return per_sample_grads(double, double.initial(), x.double(), y)


def _alternating(functions: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each function, the functions run in turn in every repeat after one
    warm-up each, so that a change of the machine's load falls on all of them."""
    for fn in functions.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, fn in functions.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def inverting_gradients_step(model: FlatModel, steps: int, device: torch.device = torch.device("cpu")) -> float:
    """Median seconds of one step of Inverting Gradients (Adam, the paper's optimiser; objective,
    its backward and the update) on one 32×32 image, timed between consecutive evaluations, on
    `device` (the model moved there, as a campaign's attack runs: `privaudit.devices`); on CUDA
    each stamp waits for the device's queue."""
    generator = torch.Generator().manual_seed(1)
    x, y = torch.rand(1, 3, 32, 32, generator=generator), torch.tensor([3])
    model = model if device.type == "cpu" else model.to(device)
    x, y = x.to(device), y.to(device)
    stamps: list[float] = []

    def observer(_evaluations, _images, _objective) -> bool:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        stamps.append(time.perf_counter())
        return False

    with devices.on(device):
        point = model.initial()
        target = Target(batch_grad(model, point, x, y), point, victim=0, round=0)
        attack = InvertingGradients(optimizer="adam", iterations=steps, restarts=1)
        attack.run(target, model, input_shape=(3, 32, 32), num_classes=10, batch_size=1,
                   normalisation=Normalisation((0.5,) * 3, (0.5,) * 3), seed=0, observer=observer)
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:]))


def resnet_figures(repeats: int, ig_steps: int) -> dict:
    """privaudit's and Opacus's per-sample gradients of ResNet-18 (group norm), their agreement,
    and one Inverting Gradients step on it."""
    torch.manual_seed(0)
    module = build_model("resnet18", (3, 32, 32), 10)
    model = FlatModel(module)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(RESNET_BATCH, 3, 32, 32, generator=generator)
    y = torch.randint(0, 10, (RESNET_BATCH,), generator=generator)
    flat = model.initial()
    figures: dict = {"model": "resnet18 (GroupNorm)", "parameters": model.dim, "batch": RESNET_BATCH,
                     "privaudit_loops_samples": model.loops_samples(flat)}
    ours = per_sample_grads(model, flat, x, y)
    reference = _float64_rows(model, x[:2], y[:2])
    figures["privaudit_error_vs_float64"] = row_errors(ours[:2], reference)
    functions = {"privaudit": lambda: per_sample_grads(model, flat, x, y)}
    opacus = opacus_grads(module, x, y)
    if opacus is not None:
        theirs = opacus()
        figures["opacus_error_vs_float64"] = row_errors(theirs[:2], reference)
        figures["privaudit_vs_opacus"] = row_errors(ours, theirs)
        assert figures["privaudit_vs_opacus"] <= AGREEMENT, figures
        functions["opacus"] = opacus
    del ours
    seconds = _alternating(functions, repeats)
    for name, value in seconds.items():
        figures[f"{name}_samples_per_s"] = RESNET_BATCH / value
    if "opacus" in seconds:
        figures["privaudit_over_opacus"] = seconds["opacus"] / seconds["privaudit"]
    figures["ig_step_s"] = inverting_gradients_step(model, ig_steps)
    figures["ig_case"] = "Adam (the paper's), batch 1, float64, 1 restart"
    if torch.cuda.is_available():
        cuda = torch.device("cuda")
        figures["cuda_device"] = torch.cuda.get_device_name(cuda)
        figures["cuda_ig_step_s"] = inverting_gradients_step(model, ig_steps, cuda)
        figures["cuda_ig_speedup"] = figures["ig_step_s"] / figures["cuda_ig_step_s"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ig-steps", type=int, default=6, help="Inverting Gradients steps timed")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: privaudit's, 1; 0: torch's)")
    args = parser.parse_args()
    policy = threads.apply(args.threads)
    load_before = [round(v, 2) for v in os.getloadavg()]

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
    figures["resnet18"] = resnet_figures(args.repeats, args.ig_steps)
    figures["load_before"], figures["load_after"] = load_before, [round(v, 2) for v in os.getloadavg()]
    if args.json:
        print(json.dumps(figures))
        return
    print(f"torch threads {figures['threads']} ({policy}), {os.cpu_count()} cores, load (1, 5, 15 min) before "
          f"{load_before}, after {figures['load_after']}")
    print(f"per-sample gradients, {figures['model']}, batch {BATCH}, {figures['threads']} threads")
    print(f"  torch.func : {figures['torch_func_samples_per_s']:9.0f} samples/s")
    print(f"  loop       : {figures['loop_samples_per_s']:9.0f} samples/s")
    if "opacus_samples_per_s" in figures:
        print(f"  opacus     : {figures['opacus_samples_per_s']:9.0f} samples/s")
    verdict = "meets" if figures["speedup_vs_loop"] >= 5 else "misses"
    print(f"  torch.func / loop = {figures['speedup_vs_loop']:.1f}× ({verdict} the 5× target)")
    _print_resnet(figures["resnet18"])


def _print_resnet(resnet: dict) -> None:
    how = "one sample at a time" if resnet["privaudit_loops_samples"] else "vmap"
    print(f"per-sample gradients, {resnet['model']}, {resnet['parameters']:,} parameters, batch {resnet['batch']}, "
          f"32x32x3, 10 classes (medians, alternating)")
    print(f"  privaudit ({how}): {resnet['privaudit_samples_per_s']:7.2f} samples/s, "
          f"off float64 by {resnet['privaudit_error_vs_float64']:.1e} of a row's norm")
    if "opacus_samples_per_s" not in resnet:
        print("  opacus     : not installed (make .venv/.installed-bench)")
    else:
        print(f"  opacus     : {resnet['opacus_samples_per_s']:7.2f} samples/s, off float64 by "
              f"{resnet['opacus_error_vs_float64']:.1e}; privaudit vs opacus {resnet['privaudit_vs_opacus']:.1e} "
              f"(≤ {AGREEMENT:g} asserted)")
        verdict = "meets" if resnet["privaudit_over_opacus"] >= 1 else "misses"
        print(f"  privaudit / opacus = {resnet['privaudit_over_opacus']:.2f} ({verdict} the 1.0 target)")
    print(f"  Inverting Gradients, one step ({resnet['ig_case']}): {resnet['ig_step_s']:.3f} s")
    if "cuda_ig_step_s" in resnet:
        print(f"  the same step on CUDA ({resnet['cuda_device']}): {resnet['cuda_ig_step_s']:.4f} s, "
              f"{resnet['cuda_ig_speedup']:.1f}× the CPU's (target ≥ 10×)")


if __name__ == "__main__":
    main()
