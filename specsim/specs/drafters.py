"""Drafter specs: the family, the architecture numbers, what the drafter keeps per request.

A drafter is described by its own layers (width, heads, MLP), what it reads from the target
(fused hidden states, the target's LM head or its own over a draft vocabulary), how many
positions one pass drafts (a parallel drafter's block), and its family, which decides how many
sequential passes a round takes and what cache it keeps (DESIGN.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

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
from specsim.specs.fields import MAX_LAYERS, Fields
from specsim.specs.io import read_spec_file
from specsim.specs.models import Model, load_model, query_width_problem
from specsim.specs.names import read_checkpoint, read_display_name, read_hub_id
from specsim.specs.params import weight_bytes as model_weight_bytes
from specsim.specs.paths import resolve_path
from specsim.specs.workloads import acceptance_profile

# What a drafter keeps per request (its memory) and reads each pass (docs/drafters.md):
# own_layers: K/V of its own layers for the whole context (EAGLE, DFlash); own_window: its own
# K/V for the last `cache_window` tokens only (LongSpec's sliding window); model: a separate
# small LLM's full cache; none: nothing that grows with the context; target: nothing of its
# own, it reads the target's K/V in place (through `cache_window` if given: self-speculation,
# GliDe, Gemma 4's MTP assistant); state: a fixed-size recurrent state of `state_elems`
# numbers (ReDrafter, OWL); sparse_copy: a copy of `cache_budget` tokens of the
# target's cache (MagicDec's StreamingLLM draft, TriForce); quantized_copy: a copy of the
# target's cache at `cache_dtype` (QuantSpec), within `cache_budget` tokens if given.
Cache = Literal["own_layers", "own_window", "model", "none", "target", "state", "sparse_copy",
                "quantized_copy"]
WINDOWED: tuple[Cache, ...] = ("own_window", "target")  # kinds a `cache_window` applies to
RoundCost = Literal["autoregressive", "parallel", "target_heads", "lookup",
                    "recurrent_cell"]
BlockRule = Literal["none", "trained", "depth"]
DraftLimitRule = Literal["none", "block", "heads"]
FloatArray = npt.NDArray[np.float64]
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
    target_shaped_layers: its layers have the target's own layout (MTP, self-speculation).
    other_caches: cache kinds a spec of the family may choose (`cache:`) besides `cache`, its
    default; any other is refused. is_target: it drafts with the target's own layers and
    weights (self-speculation), adding no weights of its own. reuses_drafted_layers: its
    `layers` are the target's first layers and verification runs only the rest over the draft
    (their K/V and outputs are kept from drafting: LayerSkip). reads_target_kv: besides its
    own cache, every pass cross-attends to the target's K/V of the whole context, in place
    (GliDe, LongSpec).
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
    other_caches: tuple[Cache, ...] = ()
    reads_target_kv: bool = False
    is_target: bool = False
    reuses_drafted_layers: bool = False
    config_reader: ConfigReader = "none"
    config_hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        rules: list[tuple[str, object]] = [
            (self.cache, Cache), (self.round_cost, RoundCost), (self.block, BlockRule),
            (self.draft_limit, DraftLimitRule), (self.config_reader, ConfigReader)]
        rules += [(c, Cache) for c in self.other_caches]
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
    # Drafting with the target's own first layers (LayerSkip's early exit, Draft & Verify's
    # skipped layers): its layers are the target's, its cache is the target's.
    "self_spec": Family(parallel=False, cache="target", round_cost="autoregressive",
                        block="none", draft_limit="none", target_shaped_layers=True,
                        is_target=True, reuses_drafted_layers=True),
    # A small drafter cross-attending to the target's cache in place (GliDe, Gemma 4's MTP
    # assistant), or with its own sliding window beside it (LongSpec).
    "cross_attention": Family(parallel=False, cache="target", round_cost="autoregressive",
                              block="none", draft_limit="none", other_caches=("own_window",),
                              reads_target_kv=True),
    # A recurrent cell over the target's last hidden state and a residual MLP head, one step
    # per drafted level, keeping a fixed-size state (ReDrafter's RNN, OWL's LSTM).
    "recurrent": Family(parallel=False, cache="state", round_cost="recurrent_cell",
                        block="none", draft_limit="none"),
    # The target drafting over a sparse copy of its cache (MagicDec, TriForce).
    "sparse_self_spec": Family(parallel=False, cache="sparse_copy", round_cost="autoregressive",
                               block="none", draft_limit="none", target_shaped_layers=True,
                               is_target=True),
    # The target drafting over a quantized copy of its cache (QuantSpec).
    "quantized_self_spec": Family(parallel=False, cache="quantized_copy",
                                  round_cost="autoregressive", block="none", draft_limit="none",
                                  target_shaped_layers=True),
    # Drafting by string matching, no model: n-grams of the prompt and output (prompt lookup)
    # or a suffix tree over earlier outputs (suffix decoding).
    "ngram": Family(parallel=True, cache="none", round_cost="lookup", block="none",
                    draft_limit="none"),
    "suffix": Family(parallel=True, cache="none", round_cost="lookup", block="none",
                     draft_limit="none"),
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
    cache: what it keeps per request (`Cache`; None: its family's); cache_window: tokens of a
    windowed cache (own_window, or a target cache read through a window); cache_budget: tokens
    of a sparse (or budgeted quantized) copy of the target's cache; cache_dtype: a quantized
    copy's dtype; state_elems: numbers of a recurrent drafter's state per request (its cell's
    width); recurrent_gates: the cell's gates (1 for a plain RNN, 3 GRU, 4 LSTM); lookup_tokens:
    token ids a string-matching drafter scans per request per round (0: the whole context).
    A recurrent drafter's `layers` are residual MLP blocks of `hidden_size` (ReDrafter's
    ResBlocks), its LM head its own (`own_lm_head`) over `vocab_size`.
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
    cache: Cache | None = None
    cache_window: int = 0
    cache_budget: int = 0
    cache_dtype: str = ""
    state_elems: int = 0
    recurrent_gates: int = 1
    lookup_tokens: int = 0
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
        self._check_cache(fam)
        if self.num_attention_heads % self.num_kv_heads:
            raise SpecError(f"{self.path}: field 'num_attention_heads' = {self.num_attention_heads}"
                            f" is not divisible by 'num_kv_heads' = {self.num_kv_heads}")

    @property
    def kind(self) -> Family:
        return family(self.family)

    @property
    def cache_kind(self) -> Cache:
        """What it keeps per request: the spec's `cache`, else its family's."""
        return self.cache or self.kind.cache

    def _check_cache(self, fam: Family) -> None:
        """The cache kind is one its family allows, with the numbers that kind needs."""
        kind = self.cache_kind
        allowed = (fam.cache, *fam.other_caches)
        if kind not in allowed:
            raise SpecError(f"{self.path}: field 'cache' = {kind!r} contradicts family "
                            f"'{self.family}', which keeps {' or '.join(map(repr, allowed))}")
        needs = {"own_window": ("cache_window", "a windowed cache needs its window in tokens"),
                 "state": ("state_elems", "a recurrent state needs its size"),
                 "sparse_copy": ("cache_budget", "a sparse copy needs its token budget")}
        if kind in needs and getattr(self, needs[kind][0]) < 1:
            field_name, why = needs[kind]
            raise SpecError(f"{self.path}: field '{field_name}' is missing for cache {kind!r}: "
                            f"{why}")
        if kind == "quantized_copy" and self.cache_dtype not in BYTES_PER_PARAM:
            raise SpecError(f"{self.path}: field 'cache_dtype' = {self.cache_dtype!r} must be "
                            f"one of {', '.join(BYTES_PER_PARAM)} for cache 'quantized_copy'")
        given = {"cache_window": kind in WINDOWED, "state_elems": kind == "state",
                 "cache_budget": kind in ("sparse_copy", "quantized_copy"),
                 "cache_dtype": kind == "quantized_copy"}
        for name, applies in given.items():
            if getattr(self, name) and not applies:
                raise SpecError(f"{self.path}: field '{name}' does not apply to cache {kind!r}"
                                f" (family '{self.family}')")

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

    def cross_attention_params(self) -> float:
        """Parameters of one layer's cross-attention to the target's cache (its own query and
        output projections; keys and values are the target's), 0 without one."""
        if not self.kind.reads_target_kv:
            return 0.0
        return float(2 * self.hidden_size * self.num_attention_heads * self.head_dim)

    def params(self) -> float:
        """Parameters the drafter adds to the deployment (shared target weights excluded)."""
        if self.kind.is_target:
            return 0.0
        if self.kind.round_cost == "recurrent_cell":
            return float(self.recurrent_params())
        if self.model is not None and self.kind.cache == "model":
            return model_weight_bytes(self.model) / self.model.bytes_per_param
        d = self.hidden_size
        total = self.layers * self.layer_params()
        total += self.layers * self.cross_attention_params()
        total += self.fused_target_layers * d * d  # fc fusing target hidden states
        total += self.vocab_size * d * self.own_lm_head
        total += 2 * self.markov_rank * self.target.vocab_size  # low-rank transition table
        # Medusa-1 heads: a residual block (d x d + bias) and an LM head of their own each
        total += self.medusa_heads * (d * d + d + self.target.vocab_size * d)
        return float(total)

    def recurrent_params(self) -> float:
        """A recurrent drafter's parameters: its cell (gates x (input + state) x state, input =
        the target token's embedding, state = state_elems wide), the projection of [target
        hidden state; cell state] to `hidden_size` where they differ, `layers` residual blocks
        (hidden x hidden + bias) and its LM head."""
        width, d = self.state_elems, self.hidden_size
        cell = self.recurrent_gates * (2 * width * width + width)
        proj = 0 if d == 2 * width else 2 * width * d + d
        return float(cell + proj + self.layers * (d * d + d)
                     + self.vocab_size * d * self.own_lm_head)

    def weight_bytes(self) -> float:
        if self.model is not None and self.kind.cache == "model":
            return model_weight_bytes(self.model)
        return self.params() * BYTES_PER_PARAM[self.weight_dtype]

    def layer_kv_bytes_per_token(self, *, tp: int = 1, kv_dtype: str = "bf16") -> float:
        """Bytes its `layers` attention layers cache per token on one GPU, at `kv_dtype`."""
        if self.kind.target_shaped_layers:
            return self.layers \
                * attention_layer_kv_bytes_per_token(self.target, tp=tp, kv_dtype=kv_dtype)
        return kv_bytes_per_token(kv_heads=self.num_kv_heads, head_dim=self.head_dim,
                                  layers=self.layers, tp=tp, kv_dtype=kv_dtype)

    def cache_layout(self, *, tp: int = 1, kv_dtype: str = "bf16", state_dtype: str = "fp32"
                     ) -> CacheLayout:
        """What the drafter keeps per request between rounds, on one GPU of a TP group."""
        kind = self.cache_kind
        if kind in ("none", "target"):  # nothing, or the target's own cache read in place
            return CacheLayout()
        if kind == "model":
            assert self.model is not None
            return kv_layout(self.model, tp=tp, kv_dtype=kv_dtype)
        if kind == "state":
            return CacheLayout(fixed_bytes_per_request=self.state_elems
                               * BYTES_PER_PARAM[state_dtype] / tp)
        dtype = self.cache_dtype if kind == "quantized_copy" else kv_dtype
        window = {"own_window": self.cache_window, "sparse_copy": self.cache_budget,
                  "quantized_copy": self.cache_budget}.get(kind, 0)
        per_token = self.layer_kv_bytes_per_token(tp=tp, kv_dtype=dtype)
        return CacheLayout(segments=(CacheSegment(bytes_per_token=per_token,
                                                  window=float(window or np.inf)),))

    def context_read(self, context: ArrayLike) -> FloatArray:
        """Tokens of K/V each of its attention layers reads per pass at `context` cached
        tokens per request (same shape): its own cache (all, a window, a budget), the target's
        read in place (through a window), plus the target's whole cache for a cross-attending
        family; 0 for a recurrent state."""
        ctx = np.asarray(context, dtype=np.float64)
        kind = self.cache_kind
        window = {"own_window": self.cache_window, "target": self.cache_window,
                  "sparse_copy": self.cache_budget, "quantized_copy": self.cache_budget,
                  "none": self.attention_window}.get(kind, 0)
        own = np.zeros_like(ctx) if kind == "state" else np.minimum(ctx, window or np.inf)
        if self.kind.reads_target_kv and kind != "target":
            own = own + ctx  # cross-attention to the target's cache beside its own window
        return own


def load_drafter(name: str, *, target: Model | None = None) -> Drafter:
    """Load a drafter by slug or path; `target` overrides the spec's own target model."""
    path = resolve_path("drafters", name)
    spec = read_spec_file(path)
    f = Fields(spec.data, spec.path)
    try:
        drafter = _build(f, spec.sources, spec.path, path.stem, target)
        f.check_unknown()
        _check_against_target(f, drafter)
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
        layers=f.integer("layers", base.num_layers if small else 1, minimum=0,
                         maximum=MAX_LAYERS),
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
        cache=_cache_kind(f),
        cache_window=f.integer("cache_window", 0), cache_budget=f.integer("cache_budget", 0),
        cache_dtype=f.string("cache_dtype") if f.has("cache_dtype") else "",
        state_elems=f.integer("state_elems", 0),
        recurrent_gates=f.integer("recurrent_gates", 1, minimum=1),
        lookup_tokens=f.integer("lookup_tokens", 0),
        model=small, weight_dtype=f.string("weight_dtype", "bf16"),
        acceptance=acceptance_profile(block, path) if block else None,
        checkpoint=read_checkpoint(f, "checkpoint") if f.has("checkpoint") else "",
        trained_for=read_hub_id(f, "trained_for") if f.has("trained_for") else "",
        sources=sources, path=path,
    )


