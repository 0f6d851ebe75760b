"""Seeded Monte Carlo of draft-and-verify rounds, the independent check of the exact formulas.

- `simulate_rounds`: R independent rounds of one verification rule on given per-position
  distributions (p_seq [gamma + 1, V], q_seq [gamma, V]).
- `simulate_tokens`: whole generations of consecutive rounds over a toy language whose target
  distribution at absolute position t is p_seq[t]; the losslessness check.
- `simulate_chain`: rounds of a chain given only conditional acceptance alpha_k.
- `simulate_tree_walk`: the target walking down a token tree, given its path probabilities.

All randomness comes from the `np.random.Generator` passed in.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.acceptance import PROBABILITY_TOLERANCE
from specsim.speculation.trees import Tree
from specsim.speculation.verification import RoundBatch, verification_rule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Rounds are simulated in chunks so that [rounds, gamma + 1, V] work arrays stay this small.
CHUNK_ELEMENTS = 4_000_000


def _check_rounds(num_rounds: int) -> None:
    if num_rounds < 0:
        raise SpecError(f"num_rounds: must be >= 0, got {num_rounds}")


def mean_and_standard_error(values: npt.ArrayLike) -> tuple[float, float]:
    """Sample mean and its standard error, std / sqrt(n), of a 1-D sample."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape[0] < 2:
        raise SpecError(f"values: need a 1-D sample of at least 2, got shape {x.shape}")
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.shape[0]))


