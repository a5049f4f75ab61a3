"""What the coalition attack must know of a defense: its state recurrence, written as the
coalition's knowledge system needs it (`privaudit.attacks.coalition.knowledge`). Each defense's view module
(`privaudit/attacks/views/<defense>.py`) registers its own, or says why there is none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from privaudit.wire import Kind, PublicKnowledge, Transcript


@dataclass(frozen=True)
class Dynamics:
    """A defense's state recurrence as the coalition writes it.

    `step(transcript, t)` gives (A_t, B_t or None, s_t) of x^{t+1} = A_t x^t + B_t m^t − s_t g^t;
    `kind` is the broadcast m^t; `exact` says whether m^t is the state itself (else a fresh
    random draw around it: heard draws enter as constants, unheard ones as unknowns, and a heard
    draw is an equation only up to its own noise). `batch_size(public)`, where given, is the
    number of records each agent's update is computed on: the record fit (`privaudit.attacks.coalition.
    record_fit`), which fits one record per agent to D-PSGD's exact recurrence, runs only on a
    defense that gives it (its update is x^{t+1} = W x^t − s g^t with no noise)."""

    defense: str
    kind: Kind
    exact: bool
    step: Callable[[Transcript, int], tuple[Tensor, Tensor | None, float]]
    recovers: str
    batch_size: Callable[[PublicKnowledge], int] | None = None
