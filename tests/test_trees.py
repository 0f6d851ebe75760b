"""Tests of best-first token trees: tree tau, the builders, and brute-force optima."""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.specs.acceptance import rank_acceptance_geometric
from specsim.speculation.speedup import tree_candidates
from specsim.speculation.trees import Tree, best_first_tree, chain
from tests.oracles import best_tree_depth_limited, ddtree, depth_limited_tau_table


def best_first_tau_curve(a: object, max_nodes: int, max_depth: int | None = None) -> np.ndarray:
    """tau of the best-first tree of every size 0..max_nodes, as `recommend` sees it."""
    return tree_candidates(np.asarray(a, dtype=np.float64), max_nodes, (max_depth,)).tau

Path = tuple[int, ...]

RANK_VECTORS = {
    "geometric_0.8": (0.8, 0.16, 0.032),
    "geometric_0.5": (0.5, 0.25),
    "flat_unsorted": (0.2, 0.45, 0.3),
    "with_zero_rank": (0.6, 0.0, 0.3),
    "alpha_one": (1.0, 0.0),
    "alpha_zero": (0.0, 0.0, 0.0),
}


@cache
def all_trees(max_nodes: int, num_ranks: int, max_depth: int) -> tuple[frozenset[Path], ...]:
    """Every ancestor-closed set of rank paths with <= max_nodes nodes and depth <= max_depth
    in which a node's children are its top ranks (rank r only next to ranks 0..r-1)."""
    level: set[frozenset[Path]] = {frozenset()}
    found: list[frozenset[Path]] = [frozenset()]
    for _ in range(max_nodes):
        grown: set[frozenset[Path]] = set()
        for tree in level:
            for parent in [(), *tree]:
                if len(parent) >= max_depth:
                    continue
                for rank in range(num_ranks):
                    child = (*parent, rank)
                    elder = (*parent, rank - 1)
                    if child not in tree and (rank == 0 or elder in tree):
                        grown.add(tree | {child})
        found.extend(grown)
        level = grown
    return tuple(found)


def brute_tau(paths: frozenset[Path], a: tuple[float, ...]) -> float:
    """1 + sum over nodes of the product of a_rank along the root-to-node path."""
    return 1.0 + sum(math.prod(a[r] for r in path) for path in paths)


def brute_best_tau(a: tuple[float, ...], budget: int, max_depth: int) -> float:
    return max(
        brute_tau(t, a) for t in all_trees(budget, len(a), max_depth) if len(t) <= budget
    )


def ancestors_by_walking(tree: Tree, node: int) -> set[int]:
    """The node and all its ancestors, following parent links one by one."""
    found = set()
    while node >= 0:
        found.add(node)
        node = int(tree.parents[node])
    return found


def tree_paths(tree: Tree) -> list[Path]:
    """Rank path of every node, rebuilt by walking the parent links."""
    paths = []
    for node in range(tree.num_nodes):
        path: list[int] = []
        while node >= 0:
            path.append(int(tree.ranks[node]))
            node = int(tree.parents[node])
        paths.append(tuple(reversed(path)))
    return paths


@pytest.mark.parametrize("name", sorted(RANK_VECTORS))
@pytest.mark.parametrize("budget", range(0, 7))
def test_best_first_tree_matches_brute_force(name: str, budget: int) -> None:
    a = RANK_VECTORS[name]
    tree = best_first_tree(a, budget)
    assert tree.tau == pytest.approx(brute_best_tau(a, budget, budget), abs=1e-12)
    assert tree.num_nodes <= budget
    # the tree's own path probabilities are the products along its rank paths
    expected = [math.prod(a[r] for r in path) for path in tree_paths(tree)]
    np.testing.assert_allclose(tree.path_probability, expected, atol=1e-15)


@pytest.mark.parametrize("name", sorted(RANK_VECTORS))
def test_tau_curve_matches_brute_force(name: str) -> None:
    a = RANK_VECTORS[name]
    curve = best_first_tau_curve(a, 6)
    expected = [brute_best_tau(a, n, n) for n in range(7)]
    np.testing.assert_allclose(curve, expected, atol=1e-12)


@pytest.mark.parametrize("name", sorted(RANK_VECTORS))
@pytest.mark.parametrize("max_depth", [1, 2, 3])
def test_depth_limited_dp_matches_brute_force(name: str, max_depth: int) -> None:
    a = RANK_VECTORS[name]
    table = depth_limited_tau_table(a, 6, 3)
    assert table.shape == (4, 7)
    for budget in range(7):
        expected = brute_best_tau(a, budget, max_depth)
        assert table[max_depth, budget] == pytest.approx(expected, abs=1e-12)
        tree = best_tree_depth_limited(a, budget, max_depth)
        assert tree.tau == pytest.approx(expected, abs=1e-12)
        assert tree.num_nodes <= budget and tree.depth <= max_depth
        capped = best_first_tree(a, budget, max_depth=max_depth)
        assert capped.tau == pytest.approx(expected, abs=1e-12)
        assert capped.depth <= max_depth


