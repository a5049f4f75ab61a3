"""Gradient inversion on 32×32 photo crops with DLG's LeNet: speed and reconstruction quality.

Sections (all on undefended single-step gradients, the target built by `batch_grad` at the model's
point; the model is `lenet_dlg` with the DLG paper's uniform(−0.5, 0.5) re-initialisation, seeded):

* dlg — DLG's wall time to first reach 30 dB PSNR (target ≤ 3 s; a benchmark observer scores
  each iterate and stops the run there, its own time subtracted), `--repeats` times over
  `--cases` crops and seeds: the median over cases of each repeat, then the median and the range
  of those over repeats, with the evaluations to 30 dB and the milliseconds per evaluation.
  Then one run per case to DLG's own stopping rule (budget or gradient tolerance, no ground
  truth): the PSNR an attacker actually ends with (acceptance ≥ 30 dB).
* idlg — iDLG's label extraction on 20 seeds (acceptance 20 of 20).
* ig1 — Inverting Gradients on single crops (acceptance ≥ 25 dB) with each of `IG_VARIANTS`:
  its defaults (L-BFGS), the paper's signed Adam as it was our default (4,800 iterations,
  4 restarts), and the best Adam setting we found (unsigned, TV weight 1e-2, one restart).
* ig4 — the same variants on a batch of 4 crops of 4 different photographs: wall time, PSNR,
  SSIM, label accuracy.
* batch8 — `BatchInversion` on `--cases` batches of 8 crops drawn at random (6 photographs, so
  labels repeat and must be counted): per batch the PSNR and SSIM (reconstructions paired with
  originals by the Hungarian assignment, `privaudit.metrics`), per-image PSNR, whether the label
  counts came out right, label accuracy, time; the median PSNR over batches (acceptance ≥ 25 dB).

Times depend on the machine's load (printed): other processes on a shared machine slow every
evaluation. Threads follow privaudit's policy (`privaudit.threads`, printed): one intra-op thread
unless `--threads T` (0: torch's default, one per core). An evaluation works on tensors so small
that, with two threads on two shared cores, OpenMP's spinning waits made it up to ~20× slower
(measured 0.18 s against 9 ms per DLG evaluation at load 5; 45–53 ms against 3.4–3.7 ms at load
1.8; 91.5 ms against 4.3 ms beside two busy processes; beside one busy loop, 13.7 ms spinning and
5.1 ms sleeping against 3.4–4.5 ms with one thread, 3.2–3.3 ms idle; the table in
`privaudit/threads.py`). To see it, and the policy the CLI applies:

    python bench/inversion.py --sections dlg --threads 0                           # torch's default, spinning waits
    OMP_WAIT_POLICY=PASSIVE python bench/inversion.py --sections dlg --threads 0   # sleeping waits
    python bench/inversion.py --sections dlg                                       # the policy: one thread

(the wait policy is read when torch is imported, so here it comes from the environment).

Run: python bench/inversion.py [--json] [--sections dlg,idlg,ig1,ig4,batch8] [--cases N] [--repeats K]
[--ig-variants default,adam_paper,adam_tuned] [--threads T] [--victim-init dlg|default]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import time

import torch

from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.gradient_matching import DLG, BatchInversion, InvertingGradients, extract_labels
from privaudit import threads
from privaudit.data import Dataset, load_dataset
from privaudit.flatmodel import FlatModel
from privaudit.grads import batch_grad
from privaudit.metrics import score_reconstruction
from privaudit.models import build_model

SHAPE = (3, 32, 32)
DLG_TARGET_S = 3.0
DLG_PSNR = 30.0
IG_PSNR = 25.0
BATCH = 8
BATCH_PSNR = 25.0
VICTIM_INIT = ("dlg", "default")


def _victim(seed: int, init: str) -> FlatModel:
    """DLG's LeNet, seeded, with the DLG paper's uniform(−0.5, 0.5) initialisation (`dlg`) or
    torch's default one (`default`)."""
    torch.manual_seed(seed)
    module = build_model("lenet_dlg", SHAPE, 6)
    if init == "dlg":
        with torch.no_grad():
            for parameter in module.parameters():
                parameter.uniform_(-0.5, 0.5)
    return FlatModel(module)


