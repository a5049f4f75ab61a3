"""Inversion of LT-ADMM-DP's τ-step bridge update (issue 24, item 4), measurement.

A noiseless run (σ_e = 1e-6), B = 1, DLG's LeNet (`lenet_dlg`, DLG's initialisation) on 32×32
photo crops, ring of 8 agents; a global listener hears the bridge messages and extracts the
victim's round-1 update γ Σ_t g_i(φ^t) (`privaudit.attacks.views.lt_admm_dp.bridge_update`); the victim's
τ·B true rows come from a ground-truth tap, which only the scoring sees. Per seed and attack: the
PSNR (mean over images paired by the Hungarian assignment), the label accuracy and the time.

Measured (τ = 2, seeds 0–4, float64, one thread, load ≈ 1–2 on two shared cores), PSNR in dB:

    ig      16.0  16.2  17.3  17.5  21.8   ~9 s each (labels in class order: the wrong steps)
    idlg    15.7  13.6  21.9  11.8  no labels read   ~19 s
    batch   26.8  21.0  29.0  20.5  27.2   ~13 s, before the step orders were screened
    batch   47.7  34.2  41.3  40.5  38.0   16–18 s, screening both step orders

(the same run through a campaign's attack cell, `kind = "batch"`, `scenario = "bridge"`, seed 0:
47.7 dB, a leak against the noise floor of 12.6 dB). tests/test_multistep_inversion.py checks
seeds 0–4 (slow) and seed 3 with fewer evaluations.

Run: python bench/multistep_inversion.py [--seeds 0,1,2,3,4] [--tau 2] [--batch-size 1] [--attacks ig,idlg,batch]
"""

from __future__ import annotations

import argparse
import time

import torch

from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.views.lt_admm_dp import bridge_update
from privaudit.campaign.cells import build_defense, expand
from privaudit.campaign.config import parse_campaign
from privaudit.metrics import score_reconstruction
from privaudit.sim import simulate
from privaudit.wire import GlobalListener, GroundTruth

VICTIM, ROUND = 0, 1
DEFENSE = {"kind": "lt_admm_dp", "topology": "ring", "agents": 8, "model": "lenet_dlg",
           "model_options": {"init": "dlg"}, "rounds": ROUND + 1, "eval_every": ROUND + 1, "batch_size": 1,
           "sigma_e": 1e-6}
DATA = {"dataset": "photos", "partition": "dirichlet", "alpha": 0.25, "min_size": 4}


def case(seed: int, tau: int, batch_size: int = 1):
    """The run's setup, the heard target at round 1 and the victim's true rows there."""
    campaign = parse_campaign({"campaign": {"name": "multistep", "seeds": [seed]}, "data": DATA,
                               "defense": [{**DEFENSE, "tau": tau, "batch_size": batch_size}]})
    defense = build_defense(expand(campaign)[0])
    listener, truth = GlobalListener(), GroundTruth(VICTIM, rounds=[ROUND])
    output = simulate(defense, ROUND + 1, eval_every=ROUND + 1, taps=[listener, truth])
    heard, known = output.transcripts
    rows = next(d.value for d in known.disclosures if d.name == "batch" and d.round == ROUND).reshape(-1).long()
    return defense.setup, bridge_update(heard, VICTIM, ROUND), rows


def attack(name: str, setup, target, rows, seed: int, batch_size: int = 1) -> dict:
    data = setup.data
    result = INVERSIONS[name]().run(target, setup.model, input_shape=data.shape, num_classes=data.num_classes,
                                    batch_size=batch_size, normalisation=data.normalisation, seed=seed)
    if result.images is None:
        return {"psnr": float("nan"), "status": result.status, "wall_s": result.wall_s}
    scores = score_reconstruction(result.images.float(), data.x_train[rows], data.normalisation,
                                  labels=result.labels, true_labels=data.y_train[rows])
    return {"psnr": scores.psnr, "per_image": [round(v, 1) for v in scores.per_image["psnr"]],
            "label_acc": scores.label_acc, "labels": result.labels.tolist(), "true": data.y_train[rows].tolist(),
            "wall_s": result.wall_s, "evaluations": result.iterations, "loss": result.loss,
            "status": result.status, "stopped_by": result.stopped_by}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--tau", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--attacks", default="ig,idlg")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for seed in map(int, args.seeds.split(",")):
        started = time.perf_counter()
        setup, target, rows = case(seed, args.tau, args.batch_size)
        print(f"seed {seed}: run {time.perf_counter() - started:.1f} s, rows {rows.tolist()}", flush=True)
        for name in args.attacks.split(","):
            found = attack(name, setup, target, rows, seed, args.batch_size)
            if "labels" not in found:
                print(f"  {name:<6} {found['status']} ({found['wall_s']:.1f} s)", flush=True)
                continue
            print(f"  {name:<6} {found['psnr']:5.1f} dB  per image {found['per_image']}  labels {found['labels']} "
                  f"(true {found['true']})  loss {found['loss']:.2e}  {found['evaluations']} evaluations "
                  f"{found['wall_s']:.1f} s  {found['status']}", flush=True)


if __name__ == "__main__":
    main()
