"""The wire: every message a defense sends, and the taps that record what an attacker hears.

Defenses never hand tensors to each other directly: each transmission goes through `Wire.send`
(one directed link) or `Wire.broadcast` (one payload to all neighbours), which checks that the
link exists and offers the message to the taps. A tap is a threat model: it decides from the
header alone (round, sender, receiver, kind) whether it hears the message, and only then is the
payload copied, so a 1000-round run keeps just the rounds, links and kinds that were asked for.

An honest-but-curious neighbour also knows its own private values (its state, its noise draws):
defenses report those with `Wire.disclose`, and only the tap observing that agent records them.

A participant who lies is a `Malicious` tap: it hears as a coalition does, and the wire replaces
the messages its liars broadcast with `Wire.broadcast_each`, or send over links with
`Wire.send_each`, by what its strategy computes from that tap's record so far, receiver by receiver.
The wire then delivers: both return the `Delivery` of the crafted messages, and a defense that mixes
through `Defense.gossip` with it (or reads `Delivery.received` for directed messages) uses what each
agent received. With no liar nothing changes (they return None, the same tensors as before).
On an audit's batched worlds the liar speaks through its stacked tap (`privaudit.worlds.Replicated`,
`Tap.lie_each`, `Tap.lie_sends`): each world's liar crafts from its own world's messages, all worlds
at once.
"""

from __future__ import annotations

import functools
import pickle
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from privaudit.errors import PrivauditError
from privaudit.topology import Topology

TRANSCRIPT_FORMAT = "privaudit-transcript/1"


class Kind(StrEnum):
    """What a payload is; extractors in `privaudit/attacks/extraction.py` are keyed on it."""

    MODEL = "model"
    PREGOSSIP_MODEL = "pregossip_model"
    CROSS_GRADIENT = "cross_gradient"
    MOMENTUM = "momentum"
    NOISY_STATE = "noisy_state"
    QUANTIZED_STATE = "quantized_state"
    ADMM_BRIDGE = "admm_bridge"


@dataclass(frozen=True)
class Message:
    """One transmission. `receiver` is None for a broadcast to every neighbour of `sender`."""

    round: int
    sender: int
    receiver: int | None
    kind: Kind
    payload: Tensor


@dataclass(frozen=True)
class Disclosure:
    """A value private to `agent` at `round` (its own state or noise), known only to itself."""

    round: int
    agent: int
    name: str
    value: Tensor


def _as_set(values: Iterable[Any] | None) -> frozenset | None:
    return None if values is None else frozenset(values)