def _crops(data: Dataset, seed: int, count: int, distinct: bool = False) -> torch.Tensor:
    """Indices of `count` training crops drawn from `seed` (from different photographs if asked)."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    if not distinct:
        return torch.randint(len(data.y_train), (count,), generator=generator)
    classes = torch.randperm(data.num_classes, generator=generator)[:count]
    picks = []
    for c in classes:
        members = torch.nonzero(data.y_train == c).flatten()
        picks.append(members[torch.randint(len(members), (1,), generator=generator)])
    return torch.cat(picks)


def _target(model: FlatModel, x: torch.Tensor, y: torch.Tensor) -> Target:
    point = model.initial()
    return Target(batch_grad(model, point, x, y), point, victim=0, round=0)


def _psnr(images: torch.Tensor, original: torch.Tensor, data: Dataset) -> float:
    """privaudit.metrics' PSNR for one image, without its SSIM/LPIPS, cheap enough per iterate."""
    pixels = data.normalisation.denormalise(images.double()).clamp(0, 1)
    mse = float((pixels - data.normalisation.denormalise(original.double())).square().mean())
    return 10 * math.log10(1 / mse) if mse > 0 else math.inf


def _run(attack, target, model, data, batch_size, seed, observer=None):
    return attack.run(target, model, input_shape=SHAPE, num_classes=data.num_classes,
                      batch_size=batch_size, normalisation=data.normalisation, seed=seed,
                      observer=observer)


Case = tuple[FlatModel, int, torch.Tensor, torch.Tensor, Target]


def _case(data: Dataset, seed: int, init: str) -> Case:
    """Seed `seed`'s victim, crop index, crop, label and target gradient."""
    model = _victim(seed, init)
    index = int(_crops(data, seed, 1)[0])
    x, y = data.x_train[index : index + 1], data.y_train[index : index + 1]
    return model, index, x, y, _target(model, x, y)


def _time_to_30db(attack: DLG, data: Dataset, case: Case, seed: int) -> tuple[float, int | None]:
    """Seconds (observer time subtracted) and evaluations until an iterate first scores 30 dB;
    (inf, None) when the run ends before."""
    model, _, x, _, target = case
    spent = {"observer_s": 0.0}

    def observer(evaluations, images, losses):
        start = time.perf_counter()
        reached = _psnr(images[0], x, data) >= DLG_PSNR
        spent["observer_s"] += time.perf_counter() - start
        return reached

    timed = _run(attack, target, model, data, 1, seed, observer)
    if timed.stopped_by != "observer":
        return math.inf, None
    return timed.wall_s - spent["observer_s"], timed.iterations


