"""The state override (Pasquini, Raynal & Troncoso, "On the (in)security of peer-to-peer
decentralized machine learning", IEEE S&P 2023): a neighbour a of the victim v chooses the model
the victim mixes to. D-PSGD's averaging x_v^{t+1} = Σ_j w_vj m_{j→v}^t − η g_v^t, with the liar's
message m_{a→v} free and every other term what v's other neighbours and v itself broadcast at t,
is solved for that message:

    m_{a→v} = (θ* − w_vv x_v^t − Σ_{j ∈ N_v, j ≠ a} w_vj x_j^t) / w_va,

so that v mixes to θ* exactly and steps to x_v^{t+1} = θ* − η g_v(x_v^t). The liar needs every
term it subtracts: the broadcasts of v and of each of v's other neighbours at round t, heard
before it sends (a rushing participant; `privaudit.attacks.active.threat` checks it hears them).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from privaudit.wire import Kind, Tap


def heard_broadcast(heard: Tap, kind: Kind, round: int, sender: int) -> Tensor:
    """The one broadcast of `kind` that `heard` recorded from `sender` at `round`, in float64;
    KeyError naming it when the tap did not hear it."""
    found = [m.payload for m in heard.messages
             if m.round == round and m.sender == sender and m.receiver is None and m.kind == kind]
    if len(found) != 1:
        raise KeyError(f"the malicious tap heard {len(found)} '{kind}' broadcasts of agent {sender} at round {round}")
    return found[0].double()


def override_message(heard: Tap, W: np.ndarray, round: int, liar: int, victim: int, goal: Tensor) -> Tensor:
    """m_{a→v} that makes the victim mix to `goal` (module docstring), from the round-`round`
    model broadcasts `heard` recorded; float64."""
    weights = torch.tensor(np.array(W[victim]), dtype=torch.float64)
    if float(weights[liar]) == 0.0:
        raise ValueError(f"agent {liar} does not weigh in agent {victim}'s average (w = 0): it cannot steer it")
    others = goal.double().clone()
    for j in torch.nonzero(weights).flatten().tolist():
        if j != liar:
            others -= weights[j] * heard_broadcast(heard, Kind.MODEL, round, j)
    return others / weights[liar]
