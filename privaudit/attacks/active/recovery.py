"""The records read off the victim's release at the trapped point: the state difference of the
recovery round (`privaudit.attacks.views.dpsgd.state_difference`: g_v^{t+1} = (Σ_j w_vj x_j^{t+1} −
x_v^{t+2}) / η, exact for D-PSGD, the clipped noisy gradient for DP-D-PSGD), then the analytic
inversion (`privaudit.attacks.inversion.analytic`), which reads each unit's ratio ∂L/∂W_k / ∂L/∂b_k
and groups the units that agree: a record alone in two or more trap units is recovered exactly and
counted once (the deduplication), the rest fill the batch as single-unit ratios.

For an MLP those ratios are the records. For a CNN, trapped in its classifier head
(`privaudit.attacks.active.trap`), they are the records' features φ(x) at the trapped point, whose
convolutional part is the victim's own model, known to the attacker: each image is rebuilt from
its features by the suite's L-BFGS with a total-variation prior
(`privaudit.attacks.inversion.gradient_matching.match_features`), started from the mean public
image. The features are exact where a record was alone; the image is exact only as far as φ
determines it (a map to fewer features than pixels does not), which the scores measure.
"""

from __future__ import annotations

import math
import time

import torch

from privaudit.attacks.active.threat import SCENARIO, OverridePlan
from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.analytic import Analytic, LinearLayer, first_layer_problem, read_inputs, \
    trap_layer_problem
from privaudit.attacks.inversion.base import Reconstruction
from privaudit.attacks.inversion.gradient_matching import match_features
from privaudit.attacks.inversion.replay import images_per_target
from privaudit.attacks.views import EXTRACTORS
from privaudit.data import Dataset
from privaudit.flatmodel import FlatModel
from privaudit.wire import Transcript

TOLERANCE = 1e-2
"""How close (relative) two units' ratios must be to count as one record. The analytic attack's
own 1e-4 splits one record into several groups through D-PSGD's float32 state difference at a
trapped point (undefended, ring of 4, digits, 256 units, B = 16, seeds 0–1: 13 records above
40 dB of 16 at 1e-4, 14–15 at 1e-3, 15 at 1e-2, the duplicates gone); two distinct digits differ
by far more than 1 % of their norm. Passive and active sides are read with the same tolerance."""

FEATURE_EVALUATIONS = 400
"""L-BFGS evaluations spent rebuilding a CNN's images from their features (all records at once).
Not tuned across seeds: on undefended D-PSGD (ring of 4, agents 1 and 3, seeds 0–2, B = 8) it
rebuilds wb_mnist's digits (256 features for 64 pixels) to 41–76 dB wherever the features were read
exactly (6–7 of 8 records, against 2–4 passively); where the features are fewer than the pixels
more does not help: lenet_dlg's digits from their true features, seed 0, 18–23 dB after 400
evaluations and after 2000, and dpdl_cifar's photographs 10–20 dB after 400 and after 1500."""

FEATURE_TV = 1e-4
"""The total-variation weight of that rebuilding, against the relative feature distance. Checked
on one case only, not tuned: lenet_dlg's digits from their true features (seed 0, B = 8) gain 2–5 dB
with it (18–23 dB without, 20–28 dB with); wb_mnist's exact records still reach 41–76 dB."""


def release(transcript: Transcript, victim: int, round: int) -> Target:
    """The victim's gradient of `round` as its state difference (KeyError when unheard)."""
    return EXTRACTORS[transcript.public.defense, SCENARIO].extract(transcript, victim, round)


def recover(transcript: Transcript, victim: int, round: int, model: FlatModel, data: Dataset, batch_size: int,
            seed: int, tolerance: float = TOLERANCE) -> Reconstruction:
    """Up to `batch_size` records of the victim's batch at `round`, read off its release: by the
    analytic inversion where the first layer reads the raw records, through their features
    (`through_features`) where the first linear layer follows convolutions."""
    target = release(transcript, victim, round)
    if not first_layer_problem(model, data.shape):
        return Analytic(tolerance).run(target, model, input_shape=data.shape, num_classes=data.num_classes,
                                       batch_size=batch_size, normalisation=data.normalisation, seed=seed)
    return through_features(target, model, data, batch_size, tolerance)


def through_features(target: Target, model: FlatModel, data: Dataset, batch_size: int,
                     tolerance: float = TOLERANCE) -> Reconstruction:
    """The records' features read off the first linear layer's gradient (`read_inputs`), then
    each image rebuilt from its features at the target's point (module docstring). `exact` is
    None: the features may be exact, the images are optimised."""
    started = time.perf_counter()
    problem = trap_layer_problem(model, data.shape)
    gradient = target.gradient.detach().double()
    if not problem and not torch.isfinite(gradient).all():
        problem = "target gradient has non-finite entries"
    layer = LinearLayer.first(model)
    point = target.point.detach().double()
    public = data.x_test.to(point)
    read = None
    if not problem:
        with torch.no_grad():
            centre = layer.inputs(model, point, public).mean(0)
        read = read_inputs(layer, gradient, tolerance, images_per_target(target, batch_size), centre)
    if read is None:
        reason = problem or f"no unit of {layer.path} has a non-zero bias gradient"
        return Reconstruction(None, None, "none", math.nan, 0, time.perf_counter() - started, f"failed: {reason}",
                              "not run")
    features, _ = read
    start = public.mean(0).expand(len(features), *data.shape)
    rebuilt = match_features(lambda x: layer.inputs(model, point, x), features.to(point.device), start,
                             data.normalisation, evaluations=FEATURE_EVALUATIONS, tv_weight=FEATURE_TV)
    images = None if rebuilt.images is None else rebuilt.images.to(target.gradient.dtype)
    return Reconstruction(images, None, "none", rebuilt.loss, rebuilt.iterations, time.perf_counter() - started,
                          rebuilt.status, rebuilt.stopped_by)


def recover_trapped(transcript: Transcript, plan: OverridePlan, model: FlatModel, data: Dataset, batch_size: int,
                    seed: int, tolerance: float = TOLERANCE) -> Reconstruction:
    """`recover` at the plan's recovery round, from the malicious tap's transcript."""
    return recover(transcript, plan.victim, plan.recovery_round, model, data, batch_size, seed, tolerance)