class Tap(ABC):
    """A threat model: which messages an attacker hears, limited to chosen rounds and kinds.

    `rounds` / `kinds` of None mean all of them; recording is what costs memory, so long runs
    should name the rounds they need.
    """

    threat_model: str

    def __init__(self, rounds: Iterable[int] | None = None, kinds: Iterable[Kind | str] | None = None):
        self.rounds = _as_set(rounds)
        self.kinds = None if kinds is None else frozenset(Kind(k) for k in kinds)
        self.messages: list[Message] = []
        self.disclosures: list[Disclosure] = []

    observer: int | None = None

    stacked: bool = False
    """Whether this tap keeps each message once for an audit's many worlds, stacked over them
    (`privaudit.worlds.Replicated`): the only tap that may lie on such worlds (`Wire`)."""

    def speaker(self) -> Malicious | None:
        """The malicious tap that speaks through this one (itself, or the one it stacks over an
        audit's worlds); None for a tap that only listens."""
        return None

    def lie_each(self, round: int, kind: Kind, payloads: Tensor, topology: Topology) -> Delivery:
        """`Wire.broadcast_each` with this stacked tap's liars speaking in every world at once."""
        raise PrivauditError(f"the {self.threat_model} tap does not lie on an audit's worlds")

    def lie_sends(self, round: int, kind: Kind, links: Sequence[tuple[int, int]], payloads: Tensor,
                  topology: Topology) -> Delivery:
        """`Wire.send_each` with this stacked tap's liars speaking in every world at once."""
        raise PrivauditError(f"the {self.threat_model} tap does not lie on an audit's worlds")

    def wants_round(self, round: int) -> bool:
        return self.rounds is None or round in self.rounds

    def wants_kind(self, round: int, kind: Kind) -> bool:
        """Whether this tap records messages of `kind` at `round` (from whoever it hears)."""
        return self.wants_round(round) and (self.kinds is None or kind in self.kinds)

    def wants(self, round: int, sender: int, receiver: int | None, kind: Kind, topology: Topology) -> bool:
        return self.wants_kind(round, kind) and self.hears(sender, receiver, topology)

    @abstractmethod
    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        """Whether a message from `sender` to `receiver` (None: broadcast) reaches this attacker."""

    def check(self, topology: Topology) -> None:
        """Raise ValueError if the tap names agents or links the topology does not have."""

    def wants_disclosure(self, round: int, agent: int, name: str) -> bool:
        """Whether this tap records `agent`'s private value `name` at `round`: a tap observing
        as that agent knows all of its own values."""
        return self.observer == agent and self.wants_round(round)

    def record(self, message: Message) -> None:
        """Keep a message this tap hears."""
        self.messages.append(message)

    def record_disclosure(self, disclosure: Disclosure) -> None:
        """Keep a private value this tap observes."""
        self.disclosures.append(disclosure)

    def hear_each(self, round: int, kind: Kind, payloads: Tensor, topology: Topology) -> None:
        """Record what this tap hears of every agent i broadcasting `payloads[i]` (`Wire.broadcast_each`)."""
        if not self.wants_kind(round, kind):
            return
        for sender in range(topology.n):
            if self.hears(sender, None, topology):
                self.record(Message(round, sender, None, kind, payloads[sender].detach().to("cpu", copy=True)))

    def hear_sends(self, round: int, kind: Kind, links: Sequence[tuple[int, int]], payloads: Tensor,
                   topology: Topology) -> None:
        """Record what this tap hears of `payloads[r]` sent over each link `links[r]` (`Wire.send_each`)."""
        for (sender, receiver), payload in zip(links, payloads):
            if self.wants(round, sender, receiver, kind, topology):
                self.record(Message(round, sender, receiver, kind, payload.detach().to("cpu", copy=True)))

    def observes_anyone(self) -> bool:
        """Whether this tap may record some agent's private values (a listener on the wire records none)."""
        return self.observer is not None or type(self).wants_disclosure is not Tap.wants_disclosure

    def observe_each(self, round: int, name: str, values: Callable[[], Sequence[Tensor]], agents: int) -> None:
        """Record the private values `values()[i]` of the agents this tap observes (`Wire.disclose_each`);
        `values` is called only when there is one."""
        observed = [i for i in range(agents) if self.wants_disclosure(round, i, name)]
        if observed:
            computed = values()
            for agent in observed:
                self.record_disclosure(Disclosure(round, agent, name, computed[agent].detach().to("cpu", copy=True)))

    def forget(self, before: int) -> None:
        """Drop what was recorded for rounds before `before`: an attacker that reads each round
        as the run goes (an audit's scorer) keeps memory bounded over long runs."""
        self.messages = [m for m in self.messages if m.round >= before]
        self.disclosures = [d for d in self.disclosures if d.round >= before]

    def transcript(self, public: PublicKnowledge) -> Transcript:
        return Transcript(
            threat_model=self.threat_model,
            observer=self.observer,
            messages=list(self.messages),
            disclosures=list(self.disclosures),
            public=public,
        )


class GlobalListener(Tap):
    """Hears every message on every link (the strongest passive attacker)."""

    threat_model = "global_listener"

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        return True


