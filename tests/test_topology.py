"""Graphs and mixing matrices: shapes of the named graphs, validity of W, and the error messages."""

import dataclasses
import math

import networkx as nx
import numpy as np
import pytest

from privaudit.topology import (
    MIXING_RULES,
    TOPOLOGIES,
    Topology,
    build_graph,
    check_mixing,
    mixing_matrix,
    spectral_gap,
    torus_shape,
)

# Several sizes per topology, odd ones included; erdos_renyi is covered by seed below.
SIZES = {
    "ring": (3, 5, 8),
    "line": (2, 7, 10),
    "star": (2, 5, 8),
    "complete": (2, 5, 8),
    "bipartite": (2, 5, 8),
    "torus": (9, 12, 15, 16),
    "erdos_renyi": (2, 7, 12),
}
ER_SEEDS = (0, 1, 2, 3, 4)
CASES = [(name, n, 0) for name in TOPOLOGIES for n in SIZES[name]]
CASES += [("erdos_renyi", 12, seed) for seed in ER_SEEDS[1:]]


def test_sizes_cover_every_topology():
    assert set(SIZES) == set(TOPOLOGIES)


@pytest.mark.parametrize(("name", "n", "seed"), CASES)
def test_graph_is_connected_on_nodes_0_to_n_minus_1(name, n, seed):
    graph = build_graph(name, n, seed=seed)
    assert sorted(graph.nodes) == list(range(n))
    assert nx.is_connected(graph)
    assert nx.number_of_selfloops(graph) == 0


@pytest.mark.parametrize("n", [3, 6, 9])
def test_ring_line_star_complete_have_their_shape(n):
    ring, line = build_graph("ring", n), build_graph("line", n)
    star, complete = build_graph("star", n), build_graph("complete", n)
    assert [d for _, d in ring.degree] == [2] * n
    assert ring.number_of_edges() == n
    assert line.number_of_edges() == n - 1
    assert line.degree[0] == line.degree[n - 1] == 1
    assert star.degree[0] == n - 1
    assert all(star.degree[i] == 1 for i in range(1, n))
    assert complete.number_of_edges() == n * (n - 1) // 2


@pytest.mark.parametrize(("n", "big", "small"), [(2, 1, 1), (5, 3, 2), (8, 4, 4)])
def test_bipartite_is_complete_with_ceil_floor_halves(n, big, small):
    graph = build_graph("bipartite", n)
    left, right = nx.bipartite.sets(graph)
    assert sorted([len(left), len(right)]) == [small, big]
    assert graph.number_of_edges() == big * small
    # The larger part holds the lowest labels, so node 0 links to exactly the last floor(n/2).
    assert sorted(graph.neighbors(0)) == list(range(big, n))


@pytest.mark.parametrize(
    ("n", "shape"), [(9, (3, 3)), (12, (3, 4)), (16, (4, 4)), (18, (3, 6)), (27, (3, 9)), (36, (6, 6))]
)
def test_torus_takes_most_square_factorisation(n, shape):
    assert torus_shape(n) == shape


def test_torus_12_is_a_3_by_4_periodic_grid():
    topo = Topology.build("torus", 12)
    assert all(topo.degree(i) == 4 for i in range(12))
    # Row-major labels on 3 rows x 4 columns: node 0 wraps to 3 in its row and to 8 in its column.
    assert topo.neighbours(0) == [1, 3, 4, 8]
    assert len(topo.edges) == 24
    assert topo.edges[:4] == [(0, 1), (0, 3), (0, 4), (0, 8)]


@pytest.mark.parametrize("n", [7, 10, 14, 8])
def test_torus_without_a_3x3_or_larger_factorisation_raises(n):
    with pytest.raises(ValueError, match="torus"):
        build_graph("torus", n)


def test_torus_error_names_the_factorisation_problem():
    with pytest.raises(ValueError, match=r"rows \* cols with rows, cols >= 3, got 10"):
        build_graph("torus", 10)


