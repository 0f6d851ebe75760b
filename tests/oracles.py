"""Reference tree builders for the tests: no command uses them.

- `depth_limited_tau_table` / `best_tree_depth_limited`: the Sequoia-style dynamic program
  over node budget and depth (Chen et al. 2024), an independent oracle of the depth-capped
  best-first trees that `specsim.speculation.speedup.tree_candidates` builds.
- `ddtree`: best-first over a parallel drafter's per-position marginals (Ringel and Romano
  2026), grown greedily from the whole frontier (every child of every chosen node), with no
  heap: independent of the package's best-first search (`specsim.speculation.trees`), which
  offers each popped node's two successors only.

Only public names of the package are used, so an oracle shares no code with what it checks.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.acceptance import PROBABILITY_TOLERANCE
from specsim.speculation.trees import Tree

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _rank_vector(rank_acceptance: npt.ArrayLike) -> FloatArray:
    """a_j as a (J,) array of probabilities summing to <= 1, else SpecError."""
    a = np.asarray(rank_acceptance, dtype=np.float64)
    if a.ndim != 1 or not np.all((a >= 0.0) & (a <= 1.0)) or a.sum() > 1.0 + 1e-9:
        raise SpecError(f"rank_acceptance: need (J,) probabilities summing to <= 1, got {a}")
    return a


def _check_budget(budget: int, max_depth: int | None) -> None:
    if budget < 0 or (max_depth is not None and max_depth < 0):
        raise SpecError(f"budget {budget}, max_depth {max_depth}: need both >= 0")


def depth_limited_tau_table(
    rank_acceptance: npt.ArrayLike, budget: int, max_depth: int
) -> FloatArray:
    """Optimal tau for every node budget and depth limit (Sequoia-style dynamic program).

    value[d, n] is the largest sum of path probabilities below a node over subtrees with at
    most n nodes and at most d levels; the children of a node share its budget as a knapsack
    over candidate ranks, taken in order (a node's children are its top ranks). Cost
    O(max_depth * J * budget^2).

    Args:
        rank_acceptance: a_j per candidate rank, shape (J,), sum <= 1.
        budget: largest node budget N.
        max_depth: largest depth limit D.

    Returns:
        tau[d, n] = 1 + value[d, n], shape (max_depth + 1, budget + 1).
    """
    value, _ = _depth_limited_dp(_rank_vector(rank_acceptance), budget, max_depth)
    return np.asarray(1.0 + value, dtype=np.float64)


def _depth_limited_dp(
    a: FloatArray, budget: int, max_depth: int
) -> tuple[FloatArray, IntArray]:
    """Dynamic program behind `depth_limited_tau_table`.

    Returns:
        value, shape (D + 1, N + 1), and choice[d, j, n], shape (D + 1, J, N + 1): how many
        nodes (the rank-j child and its descendants) rank j takes when ranks j..J-1 share n.
    """
    _check_budget(budget, max_depth)
    useful = np.zeros(a.shape[0], dtype=bool)  # a node has at most `budget` children
    useful[:budget] = True
    value = np.zeros((max_depth + 1, budget + 1))
    choice = np.zeros((max_depth + 1, a.shape[0], budget + 1), dtype=np.int64)
    if budget == 0:
        return value, choice
    n = np.arange(budget + 1)[:, None]
    m = np.arange(1, budget + 1)[None, :]  # nodes given to one rank: its child + m - 1 below
    feasible = m <= n
    remaining = np.where(feasible, n - m, 0)
    rows = np.arange(budget + 1)
    for d in range(1, max_depth + 1):
        # Sequoia (Chen et al. 2024): a rank-j child's subtree is worth a_j (1 + value below)
        subtree = 1.0 + value[d - 1, m - 1]
        rest = np.zeros(budget + 1)  # knapsack over ranks j..J-1, built from the last rank
        for j in np.flatnonzero(useful)[::-1]:
            take = np.where(feasible, a[j] * subtree + rest[remaining], -np.inf)
            best_m = np.argmax(take, axis=1)
            best_take = take[rows, best_m]
            # ordered ranks: leaving rank j out leaves every later rank out too
            better = best_take > 0.0  # strictly: never spend nodes that add nothing
            choice[d, j] = np.where(better, best_m + 1, 0)
            rest = np.where(better, best_take, 0.0)
        value[d] = rest
    return value, choice


def best_tree_depth_limited(rank_acceptance: npt.ArrayLike, budget: int, max_depth: int) -> Tree:
    """Best tree with at most `budget` nodes and depth <= `max_depth` (dynamic program).

    Args:
        rank_acceptance: a_j per candidate rank, shape (J,), sum <= 1.
        budget: maximum number of drafted nodes N.
        max_depth: maximum depth D (sequential drafter passes).

    Returns:
        An optimal tree (nodes that add no probability are left out), nodes breadth first.
    """
    a = _rank_vector(rank_acceptance)
    _, choice = _depth_limited_dp(a, budget, max_depth)
    parents: list[int] = []
    depths: list[int] = []
    ranks: list[int] = []
    probs: list[float] = []
    # breadth first from the root: (node, its path probability, nodes below it, levels left)
    queue = deque([(-1, 1.0, budget, max_depth)])
    while queue:
        node, prob, nodes_below, depth_left = queue.popleft()
        for j in range(choice.shape[1]):
            taken = int(choice[depth_left, j, nodes_below])
            if not taken:
                break
            if taken:
                parents.append(node)
                depths.append(depths[node] + 1 if node >= 0 else 1)
                ranks.append(j)
                probs.append(prob * float(a[j]))
                queue.append((len(parents) - 1, probs[-1], taken - 1, depth_left - 1))
                nodes_below -= taken
    return Tree(
        parents=np.array(parents, dtype=np.int64),
        depths=np.array(depths, dtype=np.int64),
        ranks=np.array(ranks, dtype=np.int64),
        path_probability=np.array(probs, dtype=np.float64),
    )


def ddtree(log_q: npt.ArrayLike, budget: int) -> tuple[Tree, IntArray]:
    """Best-first token tree over a parallel drafter's per-position marginals (DDTree).

    A path's score is the sum of the marginal log-probabilities of its tokens (Ringel and
    Romano 2026); the `budget` best paths form a tree because extending a path or moving to a
    worse sibling never raises its score.

    Args:
        log_q: per-position log-probabilities, shape (gamma, V); row k is draft position k + 1.
        budget: maximum number of drafted nodes N.

    Returns:
        (tree, tokens): tree.path_probability = exp(score) and tree.ranks the rank of the token
        in its position's marginal; tokens, shape (N,), the token id of each node.
    """
    scores = np.asarray(log_q, dtype=np.float64)
    if scores.ndim != 2 or np.any(np.isnan(scores)) or np.any(scores > PROBABILITY_TOLERANCE):
        raise SpecError(f"log_q: need (gamma, V) log-probabilities <= 0, got shape {scores.shape}")
    _check_budget(budget, None)
    gamma, vocab = scores.shape
    order = np.argsort(-scores, axis=-1, kind="stable")  # rank r at depth d: token order[d, r]
    # Chosen nodes: (parent, depth, rank, score). Each step takes the best child of the root or
    # of any chosen node not yet taken; ties: shallower, then the earlier-chosen parent, then
    # the better rank (the order a best-first search pops them in).
    nodes: list[tuple[int, int, int, float]] = []
    taken: set[tuple[int, int]] = set()
    for _ in range(min(budget, gamma * vocab ** gamma)):
        frontier = [(-(base + float(scores[depth - 1, order[depth - 1, rank]])), depth, parent,
                     rank)
                    for parent, depth, base in [(-1, 1, 0.0)] + [
                        (i, d + 1, sc) for i, (_, d, _, sc) in enumerate(nodes) if d < gamma]
                    for rank in range(min(vocab, budget)) if (parent, rank) not in taken]
        if not frontier:
            break
        neg_score, depth, parent, rank = min(frontier)
        taken.add((parent, rank))
        nodes.append((parent, depth, rank, -neg_score))
    parents, depths, ranks = (np.array([n[i] for n in nodes], dtype=np.int64) for i in range(3))
    log_prob = np.array([n[3] for n in nodes], dtype=np.float64)
    tokens = order[depths - 1, ranks].astype(np.int64)
    tree = Tree(
        parents=parents,
        depths=depths,
        ranks=ranks,
        path_probability=np.minimum(np.exp(log_prob), 1.0),
    )
    return tree, tokens