def bench_dlg(data: Dataset, cases: int, init: str, repeats: int) -> dict:
    """Time to 30 dB (observer-stopped, `repeats` times) and the PSNR at DLG's own stop, per case."""
    attack = DLG()
    warm = _victim(0, init)
    _run(DLG(evaluations=5), _target(warm, data.x_train[:1], data.y_train[:1]), warm, data, 1, 0)
    built = [_case(data, seed, init) for seed in range(cases)]
    seconds = [[math.inf] * repeats for _ in range(cases)]
    evaluations: list[int | None] = [None] * cases
    for k in range(repeats):
        for seed, case in enumerate(built):
            seconds[seed][k], evaluations[seed] = _time_to_30db(attack, data, case, seed)
    rows = []
    for seed, (model, index, x, y, target) in enumerate(built):
        full = _run(attack, target, model, data, 1, seed)
        scores = score_reconstruction(full.images, x, data.normalisation, labels=full.labels,
                                      true_labels=y)
        median = statistics.median(seconds[seed])
        rows.append({
            "seed": seed,
            "crop": index,
            "seconds_to_30db": median,
            "seconds_to_30db_repeats": seconds[seed],
            "evaluations_to_30db": evaluations[seed],
            "ms_per_evaluation": 1e3 * median / evaluations[seed] if evaluations[seed] else None,
            "full_run_psnr": scores.psnr,
            "full_run_ssim": scores.ssim,
            "full_run_label_acc": scores.label_acc,
            "full_run_seconds": full.wall_s,
            "full_run_evaluations": full.iterations,
            "full_run_stopped_by": full.stopped_by,
            "full_run_status": full.status,
        })
    per_repeat = [statistics.median(seconds[seed][k] for seed in range(cases)) for k in range(repeats)]
    median = statistics.median(per_repeat)
    reached = [r for r in rows if r["evaluations_to_30db"] is not None]
    return {
        "params": dataclasses.asdict(attack),
        "cases": rows,
        "median_seconds_to_30db": median,
        "median_seconds_to_30db_per_repeat": per_repeat,
        "median_evaluations_to_30db": statistics.median(
            r["evaluations_to_30db"] if r["evaluations_to_30db"] is not None else math.inf for r in rows),
        "median_ms_per_evaluation": statistics.median(r["ms_per_evaluation"] for r in reached) if reached else None,
        "target_seconds": DLG_TARGET_S,
        "ratio_to_target": median / DLG_TARGET_S,
        "reached_30db": len(reached),
        "full_run_median_psnr": statistics.median(r["full_run_psnr"] for r in rows),
        "full_run_at_least_30db": sum(r["full_run_psnr"] >= DLG_PSNR for r in rows),
    }


def bench_idlg(data: Dataset, init: str, seeds: int = 20) -> dict:
    """iDLG's label extraction on `seeds` single-crop targets."""
    hits = []
    for seed in range(seeds):
        model, _, _, y, target = _case(data, seed, init)
        labels = extract_labels(target.gradient, model, data.num_classes, 1)
        hits.append(labels is not None and labels.tolist() == y.tolist())
    return {"seeds": seeds, "recovered": sum(hits)}


IG_VARIANTS = {
    "default": InvertingGradients(),
    "adam_paper": InvertingGradients(optimizer="adam", iterations=4800, restarts=4),
    "adam_tuned": InvertingGradients(optimizer="adam", iterations=4800, restarts=1, signed=False,
                                     tv_weight=1e-2),
}


def _bench_ig(data: Dataset, seed: int, batch_size: int, init: str, attack: InvertingGradients) -> dict:
    model = _victim(seed, init)
    picks = _crops(data, seed, batch_size, distinct=batch_size > 1)
    x, y = data.x_train[picks], data.y_train[picks]
    result = _run(attack, _target(model, x, y), model, data, batch_size, seed)
    row = {"seed": seed, "crops": picks.tolist(), "seconds": result.wall_s,
           "iterations": result.iterations, "status": result.status,
           "label_source": result.label_source, "restart_losses": list(result.restart_losses)}
    if result.images is not None:
        scores = score_reconstruction(result.images, x, data.normalisation, labels=result.labels,
                                      true_labels=y)
        row.update(scores.summary())
    return row


def bench_ig_single(data: Dataset, cases: int, init: str, variants: list[str]) -> dict:
    """The chosen IG variants on the same single-crop targets."""
    figures = {}
    for name in variants:
        attack = IG_VARIANTS[name]
        rows = [_bench_ig(data, seed, 1, init, attack) for seed in range(cases)]
        psnrs = [r.get("psnr", -math.inf) for r in rows]
        figures[name] = {
            "params": dataclasses.asdict(attack),
            "cases": rows,
            "median_psnr": statistics.median(psnrs),
            "at_least_25db": sum(p >= IG_PSNR for p in psnrs),
            "ratio_to_target": statistics.median(psnrs) / IG_PSNR,
            "median_seconds": statistics.median(r["seconds"] for r in rows),
        }
    return figures


def bench_ig_batch(data: Dataset, init: str, variants: list[str]) -> dict:
    """The chosen IG variants on one batch of 4 crops of different photographs."""
    return {name: {"params": dataclasses.asdict(IG_VARIANTS[name]),
                   **_bench_ig(data, 0, 4, init, IG_VARIANTS[name])} for name in variants}