def _check_against_target(f: Fields, drafter: Drafter) -> None:
    """Numbers each in range that contradict the drafter's target or its own layers (one line
    naming the field): more fused target hidden states than the target has layers, more of the
    target's own layers than it has (self-speculation drafts with a prefix of them), query
    heads far wider or narrower than its hidden size (`query_width_problem`)."""
    target = drafter.target
    if drafter.fused_target_layers > target.num_layers:
        raise f.error("fused_target_layers", f"= {drafter.fused_target_layers:,} exceeds the "
                      f"{target.num_layers} layers of target {target.slug} whose hidden states "
                      "it fuses")
    if (drafter.kind.is_target or drafter.kind.reuses_drafted_layers) \
            and drafter.layers > target.num_layers:
        raise f.error("layers", f"= {drafter.layers:,} exceeds the {target.num_layers} layers "
                      f"of target {target.slug}, which family {drafter.family} drafts with")
    own = drafter.model is None and not drafter.kind.target_shaped_layers and drafter.layers
    if own:
        problem = query_width_problem(drafter.num_attention_heads, drafter.head_dim,
                                      drafter.hidden_size)
        if problem is not None:
            raise SpecError(f"{drafter.path}: {problem}")


def _cache_kind(f: Fields) -> Cache | None:
    """The spec's `cache:` (None: its family's)."""
    if not f.has("cache"):
        return None
    value = f.choice("cache", get_args(Cache))
    return next(kind for kind in get_args(Cache) if kind == value)
