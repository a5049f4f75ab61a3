"""The records read off the victim's release at the trapped point: the release of the recovery round
read with the steering's extraction scenario (for D-PSGD the state difference,
`privaudit.attacks.views.dpsgd.state_difference`: g_v^{t+1} = (Σ_j w_vj x_j^{t+1} − x_v^{t+2}) / η,
exact for D-PSGD, the clipped noisy gradient for DP-D-PSGD), then the analytic
inversion (`privaudit.attacks.inversion.analytic`), which reads each unit's ratio ∂L/∂W_k / ∂L/∂b_k
and groups the units that agree: a record alone in two or more trap units is recovered exactly and
counted once (the deduplication), the rest fill the batch as single-unit ratios.

For an MLP those ratios are the records. For a CNN, trapped in its classifier head
(`privaudit.attacks.active.trap`), they are the records' features φ(x) at the trapped point, whose
convolutional part is the victim's own model, known to the attacker: each image is rebuilt from
its features by the suite's L-BFGS with a total-variation prior
(`privaudit.attacks.inversion.gradient_matching.match_features`), started from the public record
whose features lie nearest (the attacker's public data as its prior for what φ leaves open). The
features are exact where a record was alone; the image is exact only as far as φ determines it (a
map to fewer features than pixels does not), which the scores measure. Started from the mean
public image instead, lenet_dlg's digits (48 features for 64 pixels; undefended D-PSGD, ring of 4,
B = 8, seeds 0–2) had 3, 5, 1 records above 20 dB and none above 30 dB; from the nearest, 4, 6, 1
and 2, 2, 0 above 30 dB.
"""

from __future__ import annotations

import math
import time

import torch
from torch import Tensor

from privaudit.attacks.active.threat import OverridePlan
from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.analytic import Analytic, LinearLayer, first_layer_problem, read_inputs, \
    trap_layer_problem
from privaudit.attacks.inversion.base import Reconstruction
from privaudit.attacks.inversion.gradient_matching import match_features
from privaudit.attacks.inversion.replay import images_per_target
from privaudit.attacks.views import EXTRACTORS, STEERINGS
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
Not tuned across seeds. Undefended D-PSGD, ring of 4, agents 1 and 3, seeds 0–2, B = 8: wb_mnist's
digits (256 features for 64 pixels) come back at 52–85 dB wherever their features were read exactly
(7–8 of 8 records, against 2–4 passively). Where the features are fewer than the pixels more
evaluations do not help: from their true features and the mean public image, lenet_dlg's digits
(seed 0) reach 18–23 dB after 400 evaluations and after 2000, dpdl_cifar's photographs 10–20 dB
after 400 and after 1500."""

FEATURE_TV = 1e-4
"""The total-variation weight of that rebuilding, against the relative feature distance. Checked on
one case, not tuned: lenet_dlg's digits from their true features (seed 0, B = 8, from the mean
public image) gain 2–5 dB with it (18–23 dB without, 20–28 dB with), and wb_mnist's exactly read
records still reach 52–85 dB."""


def release(transcript: Transcript, victim: int, round: int) -> Target:
    """The victim's gradient of `round`, read with its defense's steering scenario (KeyError when unheard)."""
    defense = transcript.public.defense
    return EXTRACTORS[defense, STEERINGS[defense].scenario].extract(transcript, victim, round)


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
    point = target.point.detach().double()
    public = data.x_test.to(point)
    read = _features(target, model, data.shape, images_per_target(target, batch_size), tolerance, point, public)
    if isinstance(read, str):
        return Reconstruction(None, None, "none", math.nan, 0, time.perf_counter() - started, f"failed: {read}",
                              "not run")
    features, public_features = read
    layer = LinearLayer.first(model)
    start = public[torch.cdist(features, public_features).argmin(dim=1)]
    rebuilt = match_features(lambda x: layer.inputs(model, point, x), features, start, data.normalisation,
                             evaluations=FEATURE_EVALUATIONS, tv_weight=FEATURE_TV)
    images = None if rebuilt.images is None else rebuilt.images.to(target.gradient.dtype)
    return Reconstruction(images, None, "none", rebuilt.loss, rebuilt.iterations, time.perf_counter() - started,
                          rebuilt.status, rebuilt.stopped_by)


def _features(target: Target, model: FlatModel, input_shape: tuple[int, ...], count: int, tolerance: float,
              point: Tensor, public: Tensor) -> tuple[Tensor, Tensor] | str:
    """Up to `count` features read off the target's first linear layer, grouped around the public
    records' mean feature, and the public records' features at `point`; or why none can be read."""
    problem = trap_layer_problem(model, input_shape)
    if problem:
        return problem
    gradient = target.gradient.detach().double()
    if not torch.isfinite(gradient).all():
        return "target gradient has non-finite entries"
    layer = LinearLayer.first(model)
    with torch.no_grad():
        public_features = layer.inputs(model, point, public)
    read = read_inputs(layer, gradient, tolerance, count, public_features.mean(0))
    if read is None:
        return f"no unit of {layer.path} has a non-zero bias gradient"
    return read[0].to(point.device), public_features


def recover_trapped(transcript: Transcript, plan: OverridePlan, model: FlatModel, data: Dataset, batch_size: int,
                    seed: int, tolerance: float = TOLERANCE) -> Reconstruction:
    """`recover` at the plan's recovery round, from the malicious tap's transcript."""
    return recover(transcript, plan.victim, plan.recovery_round, model, data, batch_size, seed, tolerance)
