"""The malicious-neighbour threat of the trap-weight override: who lies, who it hears, what it
assumes, and the strategy it speaks through (`privaudit.wire.Malicious`).

One neighbour a of the victim v lies, once: at the override round t it sends v the message that
makes v compute its next release at trap weights built on v's own model (`override`, `trap`), and it
sends every other message as the protocol says. The defense's view says how (`Steering`): for
D-PSGD, v mixes to the trapped point at t, computes its gradient there at t + 1 (`lag`), and at
t + 2 broadcasts the result of that step, from which the records are read (`recovery`, with the
steering's extraction scenario). The liar hears what its coalition `agents` hears (by default itself
alone), and it must hear what that scenario reads (for D-PSGD the models of every neighbour of the
victim at t and t + 1): `plan_override` refuses, in one line, a graph where it does not (on a ring
of four, a neighbour alone does not hear the victim's other neighbour: the coalition of both of the
victim's neighbours does), a round the steering cannot use, and a defense without a steering or
whose step does not mix what the wire delivers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from torch import Tensor

from privaudit.attacks.active.override import override_message, steered_defenses, steering, victim_model
from privaudit.attacks.active.trap import trap_weights
from privaudit.attacks.extraction import Steering
from privaudit.attacks.views import EXTRACTORS, STEERINGS
from privaudit.flatmodel import FlatModel
from privaudit.topology import Topology
from privaudit.wire import Coalition, Kind, Malicious, PublicKnowledge, Tap


@dataclass(frozen=True)
class OverridePlan:
    """Who lies to whom, when, and which agents' hearing it pools (`agents`, the liar among them)."""

    defense: str
    victim: int
    liar: int
    agents: tuple[int, ...]
    round: int

    @property
    def steering(self) -> Steering:
        """How the liar steers this defense (its view's `Steering`)."""
        return STEERINGS[self.defense]

    @property
    def recovery_round(self) -> int:
        """The round whose release the victim computes at the steered point."""
        return self.round + self.steering.lag

    @property
    def rounds_heard(self) -> tuple[int, ...]:
        """The rounds the malicious tap records: the override's and those its release is read from."""
        read = EXTRACTORS[self.defense, self.steering.scenario].rounds(self.recovery_round)
        return tuple(sorted({self.round, *(t for t in read if t >= 0)}))

    @property
    def kinds_heard(self) -> frozenset[Kind]:
        """The message kinds the malicious tap records: those it crafts and those its release is read from."""
        return EXTRACTORS[self.defense, self.steering.scenario].kinds | {self.steering.kind}

    def assumptions(self) -> tuple[str, ...]:
        """What the attacker assumed, in words, for the row."""
        pooled = (f"it pools what agents {', '.join(map(str, self.agents))} hear (they collude, only agent "
                  f"{self.liar} lies)" if len(self.agents) > 1 else "it hears only what reaches it")
        return (
            f"agent {self.liar}, a neighbour of victim {self.victim}, lies once, at round {self.round}: it follows the "
            "protocol otherwise, its own state included",
            pooled + f"; that suffices to hear every neighbour of agent {self.victim}",
            "rushing: within a round it hears the other agents' messages before it sends its own",
            "it knows W, η, the architecture, and public data of the task (the held-out split) to place its traps",
        )


def override_refusal(defense: str) -> str | None:
    """Why the override does not apply to `defense` (one line), or None when it does."""
    if steering(defense) is None:
        return (f"a liar steers {', '.join(steered_defenses())} only (defenses whose view states how, "
                f"privaudit.attacks.views.register_steering, and whose step mixes what the wire delivers), "
                f"not '{defense}'")
    return None


def plan_override(defense: str, topology: Topology, *, victim: int, round: int, rounds: int | None,
                  liar: int | None = None, agents: Iterable[int] | None = None,
                  hyper: Mapping[str, object] | None = None) -> OverridePlan:
    """The override of `victim` at `round` of a `rounds`-round run of `defense` (None: a run as long
    as the plan needs, `rounds_heard`; with public
    hyperparameters `hyper`); ValueError (one line) for a defense it does not apply to, a round it
    cannot steer, a liar that is not the victim's neighbour, a run too short to read the release,
    or agents that do not hear what the release is read from."""
    refusal = override_refusal(defense)
    if refusal is not None:
        raise ValueError(refusal)
    steer = STEERINGS[defense]
    why = steer.refusal(hyper or {}, round)
    if why is not None:
        raise ValueError(why)
    if not 0 <= victim < topology.n:
        raise ValueError(f"victim {victim} is not an agent (0..{topology.n - 1})")
    liar = min(topology.neighbours(victim)) if liar is None else liar
    if liar == victim or not 0 <= liar < topology.n or not topology.has_edge(liar, victim):
        raise ValueError(f"the liar {liar} must be a neighbour of the victim {victim} "
                         f"(its neighbours: {topology.neighbours(victim)})")
    pooled = tuple(sorted({liar, *(agents or ())}))
    if victim in pooled:
        raise ValueError(f"the victim {victim} cannot be one of the malicious agents {list(pooled)}")
    plan = OverridePlan(defense, victim, liar, pooled, round)
    last = max(plan.rounds_heard)
    if round < 0 or (rounds is not None and last >= rounds):
        raise ValueError(f"an override at round {round} reads the victim's release from round {last}, but the run "
                         f"has rounds 0..{rounds - 1}")
    probe = Coalition(pooled)
    probe.check(topology)
    why = EXTRACTORS[defense, steer.scenario].missing(probe, victim, topology)
    if why is not None:
        raise ValueError(f"the malicious agents {list(pooled)} cannot steer and read agent {victim}: {why}; "
                         f"give agents that hold or neighbour every neighbour of agent {victim} "
                         f"({topology.neighbours(victim)})")
    return plan


@dataclass
class TrapOverride:
    """The liar's strategy (`privaudit.wire.Strategy`): at the override round, the message to the
    victim that makes it mix to its own heard model with a trapped first layer; nothing crafted
    otherwise. It keeps what it sent (`goal`, `message`) for the row."""

    plan: OverridePlan
    knowledge: PublicKnowledge
    model: FlatModel
    public: Tensor
    batch_size: int
    seed: int
    goal: Tensor | None = field(default=None, repr=False)
    message: Tensor | None = field(default=None, repr=False)

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int], heard: Tap) -> Mapping[int, Tensor]:
        plan = self.plan
        if round != plan.round or sender != plan.liar or kind != plan.steering.kind:
            return {}
        base = victim_model(heard, self.knowledge, round, plan.victim)
        self.goal = trap_weights(self.model, base, self.public, self.batch_size, self.seed)
        self.message = override_message(heard, self.knowledge, round, plan.liar, plan.victim, self.goal)
        return {plan.victim: self.message}


def malicious_tap(plan: OverridePlan, strategy: TrapOverride) -> Malicious:
    """The tap the liar speaks through: its coalition's hearing at the rounds it reads."""
    return Malicious(plan.agents, [plan.liar], strategy, rounds=plan.rounds_heard, kinds=plan.kinds_heard,
                     speaks=[plan.steering.kind])
