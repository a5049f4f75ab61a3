"""The records read off the victim's release at the trapped point: the release of the recovery round
read with the steering's extraction scenario (for D-PSGD the state difference,
`privaudit.attacks.views.dpsgd.state_difference`: g_v^{t+1} = (Σ_j w_vj x_j^{t+1} − x_v^{t+2}) / η,
exact for D-PSGD, the clipped noisy gradient for DP-D-PSGD), then the analytic
inversion (`privaudit.attacks.inversion.analytic`), which reads each unit's ratio ∂L/∂W_k / ∂L/∂b_k
and groups the units that agree: a record alone in two or more trap units is recovered exactly and
counted once (the deduplication), the rest fill the batch as single-unit ratios.
"""

from __future__ import annotations

from privaudit.attacks.active.threat import OverridePlan
from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.analytic import Analytic
from privaudit.attacks.inversion.base import Reconstruction
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


def release(transcript: Transcript, victim: int, round: int) -> Target:
    """The victim's gradient of `round`, read with its defense's steering scenario (KeyError when unheard)."""
    defense = transcript.public.defense
    return EXTRACTORS[defense, STEERINGS[defense].scenario].extract(transcript, victim, round)


def recover(transcript: Transcript, victim: int, round: int, model: FlatModel, data: Dataset, batch_size: int,
            seed: int, tolerance: float = TOLERANCE) -> Reconstruction:
    """Up to `batch_size` records of the victim's batch at `round`, read off its release."""
    return Analytic(tolerance).run(release(transcript, victim, round), model, input_shape=data.shape,
                                   num_classes=data.num_classes, batch_size=batch_size,
                                   normalisation=data.normalisation, seed=seed)


def recover_trapped(transcript: Transcript, plan: OverridePlan, model: FlatModel, data: Dataset, batch_size: int,
                    seed: int, tolerance: float = TOLERANCE) -> Reconstruction:
    """`recover` at the plan's recovery round, from the malicious tap's transcript."""
    return recover(transcript, plan.victim, plan.recovery_round, model, data, batch_size, seed, tolerance)
