"""The training loop: run a defense for a number of rounds over a wire, evaluating as it goes.

Evaluation looks at every agent's model and at the average model on held-out data; both matter
in decentralized learning (consensus can lag while the average is already good). The loop owns
no algorithm: `Defense.step` does one round and sends its messages.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import vmap
from tqdm import tqdm

from defenses.base import Defense
from privaudit.flatmodel import FlatModel
from privaudit.wire import PublicKnowledge, Tap, Transcript, Wire


@dataclass
class Evaluation:
    """Test metrics at one round: the average model, and the spread over agents' own models."""

    round: int
    avg_acc: float
    avg_loss: float
    agent_acc_mean: float
    agent_acc_min: float
    agent_acc_max: float
    consensus_distance: float


@dataclass
class RunOutput:
    history: list[Evaluation]
    transcripts: list[Transcript]
    messages_sent: dict[str, int]
    wall_s: float
    final_states: Tensor = field(repr=False)


@torch.no_grad()
def evaluate(model: FlatModel, states: Tensor, x: Tensor, y: Tensor, round: int) -> Evaluation:
    """Accuracy and loss of the average model, and accuracy of each agent's model, on (x, y).

    `consensus_distance` is the mean ℓ2 distance of the agents' models to their average.
    """
    mean = states.mean(dim=0)
    avg_logits = model.logits(mean, x)
    agent_logits = vmap(model.logits, in_dims=(0, None))(states, x)
    agent_acc = (agent_logits.argmax(-1) == y).float().mean(dim=1)
    return Evaluation(
        round=round,
        avg_acc=float((avg_logits.argmax(-1) == y).float().mean()),
        avg_loss=float(F.cross_entropy(avg_logits, y)),
        agent_acc_mean=float(agent_acc.mean()),
        agent_acc_min=float(agent_acc.min()),
        agent_acc_max=float(agent_acc.max()),
        consensus_distance=float(torch.linalg.vector_norm(states - mean, dim=1).mean()),
    )


def public_knowledge(defense: Defense) -> PublicKnowledge:
    """What the paper makes public about this run: W, the architecture, x_0 and hyperparameters."""
    setup = defense.setup
    return PublicKnowledge(
        defense=defense.name,
        topology=setup.topology.name,
        W=setup.topology.W.copy(),
        model=setup.model_name,
        in_shape=tuple(setup.data.shape),
        num_classes=setup.data.num_classes,
        initial_model=setup.model.initial(),
        hyper=defense.public(),
    )


def simulate(defense: Defense, rounds: int, *, eval_every: int = 10, taps: Iterable[Tap] = (),
             progress: bool = False, label: str = "") -> RunOutput:
    """Run `rounds` rounds of `defense`, evaluating at round 0, every `eval_every` rounds and at
    the end; the taps record what their threat models hear."""
    setup = defense.setup
    public = public_knowledge(defense)
    taps = list(taps)
    wire = Wire(setup.topology, taps)
    x_test, y_test = setup.data.x_test, setup.data.y_test
    history = [evaluate(setup.model, defense.states, x_test, y_test, 0)]
    start = time.perf_counter()
    for t in tqdm(range(rounds), desc=label or defense.name, disable=not progress, leave=False):
        defense.step(t, wire)
        if (t + 1) % eval_every == 0 or t + 1 == rounds:
            history.append(evaluate(setup.model, defense.states, x_test, y_test, t + 1))
    return RunOutput(
        history=history,
        transcripts=[tap.transcript(public) for tap in taps],
        messages_sent={str(kind): count for kind, count in wire.counts.items()},
        wall_s=time.perf_counter() - start,
        final_states=defense.states.clone(),
    )
