"""Communication graphs and gossip mixing matrices for N agents.

An eavesdropper's view of decentralized learning is shaped by who talks to whom (the graph) and
how much of each neighbour's model an agent averages in (the mixing matrix W). Attacks and
defenses are compared across topologies, so every topology here is built the same way: nodes are
the integers 0..n-1, W is symmetric, doubly stochastic and nonnegative, and it puts weight only
on edges and the diagonal. Under those conditions gossip converges to the exact average, so any
difference between runs comes from the topology itself, not from a biased or diverging average.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import networkx as nx
import numpy as np
import torch
from torch import Tensor

TOPOLOGIES: tuple[str, ...] = ("ring", "line", "star", "complete", "bipartite", "torus", "erdos_renyi")
MIXING_RULES: tuple[str, ...] = ("metropolis", "uniform", "lazy")

# Below these sizes the named graph either does not exist or collapses into another topology
# (a 2-cycle is a single edge; a torus side shorter than 3 gives a multigraph).
_MIN_AGENTS: dict[str, int] = {
    "ring": 3,
    "line": 2,
    "star": 2,
    "complete": 2,
    "bipartite": 2,
    "torus": 9,
    "erdos_renyi": 2,
}
_ER_MAX_TRIES = 100


def _unknown(kind: str, name: str, choices: tuple[str, ...]) -> ValueError:
    return ValueError(f"unknown {kind} '{name}' (choose from {', '.join(choices)})")


def torus_shape(n: int) -> tuple[int, int]:
    """Return the most square (rows, cols) with rows * cols == n and 3 <= rows <= cols.

    The most square grid has the smallest diameter for its size, so it is the torus that mixes
    fastest; sides below 3 are refused because they would wrap an edge onto itself.
    """
    for rows in range(math.isqrt(n), 2, -1):
        if n % rows == 0:
            return rows, n // rows
    raise ValueError(f"topology 'torus' needs n = rows * cols with rows, cols >= 3, got {n}")


def _erdos_renyi(n: int, edge_prob: float, seed: int) -> nx.Graph:
    """Draw G(n, edge_prob) until it is connected, since gossip on a split graph never agrees.

    One seeded numpy Generator feeds every draw, so a seed fixes the whole sequence of retries
    and hence the graph that is returned.
    """
    if not 0.0 < edge_prob <= 1.0:
        raise ValueError(f"erdos_renyi edge_prob must be in (0, 1], got {edge_prob}")
    rng = np.random.default_rng(seed)
    for _ in range(_ER_MAX_TRIES):
        graph = nx.gnp_random_graph(n, edge_prob, seed=rng)
        if nx.is_connected(graph):
            return graph
    raise ValueError(
        f"erdos_renyi drew no connected G({n}, {edge_prob}) in {_ER_MAX_TRIES} tries; "
        f"raise edge_prob (connectivity needs roughly ln(n)/n = {math.log(n) / n:.3f})"
    )


def build_graph(name: str, n: int, *, seed: int = 0, edge_prob: float = 0.5) -> nx.Graph:
    """Build the named communication graph on nodes 0..n-1.

    Integer labels let agent i be row i of W and index i of any per-agent array without a lookup
    table. `seed` and `edge_prob` only matter for `erdos_renyi`.
    """
    if name not in TOPOLOGIES:
        raise _unknown("topology", name, TOPOLOGIES)
    if n < _MIN_AGENTS[name]:
        raise ValueError(f"topology '{name}' needs at least {_MIN_AGENTS[name]} agents, got {n}")
    if name == "ring":
        return nx.cycle_graph(n)
    if name == "line":
        return nx.path_graph(n)
    if name == "star":
        return nx.star_graph(n - 1)
    if name == "complete":
        return nx.complete_graph(n)
    if name == "bipartite":
        return nx.complete_bipartite_graph((n + 1) // 2, n // 2)
    if name == "torus":
        rows, cols = torus_shape(n)
        grid = nx.grid_2d_graph(rows, cols, periodic=True)
        return nx.convert_node_labels_to_integers(grid, ordering="sorted")
    return _erdos_renyi(n, edge_prob, seed)


def _adjacency(graph: nx.Graph) -> np.ndarray:
    """Adjacency in node order 0..n-1; other labels or self-loops would misplace or double weight."""
    n = graph.number_of_nodes()
    if set(graph.nodes) != set(range(n)):
        raise ValueError("graph nodes must be the integers 0..n-1")
    if nx.number_of_selfloops(graph):
        raise ValueError("graph must not have self-loops; W's diagonal is set by the mixing rule")
    return nx.to_numpy_array(graph, nodelist=range(n), dtype=np.float64, weight=None)


def mixing_matrix(graph: nx.Graph, rule: str = "metropolis") -> np.ndarray:
    """Return the (n, n) float64 gossip matrix of `graph` under `rule`.

    - `metropolis`: w_ij = 1 / (1 + max(d_i, d_j)) on edges. It needs only the degrees of the two
      endpoints, so agents can compute it locally, and it is symmetric on any graph.
    - `uniform`: every edge gets 1 / (1 + d_max). On regular graphs this is plain neighbour
      averaging; on irregular ones it stays symmetric (hence doubly stochastic), which averaging
      over each agent's own degree would not.
    - `lazy`: (I + W_metropolis) / 2. Its eigenvalues lie in [0, 1], so gossip never oscillates.

    In every rule w_ii = 1 - sum_j w_ij, which keeps rows summing to 1.
    """
    if rule not in MIXING_RULES:
        raise _unknown("mixing rule", rule, MIXING_RULES)
    adj = _adjacency(graph)
    degree = adj.sum(axis=1)
    if rule == "uniform":
        W = adj / (1.0 + degree.max(initial=0.0))
    else:
        W = adj / (1.0 + np.maximum.outer(degree, degree))
    np.fill_diagonal(W, 1.0 - W.sum(axis=1))
    if rule == "lazy":
        W = (np.eye(len(W)) + W) / 2.0
    check_mixing(W, graph)
    return W


def check_mixing(W: np.ndarray, graph: nx.Graph, atol: float = 1e-10) -> None:
    """Raise ValueError naming the first property W lacks as a gossip matrix for `graph`.

    Symmetry and double stochasticity make gossip converge to the exact average; nonnegativity
    makes each step a convex combination; support on edges + diagonal means agents only use
    messages they actually receive, which is what the eavesdropper model assumes.
    """
    adj = _adjacency(graph)
    n = len(adj)
    if W.shape != (n, n):
        raise ValueError(f"mixing matrix has shape {W.shape}, expected ({n}, {n})")
    if not np.isfinite(W).all():
        raise ValueError("mixing matrix has non-finite entries")
    if not np.allclose(W, W.T, rtol=0.0, atol=atol):
        raise ValueError("mixing matrix is not symmetric")
    # W is symmetric by now, so its column sums are its row sums: one check covers both.
    if not np.allclose(W.sum(axis=1), 1.0, rtol=0.0, atol=atol):
        raise ValueError("mixing matrix is not doubly stochastic: row/column sums are not 1")
    if (W < -atol).any():
        i, j = np.argwhere(W < -atol)[0]
        raise ValueError(f"mixing matrix has a negative entry at ({i}, {j}): {W[i, j]}")
    off_graph = (adj == 0) & ~np.eye(n, dtype=bool) & (np.abs(W) > atol)
    if off_graph.any():
        i, j = np.argwhere(off_graph)[0]
        raise ValueError(f"mixing matrix puts weight on a non-edge ({i}, {j}): {W[i, j]}")


def spectral_gap(W: np.ndarray) -> float:
    """Return 1 - (second largest eigenvalue modulus) of a symmetric W.

    The gap sets how fast gossip forgets where a value came from: after t rounds the distance to
    the average shrinks like (1 - gap)^t, so a small gap leaves more per-agent signal to attack.
    """
    if W.ndim != 2 or W.shape[0] != W.shape[1] or W.shape[0] < 2:
        raise ValueError(f"spectral gap needs a square matrix of size >= 2, got shape {W.shape}")
    if not np.allclose(W, W.T):
        raise ValueError("spectral gap needs a symmetric matrix")
    moduli = np.sort(np.abs(np.linalg.eigvalsh(W)))
    return float(1.0 - moduli[-2])


@dataclass(frozen=True, eq=False)
class Topology:
    """A connected graph with its mixing matrix, validated once so users can rely on both.

    The graph is stored frozen and W read-only, so neighbours, edges and W cannot drift apart
    after construction. Equality is identity: comparing graphs and arrays field by field is
    neither cheap nor well defined.

    Agents are 0..n−1 and `network_size` is n; `Copies` (made by `replicate`) holds several
    disjoint copies of one network side by side, and defenses that mix with `mix` and look up
    links with `has_edge` / `weights` run on either without building its (large) graph or W.
    """

    name: str
    rule: str
    graph: nx.Graph
    W: np.ndarray

    copies: ClassVar[int] = 1
    """Disjoint copies of `network` simulated side by side (1: this network alone)."""

    def __post_init__(self) -> None:
        if self.graph.number_of_nodes() == 0 or not nx.is_connected(self.graph):
            raise ValueError(f"topology '{self.name}' is not connected")
        W = np.array(self.W, dtype=np.float64)
        check_mixing(W, self.graph)
        W.setflags(write=False)
        object.__setattr__(self, "graph", nx.freeze(nx.Graph(self.graph)))
        object.__setattr__(self, "W", W)

    @classmethod
    def build(
        cls,
        name: str,
        n: int,
        rule: str = "metropolis",
        *,
        seed: int = 0,
        edge_prob: float = 0.5,
    ) -> Topology:
        """Build the named graph and its mixing matrix in one step, refusing disconnected graphs."""
        graph = build_graph(name, n, seed=seed, edge_prob=edge_prob)
        return cls(name=name, rule=rule, graph=graph, W=mixing_matrix(graph, rule))

    def replicate(self, copies: int) -> Topology:
        """`copies` disjoint copies of this network (`Copies`); this network itself when `copies` is 1."""
        if self.copies != 1 or copies < 1:
            raise ValueError(f"replicate takes one network and copies >= 1, got {self.copies} and {copies}")
        return self if copies == 1 else Copies(self, copies)

    @property
    def network(self) -> Topology:
        """One network (this one; a `Copies` holds several of it)."""
        return self

    @functools.cached_property
    def n(self) -> int:
        """Number of agents simulated (every copy's); cached: the graph is frozen, and every message
        on the wire asks."""
        return self.graph.number_of_nodes()

    @property
    def network_size(self) -> int:
        """N: the number of agents of one network."""
        return self.n // self.copies

    @functools.cached_property
    def _degrees(self) -> list[int]:
        return [int(self.graph.degree[i]) for i in range(self.graph.number_of_nodes())]

    def neighbours(self, i: int) -> list[int]:
        """Agents that exchange messages with agent i, sorted, without i itself."""
        return sorted(self.graph.neighbors(i))

    def degree(self, i: int) -> int:
        """Number of neighbours of agent i."""
        return self._degrees[i]

    def has_edge(self, i: int, j: int) -> bool:
        """Whether agents i and j are linked."""
        return self.graph.has_edge(i, j)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """Undirected edges as sorted (i, j) pairs with i < j, so each link appears once."""
        return sorted((min(u, v), max(u, v)) for u, v in self.graph.edges)

    @property
    def spectral_gap(self) -> float:
        """Spectral gap of W (see the module-level `spectral_gap`)."""
        return spectral_gap(self.network.W)

    def mixing(self, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Tensor:
        """One network's W as a tensor (cached per dtype and device: defenses mix every round)."""
        return _as_tensor(self.network, dtype, torch.device(device))

    def mix(self, x: Tensor) -> Tensor:
        """W x for the agents' stacked values x [n, ...] (gossip: Σ_j w_ij x_j for every i)."""
        return torch.tensordot(self.mixing(x.dtype, x.device), x, dims=1)

    def weights(self, rows: Tensor, cols: Tensor) -> Tensor:
        """The entries w_{rows[k], cols[k]} of W, float32, on the indices' device."""
        return self.mixing(device=rows.device)[rows, cols]


@functools.lru_cache(maxsize=64)
def _as_tensor(network: Topology, dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.tensor(network.W, dtype=dtype, device=device)


class Copies(Topology):
    """`copies` disjoint copies of one connected network side by side: agent w·N + i is agent i of
    copy w. Nothing crosses between copies, so a run on it is that many independent runs of the
    network in one tensor program (an audit's many worlds). `n` counts every simulated agent;
    `network_size` is N, the number of agents of one network, which the papers' formulas mean by
    N. Mixing is the network's W applied in every copy; the graph and the block-diagonal W of
    all copies are built only when asked for (their size grows as the square of the worlds')."""

    def __init__(self, network: Topology, copies: int) -> None:
        object.__setattr__(self, "_network", network)
        object.__setattr__(self, "_copies", copies)
        object.__setattr__(self, "name", f"{copies} × {network.name}")
        object.__setattr__(self, "rule", network.rule)

    def __repr__(self) -> str:
        return f"Copies({self.network!r}, copies={self.copies})"

    @property
    def network(self) -> Topology:
        return self._network

    @property
    def copies(self) -> int:  # type: ignore[override]
        return self._copies

    @functools.cached_property
    def graph(self) -> nx.Graph:  # type: ignore[override]
        return nx.freeze(nx.disjoint_union_all([self.network.graph] * self.copies))

    @functools.cached_property
    def W(self) -> np.ndarray:  # type: ignore[override]
        W = np.kron(np.eye(self.copies), self.network.W)
        W.setflags(write=False)
        return W

    @functools.cached_property
    def n(self) -> int:
        return self.network.n * self.copies

    def neighbours(self, i: int) -> list[int]:
        shift = i - i % self.network.n
        return [shift + j for j in self.network.neighbours(i % self.network.n)]

    def degree(self, i: int) -> int:
        return self.network.degree(i % self.network.n)

    def has_edge(self, i: int, j: int) -> bool:
        size = self.network.n
        return i // size == j // size and self.network.has_edge(i % size, j % size)

    @property
    def edges(self) -> list[tuple[int, int]]:
        size = self.network.n
        return [(w * size + i, w * size + j) for w in range(self.copies) for i, j in self.network.edges]

    def mix(self, x: Tensor) -> Tensor:
        size = self.network.n
        blocks = x.reshape(self.copies, size, *x.shape[1:])
        return torch.einsum("ij,wj...->wi...", self.mixing(x.dtype, x.device), blocks).reshape(x.shape)

    def weights(self, rows: Tensor, cols: Tensor) -> Tensor:
        size = self.network.n
        same = rows // size == cols // size
        return torch.where(same, self.mixing(device=rows.device)[rows % size, cols % size], 0.0)
