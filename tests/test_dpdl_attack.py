"""DPDL §VI-D at reduced scale (acceptance 2 of the inversion issue): on a 32×32 photo crop with
DLG's LeNet, the ND variant's cross-gradient (CG) and the self-gradient isolated from its momenta
(MM*) give Inverting Gradients (the paper's attack [40]) high-PSNR reconstructions at an early round, while DPDL's noisy cross-gradient, with
σ set by Theorem 1 for the paper's MNIST ε = 1, leaves it near the noise floor. The full grid is
`privaudit/presets/dpdl_attack.toml`."""

import pytest
import torch

from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign

BASE = {"kind": "dpdl", "topology": "bipartite", "agents": 10, "model": "lenet_dlg",
        "model_options": {"init": "dlg"}, "rounds": 3, "eval_every": 3, "lr": 0.005, "batch_size": 1,
        "clip": 2.0, "beta": 0.7, "alpha": 1.5}
IG = {"kind": "ig", "optimizer": "lbfgs", "iterations": 500, "restarts": 1}
"""One attack for all three targets. At 500 L-BFGS iterations the noiseless targets come back at
34.1 (CG) and 35.5 dB (MM*) (48.0 at 1,000, 20.9 at 300), so the attack that leaves DPDL's target
at 3.9 dB, against a floor of 10.6 dB at either count, is shown strong enough on the same run."""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """The campaign's inversion rows, computed on one thread (the numbers above were taken so);
    the thread count is put back for the tests that run after this module in the same process."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _inversion_rows(tmp_path_factory)
    finally:
        torch.set_num_threads(before)


def _inversion_rows(tmp_path_factory) -> dict:
    campaign = parse_campaign({
        "campaign": {"name": "dpdl-attack-small", "seeds": [0]},
        "data": {"dataset": "photos", "partition": "dirichlet", "alpha": 0.25, "min_size": 4},
        "defense": [{**BASE, "label": "ND", "noise": False},
                    {**BASE, "label": "DPDL", "target_epsilon": 1.0, "target_rounds": 1000, "delta": 1e-5}],
        "attack": [{**IG, "label": "CG", "scenario": "cross_gradient", "rounds": [1]},
                   {**IG, "label": "MM*", "scenario": "self_gradient", "rounds": [1], "defense": ["ND"]}],
    })
    store = run_campaign(campaign, "", tmp_path_factory.mktemp("dpdl"), progress=False, say=lambda _: None)
    return {(row["defense_table"], row["label"]): row for row in store.rows() if row["type"] == "inversion"}


def test_nd_cross_gradient_and_isolated_self_gradient_leak_the_crop(rows):
    for key in (("ND", "CG"), ("ND", "MM*")):
        row = rows[key]
        assert row["status"] == "ok" and row["target_kind"] == "gradient"
        assert row["metrics"]["psnr"] >= 25.0, (key, row["metrics"])
        assert row["metrics"]["psnr"] > row["baseline"]["psnr"] + 10


def test_dpdl_noisy_cross_gradient_stays_near_the_noise_floor(rows):
    row = rows["DPDL", "CG"]
    assert row["target_kind"] == "noisy_gradient"
    assert row["metrics"]["psnr"] < row["baseline"]["psnr"] + 3.0, row["metrics"]