def bench_batch(data: Dataset, cases: int, init: str, attack: BatchInversion = BatchInversion()) -> dict:
    """`attack` on `cases` batches of `BATCH` random crops, one victim seed each."""
    rows = []
    for seed in range(cases):
        model = _victim(seed, init)
        picks = _crops(data, seed, BATCH)
        x, y = data.x_train[picks], data.y_train[picks]
        result = _run(attack, _target(model, x, y), model, data, BATCH, seed)
        row = {"seed": seed, "crops": picks.tolist(), "labels": y.tolist(), "seconds": result.wall_s,
               "evaluations": result.iterations, "ms_per_evaluation": 1e3 * result.wall_s / max(result.iterations, 1),
               "status": result.status, "label_source": result.label_source,
               "counts_right": result.labels is not None and sorted(result.labels.tolist()) == sorted(y.tolist())}
        if result.images is not None:
            scores = score_reconstruction(result.images, x, data.normalisation, labels=result.labels,
                                          true_labels=y)
            row.update(scores.summary())
            row["per_image_psnr"] = scores.per_image["psnr"]
        rows.append(row)
    psnrs = [r.get("psnr", -math.inf) for r in rows]
    return {
        "params": dataclasses.asdict(attack),
        "batch_size": BATCH,
        "cases": rows,
        "median_psnr": statistics.median(psnrs),
        "median_ssim": statistics.median(r.get("ssim", -math.inf) for r in rows),
        "at_least_25db": sum(p >= BATCH_PSNR for p in psnrs),
        "target_psnr": BATCH_PSNR,
        "ratio_to_target": statistics.median(psnrs) / BATCH_PSNR,
        "counts_right": sum(r["counts_right"] for r in rows),
        "median_seconds": statistics.median(r["seconds"] for r in rows),
    }


