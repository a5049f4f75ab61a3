"""From intercepted messages to what an inversion attack needs: a target gradient and the model
point at which it was computed.

Each extractor reads only a transcript (the messages its threat model heard plus the public
knowledge: W, step sizes, architecture, x_0); it never touches a defense's state.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from privaudit.wire import Kind, Transcript


@dataclass(frozen=True)
class Target:
    """A gradient of the victim's loss on its private batch, at `point`, at round `round`."""

    gradient: Tensor
    point: Tensor
    victim: int
    round: int


def dpsgd_state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """D-PSGD's update `x_i^{t+1} = Σ_j w_ij x_j^t − η g_i^t` solved for the gradient:
    `g_i^t = (Σ_j w_ij x_j^t − x_i^{t+1}) / η`, computed at the point `x_i^t`.

    Needs the victim's broadcasts at rounds t and t+1 and every neighbour's at round t: a global
    listener, or an eavesdropper on all of the victim's links. Computed in float64 so that the
    only error left is the float32 rounding of the intercepted states.
    """
    W = torch.tensor(transcript.public.W, dtype=torch.float64)
    eta = float(transcript.public.hyper["lr"])
    mixed = torch.zeros_like(transcript.payload(Kind.MODEL, round, victim, None), dtype=torch.float64)
    for j in torch.nonzero(W[victim]).flatten().tolist():
        mixed += W[victim, j] * transcript.payload(Kind.MODEL, round, j, None).double()
    following = transcript.payload(Kind.MODEL, round + 1, victim, None).double()
    return Target(
        gradient=(mixed - following) / eta,
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
    )