class Eavesdropper(Tap):
    """An external listener on chosen links. On an undirected link {i, j} it hears both directions;
    on a directed link i → j only what i sends to j (a tap on one direction of a duplex channel,
    one antenna's beam). A broadcast travels over all of the sender's links, so it hears every
    broadcast of an agent with an outgoing link it hears: both ends of an undirected link, only i
    of a directed one."""

    threat_model = "eavesdropper"

    def __init__(self, links: Iterable[tuple[int, int]] = (), rounds=None, kinds=None, *,
                 directed: Iterable[tuple[int, int]] = ()):
        super().__init__(rounds, kinds)
        self.links = frozenset(frozenset(link) for link in links)
        self.directed = frozenset((int(i), int(j)) for i, j in directed)
        self._arcs = self.directed | {arc for link in self.links if len(link) == 2
                                      for arc in (tuple(link), tuple(link)[::-1])}
        self._senders = frozenset(sender for sender, _ in self._arcs)

    def check(self, topology: Topology) -> None:
        for link in self.links:
            i, j = sorted(link) if len(link) == 2 else (next(iter(link)),) * 2
            if i == j or not topology.has_edge(i, j):
                raise ValueError(f"eavesdropper link ({i}, {j}) is not an edge of the {topology.name} topology")
        for i, j in sorted(self.directed):
            if i == j or not topology.has_edge(i, j):
                raise ValueError(f"eavesdropper directed link {i} → {j} is not an edge of the {topology.name} "
                                 "topology")

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        if receiver is None:
            return sender in self._senders
        return (sender, receiver) in self._arcs


class CuriousNeighbour(Tap):
    """An honest-but-curious agent: hears what it is sent (directly or by a neighbour's broadcast),
    knows what it sends itself, and records its own disclosed private values."""

    threat_model = "curious_neighbour"

    def __init__(self, agent: int, rounds=None, kinds=None):
        super().__init__(rounds, kinds)
        self.observer = agent

    def check(self, topology: Topology) -> None:
        if not 0 <= self.observer < topology.n:
            raise ValueError(f"curious neighbour {self.observer} is not an agent (0..{topology.n - 1})")

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        if sender == self.observer or receiver == self.observer:
            return True
        return receiver is None and topology.has_edge(sender, self.observer)


class Coalition(Tap):
    """Several honest-but-curious agents pooling what each hears (El Mrini et al. 2024): every
    message sent or received by a member, every broadcast of a member's neighbour, and each
    member's own disclosed private values."""

    threat_model = "coalition"

    def __init__(self, agents: Iterable[int], rounds=None, kinds=None):
        super().__init__(rounds, kinds)
        self.agents = frozenset(agents)

    def check(self, topology: Topology) -> None:
        outside = sorted(a for a in self.agents if not 0 <= a < topology.n)
        if not self.agents or outside:
            raise ValueError(f"coalition agents {outside or '[]'} are not agents (0..{topology.n - 1})")
        if len(self.agents) == topology.n:
            raise ValueError("the coalition holds every agent: nobody is left to attack")

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        if sender in self.agents or receiver in self.agents:
            return True
        return receiver is None and any(topology.has_edge(sender, a) for a in self.agents)

    def wants_disclosure(self, round: int, agent: int, name: str) -> bool:
        return agent in self.agents and self.wants_round(round)


class Strategy(Protocol):
    """How a malicious participant chooses what it sends (`privaudit.attacks.active`): the payload
    each receiver gets instead of `sender`'s message of `kind` at `round`, computed from `heard`'s
    record alone (the receivers it leaves out get the honest message)."""

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int], heard: Tap) -> Mapping[int, Tensor]: ...


class Malicious(Coalition):
    """Agents that follow the protocol except in what some of them (`liars`) send: the tap hears
    what the coalition `agents` hears (one agent: what that agent hears), and every message of a
    kind in `speaks` that a liar broadcasts is replaced, receiver by receiver, by what
    `strategy.craft` computes from this tap's record so far (Pasquini, Raynal & Troncoso, S&P 2023).
    It is rushing: within a round it hears the honest agents' messages before it sends its own, as
    any participant of a synchronous round may wait to. Its own state updates honestly from what it
    receives; only its messages lie."""

    threat_model = "malicious"

    def __init__(self, agents: Iterable[int], liars: Iterable[int], strategy: Strategy, rounds=None, kinds=None,
                 speaks: Iterable[Kind | str] = (Kind.MODEL,)):
        super().__init__(agents, rounds, kinds)
        self.liars = frozenset(liars)
        self.strategy = strategy
        self.speaks = frozenset(Kind(k) for k in speaks)

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if not self.liars or not self.liars <= self.agents:
            raise ValueError(f"the liars {sorted(self.liars)} must be some of the malicious agents {sorted(self.agents)}")

    def speaker(self) -> Malicious:
        return self

    def lies(self, kind: Kind, sender: int) -> bool:
        """Whether `sender`'s messages of `kind` are crafted rather than the protocol's."""
        return sender in self.liars and kind in self.speaks

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int],
              heard: Tap | None = None) -> dict[int, Tensor]:
        """The strategy's payloads for `sender`'s neighbours `receivers`, computed from `heard`'s
        record (this tap's; on an audit's worlds the stacked tap's, one payload row per world);
        ValueError for a receiver that is not one of them (a message cannot go where no link goes)."""
        crafted = dict(self.strategy.craft(round, kind, sender, list(receivers), self if heard is None else heard))
        stray = sorted(set(crafted) - set(receivers))
        if stray:
            raise ValueError(f"liar {sender} crafted a message for agent {stray[0]}, which is not its neighbour")
        return crafted


