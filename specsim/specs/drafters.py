"""Drafter specs: the family, the architecture numbers, what the drafter keeps per request.

A drafter is described by its own layers (width, heads, MLP), what it reads from the target
(fused hidden states, the target's LM head or its own over a draft vocabulary), how many
positions one pass drafts (a parallel drafter's block), and its family, which decides how many
sequential passes a round takes and what cache it keeps (DESIGN.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from specsim.errors import SpecError
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.cache import (
    CacheLayout,
    CacheSegment,
    attention_layer_kv_bytes_per_token,
    kv_bytes_per_token,
    kv_layout,
)
from specsim.specs.dtypes import BYTES_PER_PARAM
from specsim.specs.io import Fields, read_spec_file, resolve_path
from specsim.specs.models import Model, load_model
from specsim.specs.names import read_checkpoint, read_display_name, read_hub_id
from specsim.specs.params import weight_bytes as model_weight_bytes
from specsim.specs.workloads import acceptance_profile

Cache = Literal["own_layers", "model", "none"]
RoundCost = Literal["autoregressive", "parallel", "target_heads"]
BlockRule = Literal["none", "trained", "depth"]
DraftLimitRule = Literal["none", "block", "heads"]
# How a published checkpoint's config.json becomes a drafter spec (`specs.drafter_import`).
ConfigReader = Literal["none", "llama_layer", "llama_layer_draft_vocab", "block", "target_modules"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """Everything specsim knows about a family of drafters; the only place a family is named.

    parallel: all draft positions come from one backbone pass (else one pass per token or tree
    level). cache: what it keeps per request, "own_layers" (K/V of its own layers for the whole
    context), "model" (a separate small LLM's full cache) or "none" (nothing that grows with the
    context). round_cost: the rule that times one round in `speculation.draft_cost`.
    block: positions per request one parallel pass covers, "trained" (the fixed trained block),
    "depth" (min(depth + 1, block), P-EAGLE) or "none" (no block). draft_limit: most draft
    tokens per round, "block" (block - 1), "heads" (Medusa's number of heads) or "none".
    target_shaped_layers: its layers have the target's own layout (MTP).
    config_reader: how `drafters import` reads a published checkpoint's config.json ("none":
    not importable); config_hints: lower-case substrings of its `architectures` entry, or
    config keys, that identify the family (the longest matching hint wins).
    Which engines run a family, and under which name, is the engines' knowledge: the
    `families:` of each engine's `speculative:` block (engines/<engine>.yaml).
    """

    parallel: bool
    cache: Cache
    round_cost: RoundCost
    block: BlockRule
    draft_limit: DraftLimitRule
    target_shaped_layers: bool = False
    config_reader: ConfigReader = "none"
    config_hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        rules = ((self.cache, Cache), (self.round_cost, RoundCost), (self.block, BlockRule),
                 (self.draft_limit, DraftLimitRule), (self.config_reader, ConfigReader))
        for value, rule in rules:
            if value not in get_args(rule):
                raise SpecError(f"drafter family: {value!r} is not one of {get_args(rule)}")
        if (self.block != "none") != (self.round_cost == "parallel"):
            raise SpecError("drafter family: a block rule belongs to a parallel round cost")


# One row per family (DESIGN.md section 4). Adding a family is one row here, and one entry in
# the `families:` of each engine that runs it (engines/<engine>.yaml).
FAMILIES: dict[str, Family] = {
    "small_llm": Family(parallel=False, cache="model", round_cost="autoregressive",
                        block="none", draft_limit="none"),
    "eagle": Family(parallel=False, cache="own_layers", round_cost="autoregressive",
                    block="none", draft_limit="none",
                    config_reader="llama_layer", config_hints=("eagle",)),
    "eagle3": Family(parallel=False, cache="own_layers", round_cost="autoregressive",
                     block="none", draft_limit="none",
                     config_reader="llama_layer_draft_vocab",
                     config_hints=("eagle3", "draft_vocab_size")),
    "mtp": Family(parallel=False, cache="own_layers", round_cost="autoregressive",
                  block="none", draft_limit="none", target_shaped_layers=True,
                  config_reader="target_modules",
                  config_hints=("num_nextn_predict_layers", "mtp_num_hidden_layers")),
    "medusa": Family(parallel=True, cache="none", round_cost="target_heads",
                     block="none", draft_limit="heads"),
    "p_eagle": Family(parallel=True, cache="own_layers", round_cost="parallel",
                      block="depth", draft_limit="block"),
    "pard": Family(parallel=True, cache="model", round_cost="parallel",
                   block="trained", draft_limit="block"),
    "dflash": Family(parallel=True, cache="own_layers", round_cost="parallel",
                     block="trained", draft_limit="block",
                     config_reader="block", config_hints=("dflash",)),
    "dspark": Family(parallel=True, cache="own_layers", round_cost="parallel",
                     block="trained", draft_limit="block"),
    "dedit": Family(parallel=True, cache="own_layers", round_cost="parallel",
                    block="trained", draft_limit="block"),
    "hspec": Family(parallel=True, cache="none", round_cost="parallel",
                    block="trained", draft_limit="block"),
}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise SpecError(f"unknown drafter family '{name}'; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


@dataclass(frozen=True, slots=True, kw_only=True)
class Drafter:
    """A drafter for one target model; sizes as in its config.json or paper.

    layers, hidden_size, heads, kv heads, head_dim, intermediate_size: its own decoder layers
    (for a separate small LLM, those of `model`). vocab_size: rows of the LM head it evaluates
    (a reduced draft vocabulary for EAGLE-3). block_size: positions per pass of a parallel
    drafter (0 for autoregressive ones). fused_target_layers: target hidden states fused into
    its input (an fc of fused * hidden -> hidden). heads: Medusa's number of heads.
    checkpoint: the published Hugging Face id of its weights ("" where none is public);
    trained_for: the Hugging Face id of the target it was trained for ("" for a stock LLM).
    """

    slug: str
    name: str
    family: str
    target: Model
    layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    own_lm_head: bool = False
    fused_target_layers: int = 0
    block_size: int = 0
    max_draft_tokens: int = 0
    markov_rank: int = 0
    edit_passes: int = 0
    medusa_heads: int = 0
    attention_window: int = 0
    model: Model | None = None
    weight_dtype: str = "bf16"
    acceptance: AcceptanceProfile | None = None
    checkpoint: str = ""
    trained_for: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    path: str = ""

    def __post_init__(self) -> None:
        fam = family(self.family)
        if fam.cache == "model" and self.model is None:
            raise SpecError(f"{self.path}: family '{self.family}' needs field 'model'")
        if fam.block != "none" and self.block_size < 2:
            raise SpecError(f"{self.path}: field 'block_size' must be >= 2 for a parallel drafter")
        if self.num_attention_heads % self.num_kv_heads:
            raise SpecError(f"{self.path}: field 'num_attention_heads' = {self.num_attention_heads}"
                            f" is not divisible by 'num_kv_heads' = {self.num_kv_heads}")

    @property
    def kind(self) -> Family:
        return family(self.family)

    @property
    def is_parallel(self) -> bool:
        return self.kind.parallel

    @property
    def draft_limit(self) -> int:
        """Most draft tokens one round can propose (0 = no limit of the architecture)."""
        if self.max_draft_tokens:
            return self.max_draft_tokens
        rule = self.kind.draft_limit
        if rule == "heads":
            return self.medusa_heads
        return self.block_size - 1 if rule == "block" else 0

    def layer_params(self) -> float:
        """Parameters of one of its decoder layers (attention + gated MLP + norms)."""
        d = self.hidden_size
        attn = d * (self.num_attention_heads + 2 * self.num_kv_heads) * self.head_dim \
            + self.num_attention_heads * self.head_dim * d
        return float(attn + 3 * d * self.intermediate_size + 2 * d)

    def params(self) -> float:
        """Parameters the drafter adds to the deployment (shared target weights excluded)."""
        if self.model is not None and self.kind.cache == "model":
            return model_weight_bytes(self.model) / self.model.bytes_per_param
        d = self.hidden_size
        total = self.layers * self.layer_params()
        total += self.fused_target_layers * d * d  # fc fusing target hidden states
        total += self.vocab_size * d * self.own_lm_head
        total += 2 * self.markov_rank * self.target.vocab_size  # low-rank transition table
        # Medusa-1 heads: a residual block (d x d + bias) and an LM head of their own each
        total += self.medusa_heads * (d * d + d + self.target.vocab_size * d)
        return float(total)

    def weight_bytes(self) -> float:
        if self.model is not None and self.kind.cache == "model":
            return model_weight_bytes(self.model)
        return self.params() * BYTES_PER_PARAM[self.weight_dtype]

    def cache_layout(self, *, tp: int = 1, kv_dtype: str = "bf16") -> CacheLayout:
        """What the drafter keeps per request between rounds, on one GPU of a TP group."""
        kind = self.kind.cache
        if kind == "none":
            return CacheLayout()
        if kind == "model":
            assert self.model is not None
            return kv_layout(self.model, tp=tp, kv_dtype=kv_dtype)
        if self.kind.target_shaped_layers:
            per_token = self.layers \
                * attention_layer_kv_bytes_per_token(self.target, tp=tp, kv_dtype=kv_dtype)
        else:
            per_token = kv_bytes_per_token(kv_heads=self.num_kv_heads, head_dim=self.head_dim,
                                           layers=self.layers, tp=tp, kv_dtype=kv_dtype)
        return CacheLayout(segments=(CacheSegment(bytes_per_token=per_token),))


def load_drafter(name: str, *, target: Model | None = None) -> Drafter:
    """Load a drafter by slug or path; `target` overrides the spec's own target model."""
    path = resolve_path("drafters", name)
    spec = read_spec_file(path)
    f = Fields(spec.data, spec.path)
    try:
        drafter = _build(f, spec.sources, spec.path, path.stem, target)
        f.check_unknown()
        return drafter
    except SpecError as err:
        message = str(err)
        raise SpecError(message if message.startswith(spec.path) else f"{spec.path}: {message}") \
            from None


