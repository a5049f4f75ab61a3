"""Threat models by name: the tap an `[[attack]]` table's `threat` stands for.

* `global_listener` hears every message on every link.
* `eavesdropper` hears chosen links, undirected (`links`: both directions) or directed
  (`directed_links`: i → j only, what i sends to j and i's broadcasts), or both; when neither is
  given, every link of the victim (the strongest eavesdropper that still hears no other agent's
  private exchanges).
* `curious_neighbour` is one agent, honest but curious (default: the victim's lowest-numbered
  neighbour); it hears what reaches it and knows its own private values, which the extractors that
  declare them in `Extractor.knows` read (no other threat model can feed those).
* `coalition` is one or several such agents pooling what they hear (`agents`), attacking every
  other agent at once (El Mrini et al. 2024; `privaudit/attacks/coalition/knowledge.py`, and `privaudit/attacks/coalition/record_fit.py`
  where every agent trains on one fixed record).

Taps record only the rounds and message kinds an extractor reads, so a 1000-round run keeps a
handful of messages.
"""

from __future__ import annotations

from collections.abc import Iterable

from privaudit.topology import Topology
from privaudit.wire import Coalition, CuriousNeighbour, Eavesdropper, GlobalListener, Kind, Tap

THREATS = ("global_listener", "eavesdropper", "curious_neighbour", "coalition")


def build_tap(threat: str, victim: int, topology: Topology, *, rounds: Iterable[int] | None = None,
              kinds: Iterable[Kind] | None = None, observer: int | None = None,
              links: Iterable[tuple[int, int]] | None = None, agents: Iterable[int] | None = None,
              directed_links: Iterable[tuple[int, int]] | None = None) -> Tap:
    """The tap of `threat` against `victim`; ValueError (one line) for agents or links the
    topology does not have. `directed_links` (i, j) are heard from i to j only."""
    if not 0 <= victim < topology.n:
        raise ValueError(f"victim {victim} is not an agent (0..{topology.n - 1})")
    if threat == "global_listener":
        tap: Tap = GlobalListener(rounds, kinds)
    elif threat == "eavesdropper":
        if links is None and directed_links is None:
            links = [(victim, j) for j in topology.neighbours(victim)]
        tap = Eavesdropper(links or (), rounds, kinds, directed=directed_links or ())
    elif threat == "curious_neighbour":
        agent = observer if observer is not None else min(topology.neighbours(victim))
        if agent == victim:
            raise ValueError(f"the curious neighbour must be another agent than the victim {victim}")
        tap = CuriousNeighbour(agent, rounds, kinds)
    elif threat == "coalition":
        tap = Coalition(agents if agents is not None else [victim], rounds, kinds)
    else:
        raise ValueError(f"unknown threat model '{threat}' (choose from {', '.join(THREATS)})")
    tap.check(topology)
    return tap