class Witnesses(Tap):
    """Several agents' own private values (batch rows, gradients) at chosen rounds, kept to score a
    coalition attack afterwards; like `GroundTruth`, never handed to an attack."""

    threat_model = "ground_truth"

    def __init__(self, agents: Iterable[int], rounds=None, names: Iterable[str] = ("batch", "gradient")):
        super().__init__(rounds, kinds=())
        self.agents = frozenset(agents)
        self.names = frozenset(names)

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        return False

    def wants_disclosure(self, round: int, agent: int, name: str) -> bool:
        return agent in self.agents and name in self.names and self.wants_round(round)


class GroundTruth(Tap):
    """The victim's own private values (by default its batch rows) at chosen rounds, kept to
    score an attack afterwards. Not a threat model: it hears no message, and its disclosures
    are never handed to an attack (only `privaudit.metrics` meets them)."""

    threat_model = "ground_truth"

    def __init__(self, agent: int, rounds=None, names: Iterable[str] = ("batch",)):
        super().__init__(rounds, kinds=())
        self.observer = agent
        self.names = frozenset(names)

    def check(self, topology: Topology) -> None:
        if not 0 <= self.observer < topology.n:
            raise ValueError(f"victim {self.observer} is not an agent (0..{topology.n - 1})")

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        return False

    def wants_disclosure(self, round: int, agent: int, name: str) -> bool:
        return name in self.names and super().wants_disclosure(round, agent, name)


@dataclass
class PublicKnowledge:
    """What every attacker is assumed to know: the paper's public parameters, not private data.

    `hyper` holds the defense's public hyperparameters (step sizes, schedule constants, clip norm,
    noise multiplier…) as plain numbers, so an extractor can recompute e.g. η_t. `agents` is N,
    the number of agents of one network (W may hold several copies of it side by side: see
    `Topology.replicate`).
    """

    defense: str
    topology: str
    W: np.ndarray
    model: str
    in_shape: tuple[int, ...]
    num_classes: int
    initial_model: Tensor
    hyper: dict[str, Any] = field(default_factory=dict)
    agents: int | None = None

    def __post_init__(self) -> None:
        if self.agents is None:
            self.agents = len(self.W)

    @functools.cached_property
    def mixing(self) -> Tensor:
        """W as a float64 tensor, built once (extractors read it at every round)."""
        return torch.tensor(self.W, dtype=torch.float64)


