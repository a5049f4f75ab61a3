"""The malicious-neighbour threat of the trap-weight override: who lies, who it hears, what it
assumes, and the strategy it speaks through (`privaudit.wire.Malicious`).

One neighbour a of the victim v lies, once: at the override round t it sends v the message that
makes v mix to trap weights built on v's own model (`override`, `trap`), and it sends every other
message as the protocol says. At t + 1 the victim computes its gradient at the trapped point and at
t + 2 broadcasts the result of that step, from which the records are read (`recovery`). The liar
hears what its coalition `agents` hears (by default itself alone), and it must hear the models of
every neighbour of the victim at t and t + 1: `plan_override` refuses, in one line, a graph where
it does not (on a ring of four, a neighbour alone does not hear the victim's other neighbour: the
coalition of both of the victim's neighbours does), and a defense whose averaging it does not
solve or whose step does not mix what the wire delivers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from torch import Tensor

from privaudit.attacks.active.override import heard_broadcast, override_message
from privaudit.attacks.active.trap import trap_weights
from privaudit.attacks.views import EXTRACTORS
from privaudit.defenses.base import DEFENSES
from privaudit.flatmodel import FlatModel
from privaudit.topology import Topology
from privaudit.wire import Coalition, Kind, Malicious, Tap

OVERRIDE_DEFENSES = ("dpsgd", "dp_dpsgd")
"""The defenses whose averaging the override solves (x_i^{t+1} = Σ_j w_ij m_{j→i}^t − η g_i^t, one
model broadcast a round) and whose step mixes what the wire delivers."""

SCENARIO = "state_difference"
"""The extractor the recovery reads the victim's release with (`privaudit.attacks.views.dpsgd`)."""


@dataclass(frozen=True)
class OverridePlan:
    """Who lies to whom, when, and which agents' hearing it pools (`agents`, the liar among them)."""

    defense: str
    victim: int
    liar: int
    agents: tuple[int, ...]
    round: int

    @property
    def recovery_round(self) -> int:
        """The round whose gradient the victim computes at the trapped point."""
        return self.round + 1

    @property
    def rounds_heard(self) -> tuple[int, ...]:
        """The rounds the malicious tap records: the override's and the recovery's state difference."""
        return (self.round, self.round + 1, self.round + 2)

    def assumptions(self) -> tuple[str, ...]:
        """What the attacker assumed, in words, for the row."""
        pooled = (f"it pools what agents {', '.join(map(str, self.agents))} hear (they collude, only agent "
                  f"{self.liar} lies)" if len(self.agents) > 1 else "it hears only what reaches it")
        return (
            f"agent {self.liar}, a neighbour of victim {self.victim}, lies once, at round {self.round}: it follows the "
            "protocol otherwise, its own state included",
            pooled + f"; that suffices to hear every neighbour of agent {self.victim}",
            "rushing: within a round it hears the other agents' models before it sends its own",
            "it knows W, η, the architecture, and public data of the task (the held-out split) to place its traps",
        )


def override_refusal(defense: str) -> str | None:
    """Why the override does not apply to `defense` (one line), or None when it does."""
    if defense not in OVERRIDE_DEFENSES or defense not in DEFENSES or not DEFENSES[defense].delivering():
        return (f"the trap-weight override applies to {', '.join(OVERRIDE_DEFENSES)} only (defenses whose averaging it "
                f"solves and whose step mixes what the wire delivers), not '{defense}'")
    return None


def plan_override(defense: str, topology: Topology, *, victim: int, round: int, rounds: int,
                  liar: int | None = None, agents: Iterable[int] | None = None) -> OverridePlan:
    """The override of `victim` at `round` of a `rounds`-round run of `defense`; ValueError (one
    line) for a defense it does not apply to, a liar that is not the victim's neighbour, a run too
    short to read the release, or agents that do not hear every neighbour of the victim."""
    refusal = override_refusal(defense)
    if refusal is not None:
        raise ValueError(refusal)
    if not 0 <= victim < topology.n:
        raise ValueError(f"victim {victim} is not an agent (0..{topology.n - 1})")
    liar = min(topology.neighbours(victim)) if liar is None else liar
    if liar == victim or not 0 <= liar < topology.n or not topology.has_edge(liar, victim):
        raise ValueError(f"the liar {liar} must be a neighbour of the victim {victim} "
                         f"(its neighbours: {topology.neighbours(victim)})")
    pooled = tuple(sorted({liar, *(agents or ())}))
    if victim in pooled:
        raise ValueError(f"the victim {victim} cannot be one of the malicious agents {list(pooled)}")
    if round < 0 or round + 2 >= rounds:
        raise ValueError(f"an override at round {round} reads the victim's broadcast of round {round + 2}, but the run "
                         f"has rounds 0..{rounds - 1}")
    probe = Coalition(pooled)
    probe.check(topology)
    why = EXTRACTORS[defense, SCENARIO].missing(probe, victim, topology)
    if why is not None:
        raise ValueError(f"the malicious agents {list(pooled)} cannot steer and read agent {victim}: {why}; "
                         f"give agents that hold or neighbour every neighbour of agent {victim} "
                         f"({topology.neighbours(victim)})")
    return OverridePlan(defense, victim, liar, pooled, round)


@dataclass
class TrapOverride:
    """The liar's strategy (`privaudit.wire.Strategy`): at the override round, the message to the
    victim that makes it mix to its own heard model with a trapped first layer; nothing crafted
    otherwise. It keeps what it sent (`goal`, `message`) for the row."""

    plan: OverridePlan
    W: np.ndarray
    model: FlatModel
    public: Tensor
    batch_size: int
    seed: int
    goal: Tensor | None = field(default=None, repr=False)
    message: Tensor | None = field(default=None, repr=False)

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int], heard: Tap) -> Mapping[int, Tensor]:
        plan = self.plan
        if round != plan.round or sender != plan.liar or kind != Kind.MODEL:
            return {}
        victim_model = heard_broadcast(heard, Kind.MODEL, round, plan.victim)
        self.goal = trap_weights(self.model, victim_model, self.public, self.batch_size, self.seed)
        self.message = override_message(heard, self.W, round, plan.liar, plan.victim, self.goal)
        return {plan.victim: self.message}


def malicious_tap(plan: OverridePlan, strategy: TrapOverride) -> Malicious:
    """The tap the liar speaks through: its coalition's hearing at the rounds it reads."""
    return Malicious(plan.agents, [plan.liar], strategy, rounds=plan.rounds_heard, kinds=[Kind.MODEL])
