"""Many independent runs of one set-up as one simulation: the worlds of an audit.

An empirical privacy bound is only as tight as the number of runs behind it (tens of thousands per
side for a rigorous ε lower bound near the truth), and one run of a small model is mostly Python
overhead. A decentralized algorithm couples agents only along the edges of its graph, and every
defense already computes all of its agents at once, so `copies` copies of the network side by side
(`Topology.replicate`: W block-diagonal, no edge between copies) are `copies` independent runs:
each agent draws its own batches and noise from one generator, and no message crosses between
copies. Agent w·N + i is agent i of world w; every world holds the same data as the set-up it
copies. The defense's code runs unchanged, so an audit measures the algorithm itself, not a
re-implementation of it.
"""

from __future__ import annotations

import dataclasses

from privaudit.sampling import LocalData
from privaudit.setup import Setup
from privaudit.topology import Topology
from privaudit.wire import Tap


def replicate(setup: Setup, copies: int) -> Setup:
    """`copies` worlds of `setup` as one set-up (its generator and seed kept: the caller seeds it)."""
    local = setup.local
    shards = [local.index[i, : int(local.sizes[i])].numpy() for i in range(local.n_agents)] * copies
    return dataclasses.replace(
        setup,
        topology=setup.topology.replicate(copies),
        local=LocalData(local.x, local.y, shards),
        rate_sizes=None if setup.rate_sizes is None else setup.rate_sizes.repeat(copies),
    )


def world_agents(agent: int, network_size: int, copies: int) -> list[int]:
    """Agent `agent` of every world, in world order."""
    return [world * network_size + agent for world in range(copies)]


class Replicated(Tap):
    """One threat model in every world: `tap` (built for one network) hears in world w what it
    would hear in its own network, with agent ids shifted by w·N."""

    def __init__(self, tap: Tap, network: Topology) -> None:
        super().__init__()
        self.base, self.network, self.size = tap, network, network.n
        self.rounds, self.kinds = tap.rounds, tap.kinds
        self.threat_model = tap.threat_model
        self.observer = tap.observer

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        size = self.size
        return self.base.hears(sender % size, None if receiver is None else receiver % size, self.network)

    def wants_disclosure(self, round: int, agent: int, name: str) -> bool:
        return self.base.wants_disclosure(round, agent % self.size, name)

    def check(self, topology: Topology) -> None:
        if topology.network_size != self.network.n:
            raise ValueError(f"a tap of a {self.network.n}-agent network cannot listen to copies of a "
                             f"{topology.network_size}-agent one")
        self.base.check(self.network)
