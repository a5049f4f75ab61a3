"""What an inversion attack returns, and the observer it may report its iterates to: shared by
the optimising attacks (`attacks.inversion.gradient_matching`) and the closed-form one
(`attacks.inversion.analytic`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor

Observer = Callable[[int, Tensor, Tensor], bool]
"""Called after every loss evaluation with (evaluations so far, current images [R, B, ...], their
objective [R]); returning True stops the attack. For measurement only (a benchmark timing how
soon a quality is reached, a progress bar): the attack reads nothing back from it but that bit."""


@dataclass(frozen=True)
class Reconstruction:
    """What an inversion attack produced.

    `images` [B, ...] are in the model's (normalised) input space and `labels` [B] are class
    indices (the argmax of DLG's soft labels); both are None when no finite iterate existed,
    and `labels` alone is None when the attack does not tie a label to each image (the analytic
    attack on a batch). `label_source` says where the labels came from: "extracted" (read off
    the gradient), "counted" (counts from the gradient, slots from the attack), "optimised"
    (DLG's soft labels) or "none".
    `loss` is the gradient-matching loss of the returned images (the attack's own distance, so
    DLG's and IG's are not comparable); `restart_losses` gives it for every restart's best
    iterate. `iterations` counts loss evaluations (one per L-BFGS function evaluation, one per
    Adam step, plus IG's scoring of its last iterate). `stopped_by` is "budget", "tolerance",
    "observer", "diverged", "stalled" (L-BFGS ended on its own: a zero gradient, e.g. saturated
    sigmoids, or a zero step), "closed form" (no optimisation) or "not run" (rejected before
    optimising). `exact` is the number of images known to be exact copies of inputs (the
    analytic attack's: a sample alone in two or more units), None for optimising attacks.
    """

    images: Tensor | None
    labels: Tensor | None
    label_source: str
    loss: float
    iterations: int
    wall_s: float
    status: str
    stopped_by: str
    restart: int | None = None
    restart_losses: tuple[float, ...] = field(default=())
    exact: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"
