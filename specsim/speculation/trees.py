"""Token trees: the tree structure, its tau and attention mask, and tree builders.

A tree holds N drafted nodes 0..N-1; the root is the last verified token and is not a node.
Nodes are stored in topological order (every parent before its children). The candidate-rank
model says the j-th candidate (j = 0 best) at any node is the target's token with probability
a_j; these events are mutually exclusive, so sum_j a_j <= 1, and a node's path probability is
the product of a_rank along its root-to-node path.

Builders: `best_first_tree` (the optimal tree for a node budget and depth cap whose nodes'
children are their top ranks, as engines draft them; `ordered_rank_tree` where measured a_j
rise somewhere), `sglang_tree` (the tree SGLang's EAGLE expansion realizes) and `chain`.
tests/oracles.py holds the Sequoia-style dynamic program over budget and depth that checks
the depth-capped best-first trees.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.acceptance import (
    PROBABILITY_TOLERANCE,
    marginal_acceptance,
    tau_prefixes,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Tree:
    """A drafted token tree.

    Attributes:
        parents: parent node of each node, shape (N,), -1 for children of the root; every
            parent index is smaller than its child's index.
        depths: depth of each node, shape (N,), 1 for children of the root.
        ranks: candidate rank of each node among its parent's candidates, shape (N,), 0 = best.
        path_probability: probability that the target accepts the whole root-to-node path,
            shape (N,), in [0, 1].
    """

    parents: IntArray
    depths: IntArray
    ranks: IntArray
    path_probability: FloatArray

    def __post_init__(self) -> None:
        for name in ("parents", "depths", "ranks"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))
        prob = np.asarray(self.path_probability, dtype=np.float64)
        object.__setattr__(self, "path_probability", prob)
        n = self.parents.shape[0]
        if any(a.shape != (n,) for a in (self.parents, self.depths, self.ranks, prob)):
            raise SpecError("tree: parents, depths, ranks, path_probability need equal (N,) shape")
        _validate_structure(self.parents, self.depths, self.ranks, prob)

    @property
    def num_nodes(self) -> int:
        """Number of drafted nodes N."""
        return int(self.parents.shape[0])

    @property
    def depth(self) -> int:
        """Maximum node depth (0 for an empty tree)."""
        return int(self.depths.max(initial=0))

    @property
    def tau(self) -> float:
        """Expected tokens per round, 1 + sum of path probabilities (Miao et al. 2023)."""
        return float(tau_prefixes(self.path_probability)[-1])

    def attention_mask(self) -> BoolArray:
        """(N, N) mask, True where the row node attends the column node (ancestors and itself)."""
        n = self.num_nodes
        mask = np.zeros((n, n), dtype=bool)
        for level in range(1, self.depth + 1):
            nodes = np.flatnonzero(self.depths == level)
            if level > 1:
                mask[nodes] = mask[self.parents[nodes]]
            mask[nodes, nodes] = True
        return mask

    def width_per_level(self) -> IntArray:
        """Number of nodes at depth 1..depth, shape (depth,)."""
        return np.bincount(self.depths, minlength=self.depth + 1)[1:].astype(np.int64)


def _validate_structure(
    parents: IntArray, depths: IntArray, ranks: IntArray, prob: FloatArray
) -> None:
    """Raise SpecError unless the arrays describe a topologically ordered tree."""
    index = np.arange(parents.shape[0])
    if np.any(parents < -1) or np.any(parents >= index):
        raise SpecError("tree.parents: each parent must be -1 or an earlier node index")
    parent_depth = np.where(parents >= 0, depths[np.maximum(parents, 0)], 0)
    if np.any(depths != parent_depth + 1):
        raise SpecError("tree.depths: each depth must be its parent's depth + 1 (root = 0)")
    if np.any(ranks < 0):
        raise SpecError("tree.ranks: candidate ranks must be >= 0")
    edges = np.sort((parents + 1) * (ranks.max(initial=0) + 1) + ranks)  # id per (parent, rank)
    if np.any(edges[1:] == edges[:-1]):  # (not np.unique: it imports numpy.ma, 30 ms a start)
        raise SpecError("tree.ranks: two children of one node share a candidate rank")
    if not np.all(np.isfinite(prob)) or np.any(prob < 0.0) or np.any(prob > 1.0):
        raise SpecError("tree.path_probability: must lie in [0, 1]")
    parent_prob = np.where(parents >= 0, prob[np.maximum(parents, 0)], 1.0)
    if np.any(prob > parent_prob + PROBABILITY_TOLERANCE):
        raise SpecError("tree.path_probability: a child cannot be likelier than its parent")


def chain(alphas: npt.ArrayLike) -> Tree:
    """A chain of gamma draft tokens as a tree.

    Args:
        alphas: conditional acceptance alpha_k of positions 1..gamma, shape (gamma,).

    Returns:
        Tree with node k-1 at depth k, rank 0, path probability prod_{i<=k} alpha_i.
    """
    alpha = np.asarray(alphas, dtype=np.float64)
    if alpha.ndim != 1 or np.any(alpha < 0.0) or np.any(alpha > 1.0):
        raise SpecError(f"alphas: need a (gamma,) array of values in [0, 1], got {alpha}")
    gamma = alpha.shape[0]
    return Tree(
        parents=np.arange(gamma) - 1,
        depths=np.arange(1, gamma + 1),
        ranks=np.zeros(gamma, dtype=np.int64),
        path_probability=marginal_acceptance(alpha),
    )


def _rank_vector(rank_acceptance: npt.ArrayLike) -> FloatArray:
    """Validate a_j: shape (J,), values in [0, 1], sum <= 1."""
    a = np.asarray(rank_acceptance, dtype=np.float64)
    if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0):
        raise SpecError(f"rank_acceptance: need a (J,) array of values in [0, 1], got {a}")
    if a.sum() > 1.0 + PROBABILITY_TOLERANCE:
        raise SpecError(f"rank_acceptance: ranks are exclusive, sum must be <= 1, got {a.sum()}")
    return a


def _check_budget(budget: int, max_depth: int | None) -> None:
    if budget < 0:
        raise SpecError(f"budget: node budget must be >= 0, got {budget}")
    if max_depth is not None and max_depth < 0:
        raise SpecError(f"max_depth: must be >= 0, got {max_depth}")


def _best_first(
    values: FloatArray, budget: int, depth_limit: int
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """The `budget` best paths by summed score, popped best first (parents before children).

    Scores add along a path and never increase (log-probabilities), so a popped node only
    needs to offer two successors, its best child one level deeper and its next-best sibling.
    Ties pop the shallower node first, then the child of the earlier-popped parent, then the
    better candidate.

    Args:
        values: candidate scores per depth, shape (D, K), each row sorted descending; row d
            scores depth d + 1 and depths beyond D reuse the last row.
        budget: maximum number of nodes returned.
        depth_limit: deepest allowed node.

    Returns:
        parents, depths, candidate positions (column of `values`) and scores, each shape (n,).
    """
    out: list[tuple[int, int, int, float]] = []
    if depth_limit > 0 and values.shape[1] > 0 and budget > 0:
        rows: list[list[float]] = values.tolist()  # plain floats: fast heap arithmetic
        rows += rows[-1:] * (min(depth_limit, budget) - len(rows))  # one row per depth
        num_candidates = len(rows[0])
        # entry: (-score, depth, parent node, candidate position, parent's score)
        heap = [(-rows[0][0], 1, -1, 0, 0.0)]
        while heap and len(out) < budget:
            neg_score, depth, parent, position, parent_score = heapq.heappop(heap)
            node, score = len(out), -neg_score
            out.append((parent, depth, position, score))
            if depth < depth_limit:
                child_score = score + rows[depth][0]
                heapq.heappush(heap, (-child_score, depth + 1, node, 0, score))
            if position + 1 < num_candidates:
                sibling_score = parent_score + rows[depth - 1][position + 1]
                heapq.heappush(heap, (-sibling_score, depth, parent, position + 1, parent_score))
    columns = list(zip(*out, strict=True)) if out else [(), (), (), ()]
    parents, depths, positions = (np.array(c, dtype=np.int64) for c in columns[:3])
    return parents, depths, positions, np.array(columns[3], dtype=np.float64)


def best_first_tree(
    rank_acceptance: npt.ArrayLike, budget: int, max_depth: int | None = None
) -> Tree:
    """The best tree of at most `budget` nodes whose nodes' children are their top ranks.

    Engines draft a node's top-k candidates, so a node of rank j always has siblings of ranks
    0..j-1. Where a_j does not increase with j, the `budget` nodes with the highest path
    probability form that tree (a child never beats its parent or an earlier sibling), found best
    first; ties go to the shallower node (see `_best_first`). Where a measured a_j rises somewhere
    (rank 9 likelier than rank 8), `ordered_rank_tree` solves it exactly.

    Args:
        rank_acceptance: a_j per candidate rank, shape (J,), sum <= 1.
        budget: maximum number of drafted nodes N.
        max_depth: maximum depth (sequential drafter passes), None for unlimited.

    Returns:
        Tree with at most `budget` nodes; in best-first order when a_j does not increase.
    """
    a = _rank_vector(rank_acceptance)
    _check_budget(budget, max_depth)
    depth_limit = budget if max_depth is None else min(budget, max_depth)
    if np.any(np.diff(a) > 0.0) and budget <= ORDERED_DP_MAX_NODES:
        return ordered_rank_tree(a, budget, depth_limit)
    with np.errstate(divide="ignore"):
        log_a = np.log(a[:budget])[None, :]  # rank order; siblings only after their elders
    parents, depths, positions, log_prob = _best_first(log_a, budget, depth_limit)
    return Tree(parents=parents, depths=depths, ranks=positions,
                path_probability=np.exp(log_prob))


# Largest budget the exact dynamic program handles for a rising rank vector; beyond it the
# rank-ordered best-first search gives a valid, possibly slightly worse, tree.
ORDERED_DP_MAX_NODES = 256


def ordered_rank_table(a: FloatArray, budget: int, max_depth: int
                       ) -> tuple[FloatArray, IntArray]:
    """Best sum of path probabilities below a node, children restricted to top ranks.

    value[d, n]: at most n nodes, at most d levels. A node's children take ranks 0..k-1; rank j's
    child and its subtree of m nodes are worth a_j (1 + value[d-1, m-1]), and the ranks share n
    as a knapsack that may stop at any rank but never skips one. Cost O(max_depth J budget^2).

    Returns:
        value, shape (D + 1, N + 1), and take[d, j, n], shape (D + 1, J, N + 1): the nodes rank
        j's subtree gets when ranks j.. share n (0: rank j and all later ranks are left out).
    """
    num_ranks = min(a.shape[0], budget)
    value = np.zeros((max_depth + 1, budget + 1))
    take = np.zeros((max_depth + 1, num_ranks, budget + 1), dtype=np.int64)
    n = np.arange(budget + 1)[:, None]
    m = np.arange(1, budget + 1)[None, :]
    feasible = m <= n
    rest_index = np.where(feasible, n - m, 0)
    rows = np.arange(budget + 1)
    for d in range(1, max_depth + 1):
        subtree = 1.0 + value[d - 1, m - 1]
        rest = np.zeros(budget + 1)
        for j in range(num_ranks - 1, -1, -1):
            options = np.where(feasible, a[j] * subtree + rest[rest_index], -np.inf)
            best_m = np.argmax(options, axis=1)
            best = options[rows, best_m]
            use = best > 0.0  # stop at rank j when it and the later ranks add nothing
            take[d, j] = np.where(use, best_m + 1, 0)
            rest = np.where(use, best, 0.0)
        value[d] = rest
    return value, take


def ordered_rank_tree(rank_acceptance: npt.ArrayLike, budget: int, max_depth: int) -> Tree:
    """Exact best tree of at most `budget` nodes and `max_depth` levels whose nodes' children
    are their top ranks (Sequoia's tree with ordered ranks, Chen et al. 2024)."""
    a = _rank_vector(rank_acceptance)
    _check_budget(budget, max_depth)
    depth_limit = min(budget, max_depth)
    _, take = ordered_rank_table(a, budget, depth_limit)
    return tree_from_take(a, take, budget, depth_limit)


def tree_from_take(a: FloatArray, take: IntArray, budget: int, depth_limit: int) -> Tree:
    parents: list[int] = []
    depths: list[int] = []
    ranks: list[int] = []
    probs: list[float] = []
    stack = [(-1, 0, 1.0, budget, depth_limit)]  # node, depth, path prob, nodes below, levels
    while stack:
        node, depth, prob, below, levels = stack.pop(0)
        for j in range(take.shape[1]):
            nodes = int(take[levels, j, below]) if levels > 0 else 0
            if nodes == 0:
                break
            parents.append(node)
            depths.append(depth + 1)
            ranks.append(j)
            probs.append(prob * float(a[j]))
            stack.append((len(parents) - 1, depth + 1, probs[-1], nodes - 1, levels - 1))
            below -= nodes
    return Tree(parents=np.array(parents, dtype=np.int64), depths=np.array(depths, dtype=np.int64),
                ranks=np.array(ranks, dtype=np.int64),
                path_probability=np.array(probs, dtype=np.float64))


def sglang_tree(rank_acceptance: npt.ArrayLike, steps: int, topk: int,
                draft_tokens: int) -> Tree:
    """The tree SGLang's EAGLE loop verifies for `--speculative-num-steps steps
    --speculative-eagle-topk topk --speculative-num-draft-tokens draft_tokens`.

    SGLang 0.5.23 (speculative/eagle_worker_v2.py, spec_utils.py, eagle_utils.py): the root gets
    its topk best candidates; at each later depth up to `steps` the topk best frontier nodes by
    path score get topk children each, all of which join the pool; the draft_tokens - 1 best of
    the pool are verified. Path scores here are the rank model's path probabilities.
    """
    a = _rank_vector(rank_acceptance)
    if steps < 1 or topk < 1 or draft_tokens < 1:
        raise SpecError("sglang tree: steps, topk and draft tokens must be >= 1")
    k = min(topk, a.shape[0])
    pool: list[tuple[float, int, int, int]] = []  # (-prob, order, parent pool index, rank)
    frontier = [(-1, 1.0)]  # (pool index, path probability)
    for depth in range(1, steps + 1):
        level = [(p * float(a[j]), parent, j) for parent, p in frontier for j in range(k)]
        start = len(pool)
        pool += [(-prob, start + i, parent, j) for i, (prob, parent, j) in enumerate(level)]
        best = sorted(range(len(level)), key=lambda i: (-level[i][0], i))[:topk]
        frontier = [(start + i, level[i][0]) for i in best]
        del depth
    kept = sorted(sorted(pool)[:max(draft_tokens - 1, 0)], key=lambda e: e[1])
    index = {entry[1]: i for i, entry in enumerate(kept)}
    parents = np.array([index.get(e[2], -1) if e[2] >= 0 else -1 for e in kept], dtype=np.int64)
    if any(e[2] >= 0 and e[2] not in index for e in kept):
        raise SpecError("sglang tree: a kept node lost its parent (tie in path scores)")
    depths = np.zeros(len(kept), dtype=np.int64)
    for i, p in enumerate(parents.tolist()):
        depths[i] = 1 if p < 0 else depths[p] + 1
    return Tree(parents=parents, depths=depths,
                ranks=np.array([e[3] for e in kept], dtype=np.int64),
                path_probability=np.array([-e[0] for e in kept], dtype=np.float64))


def sglang_pool_probabilities(rank_acceptance: npt.ArrayLike, steps: int, topk: int
                              ) -> FloatArray:
    """Path probabilities of SGLang's whole candidate pool, best first, shape
    (topk + (steps - 1) topk^2,): tau of the top n is 1 + their cumulative sum."""
    tree = sglang_tree(rank_acceptance, steps, topk, 1 + topk + (steps - 1) * topk * topk)
    return np.sort(tree.path_probability)[::-1]
