"""What a round-structure comparison found (`speculation.round_structures`), as records: kept
apart from the model so that `speedup.Recommendation` can carry them without an import cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

# kappa of the adaptive stop's head: the concentration at which the stop gains SpecDec++'s
# published +7.2% over the best fixed chain on Alpaca (Huang et al. 2024, arXiv 2405.19715;
# llama-2-chat 7B drafting for 70B, bf16, 2 A100-80G, sampling, 2-20 candidates: 2.04x,
# SpecDec 1.90x), with the drafter at 0.165 of a target step (the SpecDec_pp README's sample:
# 20.9 ms against 126.4 ms a token) and alpha 0.768 (the constant that gives SpecDec's 1.90x).
# Held out, it predicts +8.1% on GSM8K (published +9.4%) and +7.7% on HumanEval (+11.1%)
# (tests/test_round_structures.py). A proxy for other drafters' heads.
SPECDEC_HEAD_CONCENTRATION = 2.1
# A structure beats the single round only by more than this fraction: smaller differences are
# far below the model's error (validate: 6.7% median on speedups), as recommend's
# SCHEDULE_TOLERANCE says of near-tied chain lengths.
WIN_TOLERANCE = 0.005


@dataclass(frozen=True, slots=True, kw_only=True)
class StructureChoice:
    """The best setting of one round structure at one batch size.

    gamma: draft tokens per stage (single, multistage, overlap) or the cap (adaptive_stop);
    stages: k (1 except multistage); threshold: h (adaptive_stop; 1.0 never stops, NaN for the
    others); drafted: expected draft tokens per request per round; round_s: expected seconds
    per round; speedup over plain decoding at the same batch.
    """

    batch: int
    structure: str
    gamma: int
    stages: int
    threshold: float
    tau: float
    drafted: float
    round_s: float
    speedup: float
    tokens_per_s_per_user: float
    throughput: float
    fits: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StructureComparison:
    """The best setting of each round structure per batch size, and the assumptions.

    rows: one per (batch, structure), batch-major, structures in STRUCTURES order.
    runs: per structure, the engine that runs it ("" where none does: specsim's model only).
    """

    rows: tuple[StructureChoice, ...]
    stage_acceptance: float
    device: str
    head_concentration: float
    runs: dict[str, str] = field(default_factory=dict)

    @property
    def specdec_head(self) -> bool:
        """Whether the adaptive stop's head is SpecDec++'s (SPECDEC_HEAD_CONCENTRATION)."""
        return self.head_concentration == SPECDEC_HEAD_CONCENTRATION

    def best(self) -> list[StructureChoice]:
        """Per batch size, the structure with the highest speedup; the single round unless
        another beats it by more than WIN_TOLERANCE (ties: the earlier in the rows)."""
        out: dict[int, StructureChoice] = {}
        for row in self.rows:
            if row.batch not in out:
                out[row.batch] = row
                continue
            margin = WIN_TOLERANCE if out[row.batch].structure == "single" else 1e-9
            if row.speedup > out[row.batch].speedup * (1.0 + margin):
                out[row.batch] = row
        return list(out.values())
