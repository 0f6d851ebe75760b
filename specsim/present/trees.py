"""The `--tree-out` document: every recommended tree node by node, and the depth-limited optimum."""

from __future__ import annotations

from typing import Any

from specsim.speculation.speedup import Recommendation
from specsim.speculation.trees import Tree


def tree_json(tree: Tree) -> dict[str, Any]:
    """parent (-1: the root, the last verified token), depth and rank of every node, and tau."""
    return {"tau": tree.tau, "num_nodes": tree.num_nodes, "depth": tree.depth,
            "nodes": [{"parent": int(p), "depth": int(d), "rank": int(r),
                       "path_probability": float(q)}
                      for p, d, r, q in zip(tree.parents.tolist(), tree.depths.tolist(),
                                            tree.ranks.tolist(), tree.path_probability.tolist(),
                                            strict=True)]}


def tree_document(rec: Recommendation, trees: list[Tree | None], flags: list[str],
                  optimum: Tree | None, *, source: str, max_nodes: int, max_depth: int
                  ) -> dict[str, Any]:
    """Per batch of `rec.best` the tree an engine runs (`speculation.recommend.chosen_trees`)
    with its engine flags (neither vLLM 0.33.0 nor SGLang 0.5.23 takes a tree literal), and
    `optimum`, the best tree of `max_nodes` nodes at most `max_depth` deep
    (`speculation.recommend.optimum_tree`); `source`: the acceptance profile's."""
    per_batch = []
    for c, tree, f in zip(rec.best, trees, flags, strict=True):
        entry: dict[str, Any] = {"batch": c.batch, "shape": c.shape, "tau": c.tau,
                                 "engine_tree_literal": None, "sglang_flags": f}
        if tree is not None:
            entry["tree"] = tree_json(tree)
        per_batch.append(entry)
    document: dict[str, Any] = {"recommended": per_batch, "acceptance": source}
    if optimum is not None:
        document["optimum"] = {"budget": max_nodes, "max_depth": max_depth,
                               "label": "bound: best tree of any shape, not an engine setting",
                               **tree_json(optimum)}
    return document
