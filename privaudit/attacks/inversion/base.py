"""The inversion family's interface: what an attack is (`Inversion`), what it returns
(`Reconstruction`), the observer it may report its iterates to, and the registry a campaign's
`[[attack]] kind` names (`INVERSIONS`, `register_inversion`). Shared by the optimising attacks
(`privaudit.attacks.inversion.gradient_matching`) and the closed-form one (`privaudit.attacks.inversion.analytic`); an
attack defined outside privaudit registers itself the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, is_dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from torch import Tensor

if TYPE_CHECKING:
    from privaudit.attacks.extraction import Target
    from privaudit.data import Normalisation
    from privaudit.flatmodel import FlatModel

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


class Inversion(Protocol):
    """An inversion attack: a frozen dataclass whose fields are its parameters (a campaign's
    `[[attack]]` table sets them), with a `title` for reports, that turns one intercepted target
    into a reconstruction of the victim's batch."""

    title: ClassVar[str]

    def run(self, target: Target, model: FlatModel, *, input_shape: tuple[int, ...], num_classes: int,
            batch_size: int, normalisation: Normalisation, seed: int,
            observer: Observer | None = None) -> Reconstruction: ...


INVERSIONS: dict[str, type[Inversion]] = {}
"""Inversion attacks by the name a campaign's `[[attack]] kind` gives."""


def register_inversion(name: str, cls: type[Inversion]) -> type[Inversion]:
    """Make `cls` available to campaigns as `kind = name`; ValueError when it is not a dataclass
    with a `title` and a `run`, or the name is taken by another class."""
    if not (is_dataclass(cls) and isinstance(getattr(cls, "title", None), str) and callable(getattr(cls, "run", None))):
        raise ValueError(f"inversion '{name}' must be a dataclass with a `title` and a `run` method")
    if INVERSIONS.get(name, cls) is not cls:
        raise ValueError(f"inversion '{name}' is already registered ({INVERSIONS[name].__qualname__})")
    INVERSIONS[name] = cls
    return cls