def test_erdos_renyi_is_reproducible_per_seed():
    first = build_graph("erdos_renyi", 15, seed=3)
    again = build_graph("erdos_renyi", 15, seed=3)
    assert sorted(first.edges) == sorted(again.edges)


def test_erdos_renyi_seeds_can_differ():
    edge_sets = {tuple(sorted(build_graph("erdos_renyi", 15, seed=s).edges)) for s in ER_SEEDS}
    assert len(edge_sets) > 1


def test_erdos_renyi_edge_prob_changes_density():
    sparse = build_graph("erdos_renyi", 30, edge_prob=0.2).number_of_edges()
    dense = build_graph("erdos_renyi", 30, edge_prob=0.9).number_of_edges()
    assert sparse < dense
    assert build_graph("erdos_renyi", 6, edge_prob=1.0).number_of_edges() == 15


def test_erdos_renyi_too_sparse_raises_clearly():
    with pytest.raises(ValueError, match=r"no connected G\(40, 0\.01\).*raise edge_prob"):
        build_graph("erdos_renyi", 40, edge_prob=0.01)


@pytest.mark.parametrize("edge_prob", [0.0, -0.1, 1.5])
def test_erdos_renyi_rejects_edge_prob_outside_unit_interval(edge_prob):
    with pytest.raises(ValueError, match="edge_prob must be in"):
        build_graph("erdos_renyi", 5, edge_prob=edge_prob)


