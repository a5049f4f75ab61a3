"""The training loop: run a defense for a number of rounds over a wire, evaluating as it goes.

Evaluation looks at every agent's model and at the average model on held-out data; both matter
in decentralized learning (consensus can lag while the average is already good). The loop owns
no algorithm: `Algorithm.step` does one round and sends its messages. `Algorithm` is the little
the loop needs of a defense (`privaudit.defenses.base.Defense` has it), so the engine stands below the
defenses and imports none of them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.func import vmap

from privaudit.data import Dataset
from privaudit.flatmodel import FlatModel
from privaudit.setup import Setup
from privaudit.wire import PublicKnowledge, Tap, Transcript, Wire


class Algorithm(Protocol):
    """What the training loop uses of a private algorithm: its name, its set-up, the agents'
    models, one round, and the hyperparameters its paper publishes."""

    name: str
    setup: Setup

    @property
    def states(self) -> Tensor: ...

    def step(self, t: int, wire: Wire) -> None: ...

    def public(self) -> dict[str, Any]: ...


@dataclass
class RunOutput:
    """`history` holds one evaluation per checkpoint: {"round": t, metric: value, ...}."""

    history: list[dict[str, float]]
    transcripts: list[Transcript]
    messages_sent: dict[str, int]
    wall_s: float
    final_states: Tensor = field(repr=False)


@torch.no_grad()
def evaluate(model: FlatModel, data: Dataset, states: Tensor, round: int) -> dict[str, float]:
    """Test metrics of the average model and of each agent's own model.

    Classification: accuracy and loss of the average model, mean / min / max accuracy of the
    agents. Regression: test loss of the average model and, when the problem knows the parameter
    to find, the distance of the average model (`avg_error`) and of the agents to it. Always:
    `consensus_distance`, the agents' mean ℓ2 distance to their average.
    """
    mean = states.mean(dim=0)
    x, y = data.x_test, data.y_test
    avg_output = model.output(mean, x)
    metrics = {"round": round, "avg_loss": float(model.data_loss(avg_output, y))}
    if data.task == "classification":
        agent_output = vmap(model.output, in_dims=(0, None))(states, x)
        agent_acc = (vmap(model.predict)(agent_output) == y).float().mean(dim=1)
        metrics |= {
            "avg_acc": float((model.predict(avg_output) == y).float().mean()),
            "agent_acc_mean": float(agent_acc.mean()),
            "agent_acc_min": float(agent_acc.min()),
            "agent_acc_max": float(agent_acc.max()),
        }
    elif data.truth is not None:
        agent_error = torch.linalg.vector_norm(states - data.truth, dim=1)
        metrics |= {
            "avg_error": float(torch.linalg.vector_norm(mean - data.truth)),
            "agent_error_mean": float(agent_error.mean()),
            "agent_error_max": float(agent_error.max()),
        }
    metrics["consensus_distance"] = float(torch.linalg.vector_norm(states - mean, dim=1).mean())
    return metrics


class Diverged(RuntimeError):
    """A run whose agents' states or test metrics stopped being finite: there is nothing left to
    evaluate or attack, and a row that showed its last numbers would look like a result. `round`
    is the round (0-based, as attacks name them) whose step broke it; `history` holds the
    evaluations before it."""

    def __init__(self, round: int, what: str, history: list[dict[str, float]]) -> None:
        super().__init__(f"diverged in round {round}: {what}")
        self.round = round
        self.what = what
        self.history = history


class BrokenContract(RuntimeError):
    """A defense whose `states` are not what the engine runs on (a tensor [agents, parameters]):
    a defense written outside privaudit can break the contract, and the run says how."""


def _checked_states(defense: Algorithm, when: str) -> Tensor:
    """The defense's states, once they are a tensor [agents, model parameters]; BrokenContract
    naming `when` and what they are otherwise."""
    states, setup = defense.states, defense.setup
    expected = (setup.topology.n, setup.model.dim)
    if not isinstance(states, Tensor):
        raise BrokenContract(f"{when}: the defense's states are a {type(states).__name__}, not a tensor "
                             f"[agents, parameters] = {list(expected)}")
    if tuple(states.shape) != expected:
        raise BrokenContract(f"{when}: the defense's states have shape {list(states.shape)}, not [agents, "
                             f"parameters] = {list(expected)}")
    return states


def _non_finite_states(states: Tensor) -> str | None:
    """What is wrong with the agents' states, or None when every entry is finite. Summing first
    keeps the common case to one pass without a temporary the size of the states."""
    if torch.isfinite(states.sum()):
        return None
    bad = ~torch.isfinite(states)
    if not bad.any():
        return None
    agents = torch.nonzero(bad.reshape(len(states), -1).any(dim=1)).flatten().tolist()
    return (f"non-finite agent states (inf or nan) at agent{'s' * (len(agents) > 1)} "
            f"{', '.join(map(str, agents[:5]))}{', …' if len(agents) > 5 else ''}")


def _non_finite_metrics(metrics: dict[str, float]) -> str | None:
    """The evaluation's non-finite metrics in words, or None."""
    bad = [f"{key} = {value}" for key, value in metrics.items() if not math.isfinite(value)]
    return f"non-finite test metrics ({', '.join(bad)})" if bad else None