@dataclass
class Transcript:
    """The recorded messages of one tap, with the public knowledge of its threat model."""

    threat_model: str
    observer: int | None
    messages: list[Message]
    disclosures: list[Disclosure]
    public: PublicKnowledge

    @functools.cached_property
    def _by_sender(self) -> dict[tuple[Kind, int, int], list[Message]]:
        """The messages by (kind, round, sender), built on the first look-up: extractors look up a
        few messages per round among the thousands a wide run records."""
        index: dict[tuple[Kind, int, int], list[Message]] = {}
        for m in self.messages:
            index.setdefault((m.kind, m.round, m.sender), []).append(m)
        return index

    def find(self, kind: Kind | str | None = None, *, round: int | None = None,
             sender: int | None = None, receiver: int | None = -1) -> list[Message]:
        """Messages matching every given field; `receiver=None` selects broadcasts, -1 any."""
        if kind is not None and round is not None and sender is not None:
            found = self._by_sender.get((Kind(kind), round, sender), [])
            return found if receiver == -1 else [m for m in found if m.receiver == receiver]
        return [
            m for m in self.messages
            if (kind is None or m.kind == Kind(kind))
            and (round is None or m.round == round)
            and (sender is None or m.sender == sender)
            and (receiver == -1 or m.receiver == receiver)
        ]

    def payload(self, kind: Kind | str, round: int, sender: int, receiver: int | None = -1) -> Tensor:
        """The one payload sent by `sender` at `round` of `kind` (to `receiver`, when given);
        KeyError saying what was recorded when the tap did not hear it."""
        found = self.find(kind, round=round, sender=sender, receiver=receiver)
        if len(found) != 1:
            heard = sorted({m.round for m in self.find(kind, sender=sender)})
            raise KeyError(
                f"{self.threat_model} transcript has {len(found)} '{Kind(kind)}' messages from agent "
                f"{sender} at round {round} (rounds heard from it: {heard[:10]}{'…' if len(heard) > 10 else ''})"
            )
        return found[0].payload

    def disclosed(self, agent: int, round: int, name: str) -> Tensor:
        """The one value `agent` disclosed to itself as `name` at `round` (a member's own gradient,
        state or batch); KeyError when the tap did not record it."""
        found = [d.value for d in self.disclosures if d.agent == agent and d.round == round and d.name == name]
        if len(found) != 1:
            raise KeyError(f"the {self.threat_model} transcript lacks agent {agent}'s own '{name}' at round {round}")
        return found[0]

    def save(self, path: str | Path) -> None:
        """Write the transcript as plain tensors, lists, strings and numbers, no pickled object,
        so that `load` reads it with `weights_only=True`: loading a file never runs code from it."""
        torch.save(self._plain(), path)

    @staticmethod
    def load(path: str | Path) -> Transcript:
        """A transcript `save` wrote; PrivauditError (one line) for any other file, including a
        pickle that would run code when loaded in full."""
        try:
            plain = torch.load(path, weights_only=True)
            if plain.get("format") != TRANSCRIPT_FORMAT:
                raise ValueError(f"format {plain.get('format')!r}")
            return Transcript._from_plain(plain)
        except (OSError, EOFError, RuntimeError, pickle.UnpicklingError, AttributeError, KeyError, TypeError,
                ValueError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise PrivauditError(f"{path}: not a privaudit transcript ({reason})") from None

    def _plain(self) -> dict[str, Any]:
        """The transcript as what `torch.load(weights_only=True)` reads: dicts, lists, strings,
        numbers and tensors."""
        public = self.public
        return {
            "format": TRANSCRIPT_FORMAT,
            "threat_model": self.threat_model,
            "observer": self.observer,
            "messages": [{"round": m.round, "sender": m.sender, "receiver": m.receiver, "kind": str(m.kind),
                          "payload": m.payload} for m in self.messages],
            "disclosures": [{"round": d.round, "agent": d.agent, "name": d.name, "value": d.value}
                            for d in self.disclosures],
            "public": {"defense": public.defense, "topology": public.topology, "W": torch.from_numpy(public.W.copy()),
                       "model": public.model, "in_shape": list(public.in_shape), "num_classes": public.num_classes,
                       "initial_model": public.initial_model, "hyper": dict(public.hyper), "agents": public.agents},
        }

    @staticmethod
    def _from_plain(plain: dict[str, Any]) -> Transcript:
        """The inverse of `_plain`."""
        public = dict(plain["public"])
        public["W"] = public["W"].numpy()
        public["in_shape"] = tuple(public["in_shape"])
        return Transcript(
            threat_model=plain["threat_model"],
            observer=plain["observer"],
            messages=[Message(m["round"], m["sender"], m["receiver"], Kind(m["kind"]), m["payload"])
                      for m in plain["messages"]],
            disclosures=[Disclosure(d["round"], d["agent"], d["name"], d["value"]) for d in plain["disclosures"]],
            public=PublicKnowledge(**public),
        )


@dataclass(frozen=True)
class Delivery:
    """What the wire delivered in place of what was sent by `Wire.broadcast_each` or
    `Wire.send_each`: `crafted[a, i]` is m_{a→i}, the payload liar a sent to agent i instead of
    the protocol's (its state x_a, or its message on link a → i)."""

    kind: Kind
    crafted: dict[tuple[int, int], Tensor]
    stacked: bool = False
    """Whether `crafted` is keyed by one network's agents with a payload row per world of an
    audit's copies of it (`Tap.lie_each`), rather than by the agents of the wire's topology."""

    def received(self, sent: Tensor, links: Sequence[tuple[int, int]]) -> Tensor:
        """The payloads `send_each` delivered: `sent[r]` over `links[r]`, the crafted one in its place
        where a liar lied on that link."""
        delivered = sent.clone()
        for r, link in enumerate(links):
            if link in self.crafted:
                delivered[r] = self.crafted[link]
        return delivered

    def by_link(self, topology: Topology) -> dict[tuple[int, int], Tensor]:
        """`crafted` keyed by the links of the wire's `topology`: as it is on one network; stacked,
        each world's payload row on that world's copy of the link."""
        if not self.stacked:
            return self.crafted
        n = topology.network.n
        return {(w * n + liar, w * n + receiver): payload[w]
                for (liar, receiver), payload in self.crafted.items() for w in range(topology.copies)}

    def mix(self, mixed: Tensor, sent: Tensor, topology: Topology) -> Tensor:
        """W x corrected to what each agent received: (W x)_i + Σ_a w_ia (m_{a→i} − x_a), where
        `mixed` is W x of the `sent` states x; stacked, the same in every world at once."""
        received = mixed.clone()
        network = topology.network if self.stacked else topology
        weights = network.mixing(mixed.dtype, mixed.device)
        offsets = (torch.arange(topology.copies, device=mixed.device) * network.n if self.stacked
                   else torch.zeros(1, dtype=torch.long, device=mixed.device))
        for (liar, receiver), payload in self.crafted.items():
            rows = offsets + receiver
            received[rows] += weights[receiver, liar] * (payload.to(mixed.dtype).reshape(received[rows].shape)
                                                         - sent[offsets + liar])
        return received


class Wire:
    """The network of one run: checks every transmission against the topology, counts it, and lets
    the taps record it. Defenses keep their own copies of the states they send; what the wire
    delivers differs from them only where a `Malicious` tap lies, and `broadcast_each` or `send_each`
    then returns the difference (`Delivery`). `delivers` says whether the run's defense mixes that
    delivery: a liar on a wire whose defense does not is refused (its messages would reach nobody)."""

    def __init__(self, topology: Topology, taps: Iterable[Tap] = (), *, delivers: bool = False) -> None:
        self.topology = topology
        self.taps = list(taps)
        for tap in self.taps:
            tap.check(topology)
        self._liar = _one_liar(self.taps, topology, delivers)
        self.counts: Counter[Kind] = Counter()
        self._checked: list[tuple[int, int]] | None = None
        """The last link list `send_each` checked (a defense sends over the same list every round;
        comparing it is far cheaper than checking it)."""

    def send(self, round: int, sender: int, receiver: int, kind: Kind, payload: Tensor) -> None:
        """Transmit `payload` from `sender` to its neighbour `receiver`."""
        if not self.topology.has_edge(sender, receiver):
            raise ValueError(f"agent {sender} sent '{kind}' to {receiver}, which is not its neighbour")
        self._offer(Kind(kind), round, sender, receiver, payload, copies=1)

    def broadcast(self, round: int, sender: int, kind: Kind, payload: Tensor) -> None:
        """Transmit the same `payload` from `sender` to every neighbour (one draw, many links)."""
        self._offer(Kind(kind), round, sender, None, payload, copies=self.topology.degree(sender))

    def broadcast_each(self, round: int, kind: Kind, payloads: Tensor) -> Delivery | None:
        """Every agent i broadcasts `payloads[i]` to its neighbours: the same messages as n calls of
        `broadcast`, offered to each tap at once (an audit's thousands of worlds send hundreds of
        thousands of messages a round; `Tap.hear_each`). None when every message went out as sent;
        the `Delivery` of the crafted ones when a liar replaced some (`Defense.gossip` mixes it)."""
        kind = Kind(kind)
        if len(payloads) != self.topology.n:
            raise ValueError(f"broadcast_each needs one payload per agent ({self.topology.n}), got {len(payloads)}")
        self.counts[kind] += self._degree_total
        if self._liar is None or kind not in self._liar.speaker().speaks:
            for tap in self.taps:
                tap.hear_each(round, kind, payloads, self.topology)
            return None
        return self._deliver_lies(round, kind, payloads)

    def _deliver_lies(self, round: int, kind: Kind, payloads: Tensor) -> Delivery:
        """`broadcast_each` with a liar on the wire. Rushing: every tap hears the honest agents'
        broadcasts first; then the malicious tap records, as the liar's own value "protocol
        <kind>", what the protocol would have it send, and each liar sends its neighbours, one link
        at a time, what that tap crafts from its record (the honest payload where it crafts none)."""
        if self._liar.stacked:
            return self._liar.lie_each(round, kind, payloads, self.topology)
        liar = self._liar
        for sender in range(self.topology.n):
            if not liar.lies(kind, sender):
                self._record(kind, round, sender, None, payloads[sender])
        crafted: dict[tuple[int, int], Tensor] = {}
        for sender in sorted(liar.liars):
            if liar.wants_round(round):
                liar.record_disclosure(Disclosure(round, sender, f"protocol {kind}",
                                                  payloads[sender].detach().to("cpu", copy=True)))
            receivers = self.topology.neighbours(sender)
            lies = liar.craft(round, kind, sender, receivers)
            if not lies:
                self._record(kind, round, sender, None, payloads[sender])
                continue
            for receiver in receivers:
                payload = lies.get(receiver, payloads[sender]).to(payloads.dtype).to(payloads.device)
                self._record(kind, round, sender, receiver, payload)
                if receiver in lies:
                    crafted[sender, receiver] = payload
        return Delivery(kind, crafted)

    def send_each(self, round: int, kind: Kind, links: Sequence[tuple[int, int]], payloads: Tensor) -> Delivery | None:
        """`payloads[r]` sent over the directed link `links[r]` for every r: the same messages as
        calls of `send`, offered to each tap at once (`Tap.hear_sends`). None when every message went
        out as sent; the `Delivery` of the crafted ones when a liar replaced some (a defense reads
        what each link delivered with `Delivery.received`)."""
        kind = Kind(kind)
        if len(links) != len(payloads):
            raise ValueError(f"send_each needs one payload per link ({len(links)}), got {len(payloads)}")
        if links != self._checked:
            off = [(i, j) for i, j in links if (min(i, j), max(i, j)) not in self._edges]
            if off:
                raise ValueError(f"agent {off[0][0]} sent '{kind}' to {off[0][1]}, which is not its neighbour")
            self._checked = list(links)
        self.counts[kind] += len(links)
        if self._liar is not None and self._liar.stacked and any(
                self._liar.speaker().lies(kind, sender % self.topology.network_size) for sender, _ in links):
            return self._liar.lie_sends(round, kind, links, payloads, self.topology)
        if self._liar is None or not any(self._liar.speaker().lies(kind, sender) for sender, _ in links):
            for tap in self.taps:
                tap.hear_sends(round, kind, links, payloads, self.topology)
            return None
        return self._deliver_sent_lies(round, kind, links, payloads)

    def _deliver_sent_lies(self, round: int, kind: Kind, links: Sequence[tuple[int, int]],
                           payloads: Tensor) -> Delivery:
        """`send_each` with a liar on the wire, rushing as `_deliver_lies`: every tap hears the honest
        agents' messages first; then the malicious tap records, as the liar's own value "protocol
        <kind> to <j>", what the protocol would have it send on link → j, and each liar sends, link by
        link, what that tap crafts from its record (the protocol's message where it crafts none)."""
        liar = self._liar.speaker()
        mine: dict[int, list[int]] = {}
        for r, (sender, receiver) in enumerate(links):
            if liar.lies(kind, sender):
                mine.setdefault(sender, []).append(r)
            else:
                self._record(kind, round, sender, receiver, payloads[r])
        crafted: dict[tuple[int, int], Tensor] = {}
        for sender in sorted(mine):
            if liar.wants_round(round):
                for r in mine[sender]:
                    liar.record_disclosure(Disclosure(round, sender, f"protocol {kind} to {links[r][1]}",
                                                      payloads[r].detach().to("cpu", copy=True)))
            lies = liar.craft(round, kind, sender, [links[r][1] for r in mine[sender]])
            for r in mine[sender]:
                receiver = links[r][1]
                payload = lies.get(receiver, payloads[r]).to(payloads.dtype).to(payloads.device)
                self._record(kind, round, sender, receiver, payload)
                if receiver in lies:
                    crafted[sender, receiver] = payload
        return Delivery(kind, crafted)

    def observes_anyone(self) -> bool:
        """Whether some tap may record an agent's private values (a defense can skip disclosing then)."""
        return any(tap.observes_anyone() for tap in self.taps)

    @functools.cached_property
    def _edges(self) -> frozenset[tuple[int, int]]:
        return frozenset(self.topology.edges)

    def disclose(self, round: int, agent: int, name: str, value: Tensor) -> None:
        """Make a private value of `agent` known to the taps that observe as that agent."""
        for tap in self.taps:
            if tap.wants_disclosure(round, agent, name):
                tap.record_disclosure(Disclosure(round, agent, name, value.detach().to("cpu", copy=True)))

    def disclose_each(self, round: int, name: str,
                      values: Sequence[Tensor] | Callable[[], Sequence[Tensor]]) -> None:
        """Every agent i's private value `values[i]` (or `values()[i]`), as n calls of `disclose`; a
        callable is called at most once, and only when some tap observes one of them (a
        disclosure can cost work no attacker needs)."""
        once = functools.cache(values) if callable(values) else lambda: values
        for tap in self.taps:
            tap.observe_each(round, name, once, self.topology.n)

    @functools.cached_property
    def _degree_total(self) -> int:
        network = self.topology.network
        return sum(network.degree(i) for i in range(network.n)) * self.topology.copies

    def _offer(self, kind: Kind, round: int, sender: int, receiver: int | None, payload: Tensor, copies: int) -> None:
        if self._liar is not None and self._liar.speaker().lies(kind, sender % self.topology.network_size):
            raise PrivauditError(f"agent {sender} sends '{kind}' one message at a time: a liar's messages are "
                                 "replaced only where the defense sends with broadcast_each or send_each")
        self.counts[kind] += copies
        self._record(kind, round, sender, receiver, payload)

    def _record(self, kind: Kind, round: int, sender: int, receiver: int | None, payload: Tensor) -> None:
        """Offer one message to the taps that hear it (copied once, only if one does)."""
        listeners = [tap for tap in self.taps if tap.wants(round, sender, receiver, kind, self.topology)]
        if not listeners:
            return
        message = Message(round, sender, receiver, kind, payload.detach().to("cpu", copy=True))
        for tap in listeners:
            tap.record(message)


def _one_liar(taps: Sequence[Tap], topology: Topology, delivers: bool) -> Tap | None:
    """The wire's malicious tap, if any: at most one, only when the defense mixes what the wire
    delivers; on an audit's copies of a network, a stacked tap (each world's liar crafting from
    its own world's messages) and the wire's only tap (`Tap.lie_each` offers the lies to no other)."""
    liars = [tap for tap in taps if tap.speaker() is not None]
    if not liars:
        return None
    if len(liars) > 1:
        raise PrivauditError(f"{len(liars)} malicious taps on one wire: put every lying agent in one")
    if topology.copies != 1 and not liars[0].stacked:
        raise PrivauditError("a malicious tap lies on an audit's copies of a network only stacked over the worlds "
                             "(privaudit.worlds.Replicated)")
    if liars[0].stacked and len(taps) != 1:
        raise PrivauditError("a malicious tap stacked over an audit's worlds must be the wire's only tap: it offers "
                             "its worlds' messages to no other")
    if not delivers:
        raise PrivauditError("a malicious tap's messages would reach nobody: this defense mixes its own copy of the "
                             "states, not what the wire delivers (only defenses that declare `delivers = True` do)")
    return liars[0]
