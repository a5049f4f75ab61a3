"""Many independent runs of one set-up as one simulation: the worlds of an audit.

An empirical privacy bound is only as tight as the number of runs behind it (tens of thousands per
side for a rigorous ε lower bound near the truth), and one run of a small model is mostly Python
overhead. A decentralized algorithm couples agents only along the edges of its graph, and every
defense already computes all of its agents at once, so `copies` copies of the network side by side
(`Topology.replicate`: W block-diagonal, no edge between copies) are `copies` independent runs:
each agent draws its own batches and noise from one generator, and no message crosses between
copies. Agent w·N + i is agent i of world w; every world holds the same data as the set-up it
copies. The defense's code runs unchanged, so an audit measures the algorithm itself, not a
re-implementation of it; what makes thousands of worlds cheap is that nothing on the way is per
agent: defenses gossip with `Topology.mix` (the network's W in every copy), broadcast with
`Wire.broadcast_each`, and the attacker's `Replicated` tap keeps each message once, stacked over
the worlds, so the extractors read all worlds in one pass. On a CUDA device (`privaudit.devices`)
the same program runs there, the tap keeping its payloads on that device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from privaudit.setup import Setup
from privaudit.topology import Topology
from privaudit.wire import Delivery, Disclosure, Kind, Malicious, Message, Tap, Transcript


def replicate(setup: Setup, copies: int) -> Setup:
    """`copies` worlds of `setup` as one set-up (its generator and seed kept: the caller seeds it)."""
    return dataclasses.replace(
        setup,
        topology=setup.topology.replicate(copies),
        local=setup.local.repeat(copies),
        rate_sizes=None if setup.rate_sizes is None else setup.rate_sizes.repeat(copies),
    )


class Replicated(Tap):
    """One threat model in every world, read as one network: `tap` (built for one network) hears
    in world w what it would hear in its own network, and each message it hears is kept once, its
    payload stacked over the worlds ([copies, ...], world order) under the network's own agent
    ids. An extractor written for one network's payloads then reads every world in one pass where
    its arithmetic broadcasts over the leading axis (`one_world` gives each world's own transcript
    where it does not)."""

    def __init__(self, tap: Tap, network: Topology, copies: int) -> None:
        super().__init__()
        self.base, self.network, self.size, self.copies = tap, network, network.n, copies
        self.rounds, self.kinds = tap.rounds, tap.kinds
        self.threat_model = tap.threat_model
        self.observer = tap.observer
        self._pending: dict[tuple, dict[int, Tensor]] = {}
        self._links: tuple[Sequence[tuple[int, int]], dict[tuple[int, int], Tensor]] | None = None

    stacked = True

    def speaker(self) -> Malicious | None:
        return self.base.speaker()

    def lie_each(self, round: int, kind: Kind, payloads: Tensor, topology: Topology) -> Delivery:
        """Every agent i of every world broadcasts `payloads[w·N + i]`, and the liars of the
        malicious tap this one stacks speak in every world at once: as `Wire.broadcast_each` does on
        one network (rushing: the honest broadcasts are heard first, then each liar's protocol
        message is kept as its own value and its neighbours receive what the strategy crafts), the
        strategy reading this tap's record, one payload row per world, so each world's liar crafts
        from its own world's messages only. The `Delivery` is stacked: one row per world."""
        speaker = self.base.speaker()
        blocks = payloads.detach().reshape(self.copies, self.size, *payloads.shape[1:])
        hearing = self.wants_kind(round, kind)
        if hearing:
            for sender in range(self.size):
                if not speaker.lies(kind, sender) and self.base.hears(sender, None, self.network):
                    self.messages.append(Message(round, sender, None, kind, blocks[:, sender].clone()))
        crafted: dict[tuple[int, int], Tensor] = {}
        for liar in sorted(speaker.liars):
            if self.wants_round(round):
                self.disclosures.append(Disclosure(round, liar, f"protocol {kind}", blocks[:, liar].clone()))
            receivers = self.network.neighbours(liar)
            lies = speaker.craft(round, kind, liar, receivers, heard=self)
            for receiver in receivers if lies else []:
                payload = lies[receiver].to(payloads.dtype).reshape(blocks[:, liar].shape) if receiver in lies \
                    else blocks[:, liar]
                if hearing:
                    self.messages.append(Message(round, liar, receiver, kind, payload.clone()))
                if receiver in lies:
                    crafted[liar, receiver] = payload
            if not lies and hearing:
                self.messages.append(Message(round, liar, None, kind, blocks[:, liar].clone()))
        return Delivery(kind, crafted, stacked=True)

    def lie_sends(self, round: int, kind: Kind, links: Sequence[tuple[int, int]], payloads: Tensor,
                  topology: Topology) -> Delivery:
        """Every link `links[r]` of every world carries `payloads[r]`, and the liars of the malicious
        tap this one stacks speak on theirs in every world at once, as `Wire.send_each` does on one
        network: the honest messages are heard first, then each liar's protocol message on each of
        its links is kept as its own value ("protocol <kind> to <j>") and the link delivers what the
        strategy crafts from this tap's record, one payload row per world (the liar hears its own
        links, as every malicious agent does: `_heard_links` groups them). The `Delivery` is keyed
        by the wire's own links, world by world (what `Delivery.received` reads)."""
        speaker, sent = self.base.speaker(), payloads.detach()
        hearing = self.wants_kind(round, kind)
        spoken: dict[int, dict[int, Tensor]] = {}
        for (sender, receiver), rows in self._heard_links(links).items():
            if speaker.lies(kind, sender):
                spoken.setdefault(sender, {})[receiver] = rows
            elif hearing:
                self.messages.append(Message(round, sender, receiver, kind, sent[rows].clone()))
        crafted: dict[tuple[int, int], Tensor] = {}
        for liar, rows in sorted(spoken.items()):
            if self.wants_round(round):
                for receiver, world_rows in rows.items():
                    self.disclosures.append(Disclosure(round, liar, f"protocol {kind} to {receiver}",
                                                       sent[world_rows].clone()))
            lies = speaker.craft(round, kind, liar, sorted(rows), heard=self)
            for receiver, world_rows in rows.items():
                payload = (lies[receiver].to(sent.dtype).reshape(sent[world_rows].shape) if receiver in lies
                           else sent[world_rows])
                if hearing:
                    self.messages.append(Message(round, liar, receiver, kind, payload.clone()))
                if receiver in lies:
                    crafted.update({links[row]: payload[world] for world, row in enumerate(world_rows.tolist())})
        return Delivery(kind, crafted)

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        size = self.size
        return self.base.hears(sender % size, None if receiver is None else receiver % size, self.network)

    def wants_disclosure(self, round: int, agent: int, name: str) -> bool:
        return self.base.wants_disclosure(round, agent % self.size, name)

    def check(self, topology: Topology) -> None:
        if topology.network_size != self.network.n:
            raise ValueError(f"a tap of a {self.network.n}-agent network cannot listen to copies of a "
                             f"{topology.network_size}-agent one")
        if topology.copies != self.copies:
            raise ValueError(f"a tap of {self.copies} worlds cannot listen to {topology.copies}")
        self.base.check(self.network)

    def hear_each(self, round: int, kind: Kind, payloads: Tensor, topology: Topology) -> None:
        if not self.wants_kind(round, kind):
            return
        senders = [i for i in range(self.size) if self.base.hears(i, None, self.network)]
        if senders:
            blocks = payloads.detach().reshape(self.copies, self.size, *payloads.shape[1:])
            for sender in senders:
                self.messages.append(Message(round, sender, None, kind, blocks[:, sender].clone()))

    def hear_sends(self, round: int, kind: Kind, links: Sequence[tuple[int, int]], payloads: Tensor,
                   topology: Topology) -> None:
        if not self.wants_kind(round, kind):
            return
        heard = self._heard_links(links)
        if heard:
            stacked = payloads.detach()[torch.stack(list(heard.values()))]  # [links heard, copies, ...], a copy
            for (sender, receiver), rows in zip(heard, stacked):
                self.messages.append(Message(round, sender, receiver, kind, rows))

    def _heard_links(self, links: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Tensor]:
        """The network's links this tap hears among `links`, each with its rows in world order
        (kept for the last list seen: a defense sends over the same list every round)."""
        if self._links is not None and self._links[0] == links:
            return self._links[1]
        size, heard, rows = self.size, {}, {}
        for row, (sender, receiver) in enumerate(links):
            link = (sender % size, receiver % size)
            if link not in heard:
                heard[link] = self.base.hears(*link, self.network)
            if heard[link]:
                rows.setdefault(link, []).append((sender // size, row))
        found = {}
        for (sender, receiver), used in rows.items():
            if len(used) != self.copies:
                raise ValueError(f"link {sender} → {receiver} was used in {len(used)} of {self.copies} worlds")
            found[sender, receiver] = torch.tensor([row for _, row in sorted(used)])
        self._links = (list(links), found)
        return found

    def observes_anyone(self) -> bool:
        return self.base.observes_anyone()

    def observe_each(self, round: int, name: str, values: Callable[[], Sequence[Tensor]], agents: int) -> None:
        observed = [i for i in range(self.size) if self.base.wants_disclosure(round, i, name)]
        if observed:
            computed = values()
            for agent in observed:
                self._disclose(round, agent, name, [computed[w * self.size + agent] for w in range(self.copies)])

    def record(self, message: Message) -> None:
        """One world's message (a defense that sends agent by agent): kept until every world's has come."""
        key = (message.round, message.sender % self.size,
               None if message.receiver is None else message.receiver % self.size, message.kind)
        arrived = self._pending.setdefault(key, {})
        arrived[message.sender // self.size] = message.payload
        if len(arrived) == self.copies:
            del self._pending[key]
            self.messages.append(Message(*key[:2], key[2], key[3], torch.stack([arrived[w] for w in range(self.copies)])))

    def record_disclosure(self, disclosure: Disclosure) -> None:
        key = (disclosure.round, disclosure.agent % self.size, disclosure.name)
        arrived = self._pending.setdefault(key, {})
        arrived[disclosure.agent // self.size] = disclosure.value
        if len(arrived) == self.copies:
            del self._pending[key]
            self._disclose(*key, [arrived[w] for w in range(self.copies)])

    def _disclose(self, round: int, agent: int, name: str, values: list[Tensor]) -> None:
        """Stacked over the worlds; a value whose shape differs between worlds (a Poisson batch's
        rows) cannot be, and is left out (`one_world`'s transcripts lack it)."""
        if len({tuple(v.shape) for v in values}) > 1:
            return
        self.disclosures.append(Disclosure(round, agent, name, torch.stack([v.detach() for v in values])))

    def forget(self, before: int) -> None:
        super().forget(before)
        self._pending = {key: value for key, value in self._pending.items() if key[0] >= before}


def one_world(transcript: Transcript, world: int) -> Transcript:
    """World `world`'s own transcript from a `Replicated` tap's stacked one."""
    return dataclasses.replace(
        transcript,
        messages=[dataclasses.replace(m, payload=m.payload[world]) for m in transcript.messages],
        disclosures=[dataclasses.replace(d, value=d.value[world]) for d in transcript.disclosures],
    )