def _json_safe(value):
    """Non-finite floats become null (JSON has no inf): a missed target reads as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _print(figures: dict) -> None:
    print(f"victim init {figures['victim_init']}, threads: {figures['thread_policy']} ({figures['threads']} in use), "
          f"load average {figures['load_before']} → {figures['load_after']}")
    if "dlg" in figures:
        d = figures["dlg"]
        for r in d["cases"]:
            repeats = ", ".join(f"{t:.2f}" for t in r["seconds_to_30db_repeats"])
            print(f"  DLG seed {r['seed']} crop {r['crop']}: 30 dB after {r['seconds_to_30db']:.2f} s "
                  f"[{repeats}] ({r['evaluations_to_30db']} evaluations, "
                  f"{r['ms_per_evaluation'] or math.nan:.2f} ms each); own stop: {r['full_run_psnr']:.1f} dB, "
                  f"SSIM {r['full_run_ssim']:.3f} after {r['full_run_seconds']:.1f} s "
                  f"({r['full_run_evaluations']} evaluations, {r['full_run_stopped_by']})")
        spread = d["median_seconds_to_30db_per_repeat"]
        print(f"DLG median time to 30 dB: {d['median_seconds_to_30db']:.2f} s (repeats "
              f"{min(spread):.2f}–{max(spread):.2f} s), target {DLG_TARGET_S} s, ratio "
              f"{d['ratio_to_target']:.2f}; median {d['median_evaluations_to_30db']} evaluations at "
              f"{d['median_ms_per_evaluation'] or math.nan:.2f} ms ({d['reached_30db']}/{len(d['cases'])} reached 30 dB)")
        print(f"DLG at its own stop: median {d['full_run_median_psnr']:.1f} dB, "
              f"{d['full_run_at_least_30db']}/{len(d['cases'])} at ≥ 30 dB")
    if "idlg" in figures:
        i = figures["idlg"]
        print(f"iDLG labels recovered: {i['recovered']}/{i['seeds']} seeds")
    for name, g in figures.get("ig1", {}).items():
        for r in g["cases"]:
            print(f"  IG ({name}) seed {r['seed']}: {r.get('psnr', math.nan):.1f} dB, "
                  f"SSIM {r.get('ssim', math.nan):.3f}, {r['seconds']:.1f} s, {r['status']}")
        print(f"IG ({name}) single crop: median {g['median_psnr']:.1f} dB (target ≥ {IG_PSNR} dB, "
              f"ratio {g['ratio_to_target']:.2f}), {g['at_least_25db']}/{len(g['cases'])} at ≥ 25 dB, "
              f"median {g['median_seconds']:.1f} s")
    for name, b in figures.get("ig4", {}).items():
        print(f"IG ({name}) batch of 4: {b['seconds']:.1f} s, PSNR {b.get('psnr', math.nan):.1f} dB, "
              f"SSIM {b.get('ssim', math.nan):.3f}, labels {b['label_source']} "
              f"(accuracy {b.get('label_acc')}), LPIPS {b.get('lpips_status')}, {b['status']}")
    if "batch8" in figures:
        b = figures["batch8"]
        for r in b["cases"]:
            images = ", ".join(f"{p:.1f}" for p in r.get("per_image_psnr", []))
            print(f"  batch seed {r['seed']} labels {r['labels']}: {r.get('psnr', math.nan):.1f} dB [{images}], "
                  f"SSIM {r.get('ssim', math.nan):.3f}, labels {r['label_source']} (counts "
                  f"{'right' if r['counts_right'] else 'wrong'}, accuracy {r.get('label_acc')}), "
                  f"{r['seconds']:.1f} s ({r['evaluations']} evaluations, {r['ms_per_evaluation']:.1f} ms each), "
                  f"{r['status']}")
        print(f"Batch inversion, batches of {b['batch_size']}: median {b['median_psnr']:.1f} dB (target ≥ "
              f"{BATCH_PSNR} dB, ratio {b['ratio_to_target']:.2f}), median SSIM {b['median_ssim']:.3f}, "
              f"{b['at_least_25db']}/{len(b['cases'])} at ≥ 25 dB, counts right {b['counts_right']}/{len(b['cases'])}, "
              f"median {b['median_seconds']:.1f} s per batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sections", default="dlg,idlg,ig1,ig4,batch8")
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed DLG runs per case")
    parser.add_argument("--ig-variants", default=",".join(IG_VARIANTS))
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: privaudit's policy, "
                        "OMP_NUM_THREADS when set, else 1; 0: torch's default, one per core)")
    parser.add_argument("--victim-init", choices=VICTIM_INIT, default="dlg")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    unknown = sections - {"dlg", "idlg", "ig1", "ig4", "batch8"}
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    variants = args.ig_variants.split(",")
    if set(variants) - set(IG_VARIANTS):
        parser.error(f"unknown IG variant(s): {', '.join(sorted(set(variants) - set(IG_VARIANTS)))}")
    if args.repeats < 1 or args.cases < 1:
        parser.error("--repeats and --cases must be >= 1")
    if args.threads is not None and args.threads < 0:
        parser.error("--threads must be >= 0")

    policy = threads.apply(args.threads)
    data = load_dataset("photos")
    figures: dict = {"thread_policy": policy, "threads": torch.get_num_threads(), "victim_init": args.victim_init,
                     "load_before": [round(v, 2) for v in os.getloadavg()]}
    if "dlg" in sections:
        figures["dlg"] = bench_dlg(data, args.cases, args.victim_init, args.repeats)
    if "idlg" in sections:
        figures["idlg"] = bench_idlg(data, args.victim_init)
    if "ig1" in sections:
        figures["ig1"] = bench_ig_single(data, args.cases, args.victim_init, variants)
    if "ig4" in sections:
        figures["ig4"] = bench_ig_batch(data, args.victim_init, variants)
    if "batch8" in sections:
        figures["batch8"] = bench_batch(data, args.cases, args.victim_init)
    figures["load_after"] = [round(v, 2) for v in os.getloadavg()]
    if args.json:
        print(json.dumps(_json_safe(figures), default=str))
    else:
        _print(figures)


if __name__ == "__main__":
    main()