def test_depth_limited_degenerate_depth_zero_and_budget_zero() -> None:
    a = RANK_VECTORS["geometric_0.8"]
    table = depth_limited_tau_table(a, 5, 2)
    np.testing.assert_array_equal(table[0], np.ones(6))  # depth 0: no drafting
    np.testing.assert_array_equal(table[:, 0], np.ones(3))  # no nodes
    assert best_tree_depth_limited(a, 0, 3).num_nodes == 0


def test_depth_limited_larger_budget_agrees_with_capped_best_first() -> None:
    # two independent optimal methods on sizes beyond brute force
    a = rank_acceptance_geometric(0.7, 6)
    table = depth_limited_tau_table(a, 40, 6)
    for depth in range(7):
        curve = best_first_tau_curve(a, 40, max_depth=depth)
        np.testing.assert_allclose(table[depth], curve, atol=1e-12)


def test_tau_curve_is_non_decreasing_and_concave() -> None:
    curve = best_first_tau_curve(rank_acceptance_geometric(0.8, 8), 300)
    gains = np.diff(curve)
    assert np.all(gains >= 0)
    assert np.all(np.diff(gains) <= 1e-12)  # slack: rounding of the cumulative sum


def test_best_first_degenerate_alpha_zero_tau_one() -> None:
    a = rank_acceptance_geometric(0.0, 4)
    assert best_first_tree(a, 10).tau == 1.0
    np.testing.assert_array_equal(best_first_tau_curve(a, 5), np.ones(6))


def test_best_first_degenerate_alpha_one_is_a_chain() -> None:
    a = rank_acceptance_geometric(1.0, 4)  # (1, 0, 0, 0)
    tree = best_first_tree(a, 10)
    assert tree.tau == 11.0
    assert tree.depth == 10
    assert best_first_tree(a, 10, max_depth=3).tau == 4.0


def test_best_first_degenerate_budget_zero_is_empty() -> None:
    tree = best_first_tree(rank_acceptance_geometric(0.8, 4), 0)
    assert tree.num_nodes == 0 and tree.depth == 0 and tree.tau == 1.0
    assert tree.attention_mask().shape == (0, 0)
    assert tree.width_per_level().shape == (0,)


def test_best_first_budget_limited_by_admissible_nodes() -> None:
    # one rank and depth 3: only 3 nodes exist
    assert best_first_tree([0.9], 10, max_depth=3).num_nodes == 3


def test_best_first_tie_break_prefers_shallow_then_lower_rank() -> None:
    # a = (0.5, 0.5): depth-1 nodes (0.5 each) before depth-2 nodes (0.25 each)
    tree = best_first_tree([0.5, 0.5], 6)
    assert tree.depths.tolist() == [1, 1, 2, 2, 2, 2]
    assert tree.ranks.tolist() == [0, 1, 0, 1, 0, 1]
    assert tree.parents.tolist() == [-1, -1, 0, 0, 1, 1]


def test_best_first_is_deterministic() -> None:
    a = rank_acceptance_geometric(0.6, 5)
    first, second = best_first_tree(a, 200), best_first_tree(a, 200)
    np.testing.assert_array_equal(first.parents, second.parents)
    np.testing.assert_array_equal(first.ranks, second.ranks)


def test_seed_chain_tau_pinned() -> None:
    # Seed: alpha = 0.8, gamma = 5 gives tau = (1 - 0.8^6) / 0.2 ~ 3.69
    tree = chain([0.8] * 5)
    assert tree.tau == pytest.approx(3.68928, abs=1e-12)
    assert tree.depth == 5 and tree.width_per_level().tolist() == [1] * 5


def test_chain_degenerate_gamma_zero() -> None:
    tree = chain([])
    assert tree.num_nodes == 0 and tree.tau == 1.0


def test_chain_mask_is_lower_triangular() -> None:
    mask = chain([0.9, 0.8, 0.7, 0.6]).attention_mask()
    np.testing.assert_array_equal(mask, np.tril(np.ones((4, 4), dtype=bool)))


@pytest.mark.parametrize("budget", [1, 7, 40])
def test_attention_mask_matches_ancestor_walk(budget: int) -> None:
    log_q = np.log(np.random.default_rng(budget).dirichlet(np.ones(6), size=4))
    rank_tree = best_first_tree(rank_acceptance_geometric(0.6, 4), budget)
    for tree in (rank_tree, ddtree(log_q, budget)[0]):
        mask = tree.attention_mask()
        for node in range(tree.num_nodes):
            assert set(np.flatnonzero(mask[node]).tolist()) == ancestors_by_walking(tree, node)