def _build(f: Fields, sources: dict[str, str], path: str, slug: str, target: Model | None
           ) -> Drafter:
    fam_name = f.choice("family", tuple(FAMILIES))
    named_target = f.string("target")
    tgt = target or load_model(named_target)
    if target is not None:
        resolve_path("models", named_target)  # the spec's own target must exist too
    small = load_model(f.string("model")) if f.has("model") else None
    base = small or tgt
    hidden = f.integer("hidden_size", base.hidden_size, minimum=1)
    block = f.sub("acceptance", required=False)
    return Drafter(
        slug=slug, name=read_display_name(f), family=fam_name, target=tgt,
        layers=f.integer("layers", base.num_layers if small else 1, minimum=0),
        hidden_size=hidden,
        num_attention_heads=f.integer("num_attention_heads", base.num_attention_heads, minimum=1),
        num_kv_heads=f.integer("num_kv_heads", base.num_kv_heads, minimum=1),
        head_dim=f.integer("head_dim", base.head_dim, minimum=1),
        intermediate_size=f.integer("intermediate_size", base.intermediate_size, minimum=1),
        vocab_size=f.integer("vocab_size", base.vocab_size, minimum=1),
        own_lm_head=f.boolean("own_lm_head", False),
        fused_target_layers=f.integer("fused_target_layers", 0),
        block_size=f.integer("block_size", 0),
        max_draft_tokens=f.integer("max_draft_tokens", 0),
        markov_rank=f.integer("markov_rank", 0),
        edit_passes=f.integer("edit_passes", 0),
        medusa_heads=f.integer("medusa_heads", 0),
        attention_window=f.integer("attention_window", 0),
        model=small, weight_dtype=f.string("weight_dtype", "bf16"),
        acceptance=acceptance_profile(block, path) if block else None,
        checkpoint=read_checkpoint(f, "checkpoint") if f.has("checkpoint") else "",
        trained_for=read_hub_id(f, "trained_for") if f.has("trained_for") else "",
        sources=sources, path=path,
    )
