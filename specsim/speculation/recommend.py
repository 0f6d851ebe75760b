"""The best chain or tree per batch size, and the engine settings that run it.

For each batch size the optimizer takes the candidate (chain length, or tree size and depth)
with the highest speedup or throughput among those that fit in memory, and writes it as vLLM's
`--speculative-config` JSON (a chain length per batch-size range when it changes with load)
and SGLang's `--speculative-num-steps / --speculative-eagle-topk / --speculative-num-draft-
tokens` triple.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.specs.drafters import Drafter
from specsim.speculation.acceptance import AcceptanceProfile
from specsim.speculation.speedup import (
    OBJECTIVES,
    SHAPES,
    Candidates,
    Setup,
    SpeedupTable,
    candidates_for,
    check_choice,
    speedup_table,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The best candidate at one batch size (nodes 0 = do not speculate)."""

    batch: int
    shape: str
    nodes: int
    depth: int
    max_width: int
    tau: float
    round_s: float
    speedup: float
    tokens_per_s_per_user: float
    throughput: float
    fits: bool

    @property
    def sglang_flags(self) -> str:
        """SGLang's triple: steps = depth, topk = widest branching, draft tokens = nodes + 1."""
        if self.nodes == 0:
            return "(no speculation)"
        return (f"--speculative-num-steps {self.depth} --speculative-eagle-topk "
                f"{self.max_width} --speculative-num-draft-tokens {self.nodes + 1}")


def _choices(table: SpeedupTable, objective: str) -> list[Choice]:
    best = table.best(objective)
    c: Candidates = table.candidates
    rows = []
    round_s, speedup = table.round_s, table.speedup  # each property computes a full table
    for i, k in enumerate(best.tolist()):
        per_user = float(c.tau[k] / round_s[i, k])
        rows.append(Choice(
            batch=int(table.batch[i]), shape="none" if c.nodes[k] == 0 else c.shape[k],
            nodes=int(c.nodes[k]), depth=int(c.depth[k]), max_width=int(c.max_width[k]),
            tau=float(c.tau[k]), round_s=float(round_s[i, k]), speedup=float(speedup[i, k]),
            tokens_per_s_per_user=per_user, throughput=float(table.batch[i]) * per_user,
            fits=bool(table.fits[i])))
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class Recommendation:
    """Per batch size: the best setting overall and the best chain (what vLLM runs)."""

    best: list[Choice]
    best_chain: list[Choice]
    objective: str

    def vllm_config(self, drafter: Drafter | None) -> dict[str, object] | None:
        """vLLM `--speculative-config`: the longest useful chain, and a per-batch schedule."""
        method = drafter.kind.vllm_method if drafter else None
        if method is None:
            return None
        ks = [c.nodes for c in self.best_chain if c.fits]
        if not ks or max(ks) == 0:
            return None
        config: dict[str, object] = {"method": method, "num_speculative_tokens": max(ks)}
        if drafter is not None and drafter.kind.vllm_parallel_drafting:
            config["parallel_drafting"] = True
        schedule = _schedule([c for c in self.best_chain if c.fits])
        if len({k for _, _, k in schedule}) > 1:
            config["num_speculative_tokens_per_batch_size"] = schedule
        return config

    def sglang_flags(self, drafter: Drafter | None) -> list[str]:
        """SGLang flags per batch size of `best`: the algorithm (where SGLang has one for the
        drafter's family) and the tree triple, or "(no speculation)"."""
        algorithm = sglang_algorithm(drafter)
        prefix = f"--speculative-algorithm {algorithm} " if algorithm else ""
        return [prefix + c.sglang_flags if c.nodes else c.sglang_flags for c in self.best]


def sglang_algorithm(drafter: Drafter | None) -> str | None:
    """SGLang's `--speculative-algorithm` for the drafter, None where SGLang has none."""
    return drafter.kind.sglang_algorithm if drafter is not None else None


def _schedule(choices: list[Choice]) -> list[list[int]]:
    """[[lo, hi, k], ...]: each sampled batch size covers the sizes down to the previous one."""
    ranges: list[list[int]] = []
    lo = 1
    for c in sorted(choices, key=lambda c: c.batch):
        if ranges and ranges[-1][2] == c.nodes:
            ranges[-1][1] = c.batch
        else:
            ranges.append([lo, c.batch, c.nodes])
        lo = c.batch + 1
    return ranges


def recommend(setup: Setup, profile: AcceptanceProfile, batch: ArrayLike, *,
              max_nodes: int = 64, shape: str = "auto", objective: str = "speedup"
              ) -> Recommendation:
    """The best speculation setting per batch size, and the best chain for chain-only engines.

    shape: "chain", "tree", or "auto" (trees when the profile has per-rank acceptance).
    """
    check_choice("shape", shape, SHAPES)
    check_choice("objective", objective, OBJECTIVES)
    if max_nodes < 1:
        raise SpecError(f"option --max-nodes: must be >= 1, got {max_nodes}")
    drafter = setup.drafter
    chain_limit = max_nodes if not drafter or not drafter.draft_limit else \
        min(max_nodes, drafter.draft_limit)
    chains = candidates_for(drafter, profile, shape="chain", max_nodes=chain_limit)
    chain_table = speedup_table(setup, batch, chains)
    best_chain = _choices(chain_table, objective)
    use_trees = shape == "tree" or (shape == "auto" and bool(profile.rank_acceptance))
    if not use_trees:
        return Recommendation(best=best_chain, best_chain=best_chain, objective=objective)
    trees = candidates_for(drafter, profile, shape="tree", max_nodes=max_nodes)
    best_tree = _choices(speedup_table(setup, batch, trees), objective)
    best = [t if _score(t, objective) > _score(c, objective) * (1 + 1e-9) else c
            for t, c in zip(best_tree, best_chain, strict=True)]
    return Recommendation(best=best, best_chain=best_chain, objective=objective)


def _score(choice: Choice, objective: str) -> float:
    return choice.speedup if objective == "speedup" else choice.throughput


def vllm_flag(config: dict[str, object] | None) -> str:
    """The `--speculative-config` argument as a shell-pasteable string."""
    if config is None:
        return "(vLLM has no method for this drafter, or speculation does not pay)"
    return f"--speculative-config '{json.dumps(config, separators=(',', ':'))}'"