def test_width_per_level_counts_by_hand() -> None:
    tree = Tree(
        parents=np.array([-1, -1, 0, 0, 1, 2]),
        depths=np.array([1, 1, 2, 2, 2, 3]),
        ranks=np.array([0, 1, 0, 1, 0, 0]),
        path_probability=np.array([0.6, 0.3, 0.4, 0.1, 0.2, 0.2]),
    )
    assert tree.width_per_level().tolist() == [2, 3, 1]
    assert tree.depth == 3 and tree.num_nodes == 6
    assert tree.tau == pytest.approx(2.8)


@pytest.mark.parametrize(
    ("parents", "depths", "ranks", "probs", "field"),
    [
        ([0], [1], [0], [0.5], "parents"),
        ([-1, 0], [1, 1], [0, 0], [0.5, 0.2], "depths"),
        ([-1, -1], [1, 1], [0, 0], [0.5, 0.2], "ranks"),
        ([-1], [1], [-1], [0.5], "ranks"),
        ([-1], [1], [0], [1.5], "path_probability"),
        ([-1, 0], [1, 2], [0, 0], [0.5, 0.7], "path_probability"),
    ],
)
def test_tree_validation_names_field(
    parents: list[int], depths: list[int], ranks: list[int], probs: list[float], field: str
) -> None:
    with pytest.raises(SpecError, match=field):
        Tree(
            parents=np.array(parents),
            depths=np.array(depths),
            ranks=np.array(ranks),
            path_probability=np.array(probs),
        )


def test_rank_vector_validation() -> None:
    with pytest.raises(SpecError, match="rank_acceptance"):
        best_first_tree([0.7, 0.5], 4)
    with pytest.raises(SpecError, match="budget"):
        best_first_tree([0.7], -1)


def brute_top_paths(q: np.ndarray, k: int) -> list[tuple[int, ...]]:
    """The k most probable token paths of depth 1..gamma under independent marginals."""
    gamma, vocab = q.shape
    scored = []
    for depth in range(1, gamma + 1):
        for tokens in itertools.product(range(vocab), repeat=depth):
            scored.append((math.prod(q[d, t] for d, t in enumerate(tokens)), tokens))
    scored.sort(key=lambda item: -item[0])
    return [tokens for _, tokens in scored[:k]]


def ddtree_token_paths(tree: Tree, tokens: np.ndarray) -> list[tuple[int, ...]]:
    paths = []
    for node in range(tree.num_nodes):
        path = []
        while node >= 0:
            path.append(int(tokens[node]))
            node = int(tree.parents[node])
        paths.append(tuple(reversed(path)))
    return paths


@pytest.mark.parametrize("seed", range(4))
def test_ddtree_matches_brute_force_top_paths(seed: int) -> None:
    q = np.random.default_rng(seed).dirichlet(np.full(4, 0.7), size=3)
    for budget in (1, 2, 5, 13, 30, 84):
        tree, tokens = ddtree(np.log(q), budget)
        paths = ddtree_token_paths(tree, tokens)
        assert set(paths) == set(brute_top_paths(q, budget))
        expected = [math.prod(q[d, t] for d, t in enumerate(path)) for path in paths]
        np.testing.assert_allclose(tree.path_probability, expected, rtol=1e-12)


def test_ddtree_ranks_are_marginal_ranks_of_tokens() -> None:
    q = np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]])
    tree, tokens = ddtree(np.log(q), 9)
    order = np.argsort(-q, axis=1)
    for node in range(tree.num_nodes):
        assert order[tree.depths[node] - 1, tree.ranks[node]] == tokens[node]
    assert tree.num_nodes == 9  # 3 + 9 paths exist; the budget keeps 9
    assert ddtree(np.log(q), 50)[0].num_nodes == 12  # a budget above the path count keeps all


def test_ddtree_degenerate_cases() -> None:
    q = np.array([[0.7, 0.3]])
    tree, tokens = ddtree(np.log(q), 0)
    assert tree.num_nodes == 0 and tokens.shape == (0,)
    tree, tokens = ddtree(np.zeros((0, 5)), 4)  # gamma = 0
    assert tree.num_nodes == 0
    certain = np.array([[0.0, -np.inf], [0.0, -np.inf]])  # the drafter is sure of token 0
    tree, tokens = ddtree(certain, 2)
    assert tree.tau == 3.0 and tokens.tolist() == [0, 0]
    with pytest.raises(SpecError, match="log_q"):
        ddtree(np.array([[0.5, 0.2]]), 2)