@pytest.mark.parametrize("rule", MIXING_RULES)
@pytest.mark.parametrize(("name", "n", "seed"), CASES)
def test_mixing_matrix_is_symmetric_doubly_stochastic_on_graph(name, n, seed, rule):
    graph = build_graph(name, n, seed=seed)
    W = mixing_matrix(graph, rule)
    assert W.dtype == np.float64
    assert W.shape == (n, n)
    np.testing.assert_allclose(W, W.T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(W.sum(axis=1), np.ones(n), rtol=0, atol=1e-12)
    np.testing.assert_allclose(W.sum(axis=0), np.ones(n), rtol=0, atol=1e-12)
    assert (W >= 0).all()
    support = nx.to_numpy_array(graph, nodelist=range(n)) + np.eye(n)
    assert (W[support == 0] == 0).all()
    check_mixing(W, graph)


def test_metropolis_weights_on_a_star():
    # Centre degree 3, leaves degree 1: every edge gets 1 / (1 + 3).
    W = mixing_matrix(build_graph("star", 4), "metropolis")
    expected = np.array(
        [
            [0.25, 0.25, 0.25, 0.25],
            [0.25, 0.75, 0.0, 0.0],
            [0.25, 0.0, 0.75, 0.0],
            [0.25, 0.0, 0.0, 0.75],
        ]
    )
    np.testing.assert_allclose(W, expected, atol=1e-12)


def test_metropolis_on_complete_graph_averages_in_one_step():
    np.testing.assert_allclose(mixing_matrix(build_graph("complete", 5)), np.full((5, 5), 0.2), atol=1e-12)


def test_uniform_weights_on_a_line():
    # d_max = 2, so each edge gets 1/3 and the endpoints keep 2/3.
    W = mixing_matrix(build_graph("line", 3), "uniform")
    expected = np.array([[2, 1, 0], [1, 1, 1], [0, 1, 2]]) / 3
    np.testing.assert_allclose(W, expected, atol=1e-12)


def test_uniform_and_metropolis_differ_away_from_the_hub():
    # Degrees 1, 3, 1, 2, 1; edge (3, 4) does not touch the degree-3 hub.
    graph = nx.Graph([(0, 1), (1, 2), (1, 3), (3, 4)])
    metropolis, uniform = mixing_matrix(graph, "metropolis"), mixing_matrix(graph, "uniform")
    assert metropolis[3, 4] == pytest.approx(1 / 3)
    assert uniform[3, 4] == pytest.approx(1 / 4)
    assert metropolis[0, 1] == uniform[0, 1] == pytest.approx(1 / 4)
    assert uniform[4, 4] == pytest.approx(3 / 4)


def test_lazy_is_half_identity_plus_metropolis():
    graph = build_graph("erdos_renyi", 10, seed=2)
    expected = (np.eye(10) + mixing_matrix(graph, "metropolis")) / 2
    np.testing.assert_allclose(mixing_matrix(graph, "lazy"), expected, atol=1e-12)
    assert np.linalg.eigvalsh(mixing_matrix(graph, "lazy")).min() >= -1e-12


def test_mixing_matrix_rejects_non_integer_labels():
    with pytest.raises(ValueError, match="integers 0..n-1"):
        mixing_matrix(nx.path_graph(["a", "b", "c"]))


def test_mixing_matrix_rejects_self_loops():
    graph = nx.path_graph(3)
    graph.add_edge(1, 1)
    with pytest.raises(ValueError, match="self-loops"):
        mixing_matrix(graph)


def test_check_mixing_rejects_non_symmetric():
    graph = build_graph("ring", 5)
    W = mixing_matrix(graph)
    W[0, 1] += 0.1
    W[0, 0] -= 0.1  # rows still sum to 1: only symmetry is broken
    with pytest.raises(ValueError, match="not symmetric"):
        check_mixing(W, graph)


def test_check_mixing_rejects_non_stochastic():
    graph = build_graph("ring", 5)
    with pytest.raises(ValueError, match="not doubly stochastic"):
        check_mixing(0.9 * mixing_matrix(graph), graph)


def test_check_mixing_rejects_negative_entry():
    graph = build_graph("complete", 3)
    W = np.eye(3) + 2 * (np.full((3, 3), 1 / 3) - np.eye(3))  # symmetric, sums 1, diagonal -1/3
    with pytest.raises(ValueError, match=r"negative entry at \(0, 0\)"):
        check_mixing(W, graph)


def test_check_mixing_rejects_weight_off_the_graph():
    line = build_graph("line", 3)
    W = np.full((3, 3), 1 / 3)  # valid for the complete graph, but 0 and 2 are not linked
    with pytest.raises(ValueError, match=r"non-edge \(0, 2\)"):
        check_mixing(W, line)


def test_check_mixing_rejects_wrong_shape_and_nan():
    graph = build_graph("ring", 4)
    with pytest.raises(ValueError, match="shape"):
        check_mixing(np.eye(3), graph)
    W = mixing_matrix(graph)
    W[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        check_mixing(W, graph)


def test_check_mixing_tolerance_is_respected():
    graph = build_graph("ring", 4)
    W = mixing_matrix(graph) * (1 + 1e-6)
    check_mixing(W, graph, atol=1e-5)
    with pytest.raises(ValueError, match="not doubly stochastic"):
        check_mixing(W, graph)


@pytest.mark.parametrize("rule", MIXING_RULES)
@pytest.mark.parametrize(("name", "n", "seed"), CASES)
def test_spectral_gap_is_in_unit_interval_for_connected_graphs(name, n, seed, rule):
    gap = Topology.build(name, n, rule, seed=seed).spectral_gap
    assert 0 < gap <= 1 + 1e-12


def test_spectral_gap_is_zero_for_disconnected_graph():
    two_edges = nx.Graph([(0, 1), (2, 3)])
    assert spectral_gap(mixing_matrix(two_edges)) == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("rule", MIXING_RULES)
@pytest.mark.parametrize("n", [5, 8, 11])
def test_complete_mixes_faster_than_ring(rule, n):
    assert Topology.build("complete", n, rule).spectral_gap > Topology.build("ring", n, rule).spectral_gap


@pytest.mark.parametrize("n", [5, 8, 11])
def test_ring_spectral_gap_matches_closed_form(n):
    # Metropolis on a ring is 1/3 everywhere: eigenvalues 1/3 + 2/3 cos(2 pi k / n).
    eigenvalues = [1 / 3 + 2 / 3 * math.cos(2 * math.pi * k / n) for k in range(1, n)]
    expected = 1 - max(abs(e) for e in eigenvalues)
    assert Topology.build("ring", n).spectral_gap == pytest.approx(expected, abs=1e-12)
    assert Topology.build("complete", n).spectral_gap == pytest.approx(1.0, abs=1e-12)


def test_spectral_gap_rejects_non_symmetric_and_bad_shape():
    with pytest.raises(ValueError, match="symmetric"):
        spectral_gap(np.array([[0.5, 0.5], [0.2, 0.8]]))
    with pytest.raises(ValueError, match="square"):
        spectral_gap(np.ones((2, 3)))


@pytest.mark.parametrize("bad", ["rng", "Ring", ""])
def test_unknown_topology_message(bad):
    expected = f"unknown topology '{bad}' (choose from ring, line, star, complete, bipartite, torus, erdos_renyi)"
    with pytest.raises(ValueError) as excinfo:
        build_graph(bad, 5)
    assert str(excinfo.value) == expected
    with pytest.raises(ValueError) as excinfo:
        Topology.build(bad, 5)
    assert str(excinfo.value) == expected


def test_unknown_mixing_rule_message():
    expected = "unknown mixing rule 'x' (choose from metropolis, uniform, lazy)"
    with pytest.raises(ValueError) as excinfo:
        mixing_matrix(build_graph("ring", 5), "x")
    assert str(excinfo.value) == expected
    with pytest.raises(ValueError) as excinfo:
        Topology.build("ring", 5, "x")
    assert str(excinfo.value) == expected


@pytest.mark.parametrize(
    ("name", "n", "minimum"),
    [
        ("ring", 2, 3),
        ("line", 1, 2),
        ("star", 1, 2),
        ("complete", 1, 2),
        ("bipartite", 1, 2),
        ("torus", 8, 9),
        ("erdos_renyi", 1, 2),
        ("ring", 0, 3),
    ],
)
def test_too_few_agents_message(name, n, minimum):
    with pytest.raises(ValueError) as excinfo:
        build_graph(name, n)
    assert str(excinfo.value) == f"topology '{name}' needs at least {minimum} agents, got {n}"


def test_minimum_sizes_are_accepted():
    for name, n in [("ring", 3), ("line", 2), ("star", 2), ("complete", 2), ("bipartite", 2), ("torus", 9)]:
        assert build_graph(name, n).number_of_nodes() == n


def test_topology_accessors():
    topo = Topology.build("star", 5, "lazy")
    assert (topo.name, topo.rule, topo.n) == ("star", "lazy", 5)
    assert topo.neighbours(0) == [1, 2, 3, 4]
    assert topo.neighbours(3) == [0]
    assert topo.degree(0) == 4
    assert topo.degree(2) == 1
    assert topo.edges == [(0, 1), (0, 2), (0, 3), (0, 4)]
    assert topo.spectral_gap == pytest.approx(spectral_gap(mixing_matrix(topo.graph, "lazy")))


def test_topology_edges_are_ordered_pairs():
    topo = Topology.build("ring", 6)
    assert topo.edges == [(0, 1), (0, 5), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert topo.neighbours(0) == [1, 5]


def test_topology_is_immutable():
    topo = Topology.build("ring", 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        topo.rule = "uniform"
    with pytest.raises(ValueError):
        topo.W[0, 0] = 0.0
    with pytest.raises(nx.NetworkXError):
        topo.graph.add_edge(0, 2)


def test_topology_does_not_freeze_callers_graph():
    graph = build_graph("ring", 5)
    Topology(name="ring", rule="metropolis", graph=graph, W=mixing_matrix(graph))
    graph.add_edge(0, 2)
    assert graph.has_edge(0, 2)


def test_topology_refuses_disconnected_graph():
    two_edges = nx.Graph([(0, 1), (2, 3)])
    with pytest.raises(ValueError, match="not connected"):
        Topology(name="split", rule="metropolis", graph=two_edges, W=mixing_matrix(two_edges))


def test_topology_refuses_invalid_matrix():
    graph = build_graph("ring", 5)
    with pytest.raises(ValueError, match="not doubly stochastic"):
        Topology(name="ring", rule="metropolis", graph=graph, W=0.5 * mixing_matrix(graph))
