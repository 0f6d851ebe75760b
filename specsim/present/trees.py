"""The `--tree-out` document: every recommended tree node by node, and the depth-limited optimum."""

from __future__ import annotations

from typing import Any

from specsim.engines import sglang, tree_engines
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.drafters import Drafter
from specsim.speculation.recommend import Choice, Recommendation
from specsim.speculation.speedup import Setup
from specsim.speculation.trees import Tree, best_first_tree, chain, sglang_tree


def tree_json(tree: Tree) -> dict[str, Any]:
    """parent (-1: the root, the last verified token), depth and rank of every node, and tau."""
    return {"tau": tree.tau, "num_nodes": tree.num_nodes, "depth": tree.depth,
            "nodes": [{"parent": int(p), "depth": int(d), "rank": int(r),
                       "path_probability": float(q)}
                      for p, d, r, q in zip(tree.parents.tolist(), tree.depths.tolist(),
                                            tree.ranks.tolist(), tree.path_probability.tolist(),
                                            strict=True)]}


def _realized(choice: Choice, profile: AcceptanceProfile, drafter: Drafter | None) -> Tree:
    if choice.max_width <= 1:
        return chain(profile.alphas(choice.nodes))
    if tree_engines(drafter):
        return sglang_tree(profile.ranks(choice.max_width), choice.depth, choice.max_width,
                           choice.nodes + 1)
    return best_first_tree(profile.ranks(choice.nodes), choice.nodes, choice.depth)


def tree_document(rec: Recommendation, setup: Setup, profile: AcceptanceProfile, *,
                  max_nodes: int, max_depth: int | None) -> dict[str, Any]:
    """Per batch the tree an engine runs (with its engine flags; neither vLLM 0.33.0 nor
    SGLang 0.5.23 takes a tree literal), and the best tree of `max_nodes` nodes at most
    `max_depth` deep whose nodes' children are their top ranks (Sequoia's optimum)."""
    flags = sglang.flags_per_row(rec, setup.drafter)
    per_batch = []
    for c, f in zip(rec.best, flags, strict=True):
        entry: dict[str, Any] = {"batch": c.batch, "shape": c.shape, "tau": c.tau,
                                 "engine_tree_literal": None, "sglang_flags": f}
        if c.nodes:
            entry["tree"] = tree_json(_realized(c, profile, setup.drafter))
        per_batch.append(entry)
    document: dict[str, Any] = {"recommended": per_batch, "acceptance": profile.source}
    if profile.rank_acceptance:
        depth = max_nodes if max_depth is None else max_depth
        optimum = best_first_tree(profile.ranks(max_nodes), max_nodes, depth)
        document["optimum"] = {"budget": max_nodes, "max_depth": depth,
                               "label": "bound: best tree of any shape, not an engine setting",
                               **tree_json(optimum)}
    return document