def simulate_rounds(
    p_seq: npt.ArrayLike,
    q_seq: npt.ArrayLike,
    num_rounds: int,
    rng: np.random.Generator,
    rule: str = "tokenwise",
) -> RoundBatch:
    """Simulate independent rounds of one verification rule.

    Args:
        p_seq: target distributions per position, shape (gamma + 1, V).
        q_seq: drafter distributions per position, shape (gamma, V).
        num_rounds: number of rounds R.
        rng: source of randomness.
        rule: a name in `verification.VERIFICATION_RULES`.

    Returns:
        RoundBatch with accepted draft tokens (R,) and emitted tokens (R, gamma + 1).
    """
    sampler = verification_rule(rule)
    _check_rounds(num_rounds)
    p = np.asarray(p_seq, dtype=np.float64)
    chunk = max(1, CHUNK_ELEMENTS // max(1, p.size))
    batches = [
        sampler(rng, p_seq, q_seq, min(chunk, num_rounds - start))
        for start in range(0, num_rounds, chunk)
    ] or [sampler(rng, p_seq, q_seq, 0)]
    return RoundBatch(
        accepted=np.concatenate([b.accepted for b in batches]),
        emitted=np.concatenate([b.emitted for b in batches]),
    )


def simulate_tokens(
    p_seq: npt.ArrayLike,
    q_seq: npt.ArrayLike,
    num_tokens: int,
    num_sequences: int,
    rng: np.random.Generator,
    rule: str = "tokenwise",
) -> IntArray:
    """Generate the first tokens of many sequences with consecutive draft-and-verify rounds.

    The toy language is position-indexed: at absolute position t the target samples from
    p_seq[t] and the drafter from q_seq[t]. A round that starts at position t drafts the
    remaining L - 1 - t positions, L = len(p_seq). A lossless rule yields token t ~ p_seq[t],
    independently across t.

    Args:
        p_seq: target distributions, shape (L, V).
        q_seq: drafter distributions, shape (L - 1, V).
        num_tokens: tokens generated per sequence, 1..L.
        num_sequences: number of sequences S.
        rng: source of randomness.
        rule: a name in `verification.VERIFICATION_RULES`.

    Returns:
        token ids, shape (S, num_tokens).
    """
    p = np.asarray(p_seq, dtype=np.float64)
    q = np.asarray(q_seq, dtype=np.float64)
    if p.ndim != 2 or not 1 <= num_tokens <= p.shape[0]:
        raise SpecError(f"num_tokens: must be in 1..{p.shape[0]} (rows of p_seq), got {num_tokens}")
    _check_rounds(num_sequences)
    last = p.shape[0] - 1
    tokens = np.full((num_sequences, num_tokens), -1, dtype=np.int64)
    filled = np.zeros(num_sequences, dtype=np.int64)
    while np.any(filled < num_tokens):
        start = int(filled[filled < num_tokens].min())
        rows = np.flatnonzero(filled == start)
        batch = simulate_rounds(p[start:], q[start:last], rows.shape[0], rng, rule)
        kept = np.minimum(batch.tokens_per_round, num_tokens - start)
        for column in range(int(kept.max())):
            writes = column < kept
            tokens[rows[writes], start + column] = batch.emitted[writes, column]
        filled[rows] += kept
    return tokens


def simulate_chain(
    alphas: npt.ArrayLike, num_rounds: int, rng: np.random.Generator
) -> IntArray:
    """Accepted draft tokens per round of a chain with conditional acceptance alpha_k.

    Args:
        alphas: conditional acceptance of positions 1..gamma, shape (gamma,).
        num_rounds: number of rounds R.
        rng: source of randomness.

    Returns:
        accepted draft tokens per round, shape (R,), values 0..gamma.
    """
    alpha = np.asarray(alphas, dtype=np.float64)
    if alpha.ndim != 1 or np.any(alpha < 0.0) or np.any(alpha > 1.0):
        raise SpecError(f"alphas: need a (gamma,) array of values in [0, 1], got {alpha}")
    _check_rounds(num_rounds)
    accepted_each = rng.random((num_rounds, alpha.shape[0])) < alpha
    padded = np.concatenate([accepted_each, np.zeros((num_rounds, 1), dtype=bool)], axis=-1)
    return np.asarray(np.argmin(padded, axis=-1), dtype=np.int64)  # first rejection


def _children_table(tree: Tree) -> tuple[IntArray, FloatArray]:
    """Children of the root (row 0) and of node i (row i + 1) with cumulative acceptance.

    Row N + 1 has no children: a walk that has stopped parks there.

    Returns:
        child ids padded with -1, shape (N + 2, K), and the cumulative conditional acceptance
        of the children in the same order, padded with +inf, shape (N + 2, K).
    """
    n = tree.num_nodes
    parents = tree.parents
    parent_prob = np.where(parents >= 0, tree.path_probability[np.maximum(parents, 0)], 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        conditional = np.where(parent_prob > 0.0, tree.path_probability / parent_prob, 0.0)
    row = parents + 1
    order = np.argsort(row, kind="stable")
    counts = np.bincount(row, minlength=n + 2)
    slot = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)  # index among siblings
    width = max(int(counts.max(initial=0)), 1)
    child_ids = np.full((n + 2, width), -1, dtype=np.int64)
    probs = np.zeros((n + 2, width))
    child_ids[row[order], slot] = order
    probs[row[order], slot] = conditional[order]
    cumulative = np.cumsum(probs, axis=1)
    if np.any(cumulative[:, -1] > 1.0 + PROBABILITY_TOLERANCE):
        raise SpecError(
            "tree.path_probability: the children of one node are accepted with total "
            f"probability {cumulative[:, -1].max():.6g} > 1; sibling matches must be exclusive"
        )
    return child_ids, np.where(child_ids >= 0, cumulative, np.inf)


def simulate_tree_walk(tree: Tree, num_rounds: int, rng: np.random.Generator) -> IntArray:
    """Accepted draft tokens per round when the target walks down a token tree.

    At each node the target's next token matches at most one child; child v matches with
    probability path_probability[v] / path_probability[parent] (siblings are exclusive). The
    walk stops at the first node whose children all miss.

    Args:
        tree: drafted token tree.
        num_rounds: number of rounds R.
        rng: source of randomness.

    Returns:
        depth of the accepted path per round, shape (R,), values 0..tree.depth.
    """
    _check_rounds(num_rounds)
    child_ids, cumulative = _children_table(tree)
    stopped_row = tree.num_nodes + 1
    current = np.zeros(num_rounds, dtype=np.int64)  # table row: 0 = root, i + 1 = node i
    accepted = np.zeros(num_rounds, dtype=np.int64)
    for _ in range(tree.depth):
        u = rng.random(num_rounds)
        pick = (cumulative[current] <= u[:, None]).sum(axis=1)  # the child whose range holds u
        child = child_ids[current, np.minimum(pick, child_ids.shape[1] - 1)]
        moved = (pick < child_ids.shape[1]) & (child >= 0)
        accepted += moved
        current = np.where(moved, child + 1, stopped_row)
    return accepted
