"""How many loss evaluations an inversion attack may spend, and an observer that counts them.

An optimising inversion (DLG, iDLG, Inverting Gradients) runs for up to thousands of loss
evaluations, seconds to minutes between two lines of a campaign's log. Its observer
(`privaudit.attacks.inversion.base.Observer`) is told the evaluations so far after each one, so the campaign
counts them without the attack knowing (`counting`). The count's total is the attack's budget
where the attack has one fixed in advance (`evaluation_budget`): a ceiling, since an attack stops
sooner once it matches. Batch inversion's budget depends on the target (it screens the orders of
a multi-step target's blocks), and an attack written outside privaudit states none, so those are
counted without a total.
"""

from __future__ import annotations

from torch import Tensor

from privaudit.attacks.inversion.base import Inversion, Observer
from privaudit.attacks.inversion.gradient_matching import DLG, InvertingGradients
from privaudit.progress import Progress


def evaluation_budget(attack: Inversion) -> int | None:
    """The most loss evaluations `attack` may spend: DLG's and iDLG's `evaluations`, Inverting
    Gradients' `iterations` and the scoring of its last iterate; None where no budget is fixed in
    advance."""
    if isinstance(attack, DLG):
        return attack.evaluations
    if isinstance(attack, InvertingGradients):
        return attack.iterations + 1
    return None


def inversion_progress(label: str, attack: Inversion) -> Progress:
    """A count of `attack`'s loss evaluations, against its budget when it has one."""
    budget = evaluation_budget(attack)
    return Progress(label, budget, unit="loss evaluations", ceiling=budget is not None)


def counting(observer: Observer | None, progress: Progress) -> Observer:
    """`observer` (if any) with `progress` brought up to the evaluations so far on every call;
    what it returns (stop or not) is `observer`'s alone."""

    def observe(evaluations: int, images: Tensor, objective: Tensor) -> bool:
        progress.update(evaluations - progress.done)
        return observer is not None and observer(evaluations, images, objective)

    return observe