def public_knowledge(defense: Algorithm) -> PublicKnowledge:
    """What the paper makes public about this run: W, the architecture, x_0 and hyperparameters
    (of one network: on an audit's many worlds, what the attacker of each world knows). Kept on
    the CPU with the wire's recordings, whichever device the run is on."""
    setup = defense.setup
    return PublicKnowledge(
        defense=defense.name,
        topology=setup.topology.network.name,
        W=setup.topology.network.W.copy(),
        model=setup.model_name,
        in_shape=tuple(setup.data.shape),
        num_classes=setup.data.num_classes,
        initial_model=setup.model.initial().cpu(),
        hyper=defense.public(),
        agents=setup.topology.network_size,
    )


def simulate(defense: Algorithm, rounds: int, *, eval_every: int = 10, taps: Iterable[Tap] = (),
             after_round: Callable[[int, PublicKnowledge], None] | None = None,
             evaluation: bool = True) -> RunOutput:
    """Run `rounds` rounds of `defense`, evaluating at round 0, every `eval_every` rounds and at
    the end; the taps record what their threat models hear. `after_round(t, public)`, when given,
    is called once round t's messages are all sent: an attacker that reads the run as it goes
    (and lets its tap forget what it has read) keeps a long run's memory bounded; it is also where
    a caller counts the rounds for its progress lines (`privaudit.progress`). `Diverged` when
    a round leaves a non-finite state or an evaluation a non-finite metric, `BrokenContract` when
    the states are not a tensor [agents, parameters]. `evaluation=False`
    evaluates nothing (an audit's thousands of worlds are scored by their attacker, not tested)."""
    setup = defense.setup
    public = public_knowledge(defense)
    taps = list(taps)
    delivering = getattr(type(defense), "delivering", None)
    wire = Wire(setup.topology, taps, delivers=bool(delivering is not None and delivering()))
    history = [evaluate(setup.model, setup.data, _checked_states(defense, "before round 0"), 0)] if evaluation else []
    start = time.perf_counter()
    for t in range(rounds):
        defense.step(t, wire)
        broken = _non_finite_states(_checked_states(defense, f"after round {t}"))
        if broken:
            raise Diverged(t, broken, history)
        if after_round is not None:
            after_round(t, public)
        if evaluation and ((t + 1) % eval_every == 0 or t + 1 == rounds):
            metrics = evaluate(setup.model, setup.data, defense.states, t + 1)
            broken = _non_finite_metrics(metrics)
            if broken:
                raise Diverged(t, broken, history)
            history.append(metrics)
    return RunOutput(
        history=history,
        transcripts=[tap.transcript(public) for tap in taps],
        messages_sent={str(kind): count for kind, count in wire.counts.items()},
        wall_s=time.perf_counter() - start,
        final_states=defense.states.clone(),
    )
