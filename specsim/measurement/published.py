"""Published speculative-decoding measurements (workloads/published/*.yaml), checked on load.

Each file holds the rows of one source; a row names its model, GPU, engine, batch, method,
shape, drafted tokens and depth (with `assumed` listing those the source does not give), the
published tau (tokens per round, bonus included) and the measured speedup or tokens/s. A row of
method `plain` measures plain decoding (its `baseline_tokens_per_s` or `tpot_ms`): one
decoding step.

Every row says how it was measured (`benchmark`): a closed `batch` (the requests start together
and decode side by side; `requests` prompts run `batch` at a time) or a `concurrency` benchmark
(clients keep `batch` requests in flight; new requests arrive as others finish, so their prompts
are prefilled between decoding steps). A concurrency row states its prompt and output lengths
(`input_tokens`, `output_tokens`) and whether its number includes the requests' own prefill
(`prefill_included`: output throughput and end-to-end latency do; TPOT does not).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from specsim.errors import SpecError
from specsim.forward.memory import check_ep
from specsim.measurement.pool import MAX_CV
from specsim.specs.defaults import MAX_BATCH, MAX_CONTEXT_TOKENS, MAX_TP, MAX_TREE_NODES
from specsim.specs.dtypes import BYTES_PER_PARAM, SIXTEEN_BIT
from specsim.specs.fields import MAX_INTEGER, MAX_NUMBER, check_keys, closest, show
from specsim.specs.io import read_yaml
from specsim.specs.models import load_model
from specsim.specs.paths import builtin_names, resolve_path

NO_DRAFTER_MODEL = "none"  # drafter_spec of a row whose drafting needs no model (prompt lookup)
REQUIRED = ("id", "source", "model", "hardware", "engine", "batch", "benchmark", "dataset",
            "method", "shape")
BENCHMARKS = ("batch", "concurrency")  # a closed batch, or clients keeping `batch` in flight
# Every key a published file and a row may hold; any other key is an error naming the closest
# one. A new field is one line here (and its reader, if it is read).
FILE_KEYS = ("about", "rows", "fit")
# `fit: false` on a file: its rows test the model and are never fitted on (engine terms come
# from the other files; every row is still predicted, held out by source as all are).
ROW_KEYS = (
    *REQUIRED,
    "engine_version", "tp", "ep", "group", "temperature", "weight_dtype",  # setup as published
    "kv_dtype",  # the KV cache's dtype where the source ran a quantized one (default bf16)
    "drafter", "drafter_spec", "drafter_takes_target_width",  # the drafter, and its spec
    "drafter_spec_stands_in",  # the spec stands for another checkpoint made for this target
    "draft_tokens", "depth", "topk",  # speculation setting
    "tau", "acceptance_rate", "speedup", "baseline_tokens_per_s", "spec_tokens_per_s",  # measured
    "tpot_ms",  # measured plain-decoding time per output token of one request, ms
    "input_tokens", "output_tokens", "prefill_included",  # how a concurrency run was measured
    "context",  # cached tokens per request while decoding, when the source states it
    "sweep_reference",  # the row of the same sweep its speedup is compared with (no tau)
    "versus",  # another speculative row at the same batch: `speedup` is over it (both with tau)
    "requests",  # prompts the benchmark ran, `batch` at a time (None: the batch stayed full)
    "output_cv",  # spread of those prompts' output lengths (coefficient of variation; 0: equal)
    "spec_overlap",  # the engine overlapped speculative rounds' host work (SGLang spec v2)
    "max_running",  # requests the server ran at once with speculation, where not its default
    "assumed", "assumption", "notes",  # what the source does not give, and remarks
)
# Fields that hold text (names, ids, prose): a number, list or mapping there is a mistake,
# which str() would have turned into a name, a source or a note.
TEXT_KEYS = ("id", "source", "model", "hardware", "engine", "benchmark", "dataset", "method",
             "shape", "engine_version", "group", "weight_dtype", "kv_dtype", "drafter",
             "drafter_spec",
             "sweep_reference", "versus", "assumption", "notes")
# Caps on a row's counts, those of the CLI's options for the same quantities (a batch of 10**9
# or a TP of 10**6 is a typo, and the TP one was reported as the option --tp).
CAPS = {"batch": MAX_BATCH, "tp": MAX_TP, "ep": MAX_TP, "draft_tokens": MAX_TREE_NODES,
        "depth": MAX_TREE_NODES, "input_tokens": MAX_CONTEXT_TOKENS,
        "output_tokens": MAX_CONTEXT_TOKENS}
# The method of a plain-decoding row (a measured decoding step, tokens/s without speculation).
PLAIN = "plain"
# An engine specsim has no spec for: its rows are listed, never predicted.
OTHER_ENGINE = "other"
# A research stack whose rounds are kernel time (torch.compile with CUDA graphs, as MagicDec's
# gpt-fast loop): predicted with the engine of no host terms, the idealized roofline.
ROOFLINE_ENGINE = "roofline"


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRow:
    """One published measurement; tau or speedup may be missing (then it is not predicted)."""

    id: str
    file: str
    source: str
    model: str
    hardware: str
    engine: str
    batch: int
    tp: int
    dataset: str
    method: str
    group: str
    drafter_spec: str | None  # built-in drafter whose architecture times the drafting
    drafter_takes_target_width: bool  # its layer copies the target's width (EAGLE, DFlash)
    # The drafter measured is another checkpoint, made for this row's target, whose
    # architecture the spec stands for (Medusa heads for Vicuna-13B timed as the 7B's): the
    # compatibility check of a deployment does not apply.
    drafter_spec_stands_in: bool
    shape: str
    draft_tokens: int | None
    depth: int | None
    tau: float | None
    speedup: float | None
    baseline_tokens_per_s: float | None  # measured plain-decoding tokens/s (all requests)
    spec_tokens_per_s: float | None  # measured tokens/s with speculation (all requests)
    assumed: tuple[str, ...]
    weight_dtype: str = ""  # stored weights when they differ from the model's ('' = its own)
    kv_dtype: str = "bf16"  # the KV cache's dtype
    ep: int = 1  # GPUs the routed experts are spread over (expert parallel); 1: none
    # A batch sweep without tau: the id of the sweep's row this row's speedup is divided by
    # (same setting, another batch); tau cancels in the ratio, so the row tests the trend.
    sweep_reference: str | None = None
    # Another speculative setting measured at the same batch on the same stack: this row's
    # `speedup` is its tokens/s over that row's (e.g. P-EAGLE over EAGLE-3); both publish tau,
    # so the ratio tests the two rounds' times against each other.
    versus: str | None = None
    # Prompts the benchmark ran, `batch` of them in flight at a time (clients that each send
    # the next prompt when theirs is done). When it is not a multiple of the batch, the run
    # ends at a smaller batch; None: enough prompts to keep the batch full.
    requests: int | None = None
    # Coefficient of variation of the output tokens of one client's request (all its turns):
    # with `requests` the batch drains as the shorter ones end (specsim.measurement.pool);
    # 0: equal lengths, the run goes in waves of `batch`.
    output_cv: float = 0.0
    # The engine ran its speculative rounds' host work while the GPU ran (SGLang's spec v2
    # overlap scheduler); false: synchronous rounds, as in SGLang before spec v2.
    spec_overlap: bool = False
    # Requests the server ran at once with speculation, where the launch (its
    # --max-running-requests) or the engine's version set another cap than the engine
    # profile's default (`Engine.spec_max_running`); None: that default.
    max_running: int | None = None
    benchmark: str = "batch"  # BENCHMARKS: a closed batch or a concurrency benchmark
    # measured time per output token of one request, ms: a plain step, or a speculative row's
    # round over its tau
    tpot_ms: float | None = None
    input_tokens: int | None = None  # prompt tokens per request (a concurrency row: required)
    output_tokens: int | None = None  # output tokens per request (a concurrency row: required)
    prefill_included: bool = False  # the number includes the requests' own prefill
    context: float | None = None  # cached tokens per request while decoding, as stated
    fit: bool = True  # engine terms may be fitted on it (false: its file tests only)
    path: str = ""  # the file it was read from

    @property
    def source_key(self) -> str:
        """The publication the row comes from (its source's address): held out as one."""
        return self.source.split()[0]

    @property
    def concurrency(self) -> bool:
        """Measured with clients keeping `batch` requests in flight (prompts prefilled between
        decoding steps), not as a closed batch."""
        return self.benchmark == "concurrency"

    @property
    def plain(self) -> bool:
        """A plain-decoding row: it measures one decoding step, no speculation."""
        return self.method == PLAIN


def load_published(names: list[str] | None = None) -> list[PublishedRow]:
    """Rows of the given files (slugs or paths; default every built-in file)."""
    rows: list[PublishedRow] = []
    for name in names if names is not None else builtin_names("published"):
        path = resolve_path("published", name)
        data = read_yaml(path)
        check_keys(data, FILE_KEYS, str(path))
        items = data.get("rows")
        if not isinstance(items, list):
            raise SpecError(f"{path}: field 'rows' must be a list of rows")
        if not items:
            raise SpecError(f"{path}: field 'rows' is empty; nothing to validate")
        fit = data.get("fit", True)
        if not isinstance(fit, bool):
            raise SpecError(f"{path}: field 'fit' must be true or false, got {show(fit)}")
        rows += [_row(item, path, i, fit) for i, item in enumerate(items)]
    _check_unique(rows)
    _check_sweeps(rows)
    _check_versus(rows)
    return rows


def _check_unique(rows: list[PublishedRow]) -> None:
    """Every row id once: validate reports, fits and excludes rows by id."""
    seen: dict[str, PublishedRow] = {}
    for r in rows:
        first = seen.setdefault(r.id, r)
        if first is not r:
            raise SpecError(f"{r.path or r.file}: row {show(r.id, 40)}: field 'id' is also the "
                            f"id of a row of {first.path or first.file}; ids must be unique")


def _check_setting(row: PublishedRow, where: str) -> None:
    """What a round can hold: a draft no deeper than its tokens (a chain exactly as deep),
    and tau, which counts the bonus token, between 1 and depth + 1."""
    if row.depth is not None and row.draft_tokens is not None:
        if row.depth > row.draft_tokens:
            raise SpecError(f"{where}: field 'depth' = {row.depth} exceeds draft_tokens = "
                            f"{row.draft_tokens}: a draft is no deeper than its tokens")
        if row.shape == "chain" and row.depth != row.draft_tokens:
            raise SpecError(f"{where}: field 'depth' = {row.depth} must equal draft_tokens = "
                            f"{row.draft_tokens} for a chain")
    if row.tau is None:
        return
    if row.tau < 1.0:
        raise SpecError(f"{where}: field 'tau' = {row.tau:g} is below 1: tau counts the bonus "
                        "token (tokens per round); add 1 to a count of accepted drafts")
    if row.depth is not None and row.tau > row.depth + 1:
        raise SpecError(f"{where}: field 'tau' = {row.tau:g} exceeds depth + 1 = "
                        f"{row.depth + 1}, the most tokens a round of that draft can yield")


def _referenced(by_id: dict[str, PublishedRow], row: PublishedRow, field: str
                ) -> tuple[str, PublishedRow]:
    """The other row of the same file that `row`'s `field` names, and where to say so."""
    name = getattr(row, field)
    where = f"{row.path or row.file}: row {show(row.id, 40)}: field '{field}'"
    ref = by_id.get(name)
    # the same file by its path: a/p.yaml and b/p.yaml share a stem, and a row of one
    # named a row of the other
    if ref is None or (ref.path, ref.file) != (row.path, row.file) or ref.id == row.id:
        raise SpecError(f"{where}: no other row {name!r} in the same file")
    return where, ref


def _check_sweeps(rows: list[PublishedRow]) -> None:
    """A sweep reference names another row of the same file, with a speedup and no reference
    of its own, in the same setting but for the batch."""
    by_id = {r.id: r for r in rows}
    for r in rows:
        if r.sweep_reference is None:
            continue
        where, ref = _referenced(by_id, r, "sweep_reference")
        if ref.sweep_reference is not None or ref.speedup is None or r.speedup is None:
            raise SpecError(f"{where}: both rows need a measured speedup, and the reference "
                            "no reference of its own")
        same = ("model", "hardware", "engine", "tp", "ep", "method", "drafter_spec", "shape",
                "draft_tokens", "depth", "weight_dtype", "kv_dtype", "requests", "output_cv",
                "spec_overlap")
        differ = [k for k in same if getattr(ref, k) != getattr(r, k)]
        if differ:
            raise SpecError(f"{where}: the reference differs in {', '.join(differ)}")


def _check_versus(rows: list[PublishedRow]) -> None:
    """A `versus` row names another speculative row of the same file with a tau, at the same
    batch and setup (model, GPU, engine, parallelism, weights, benchmark); both rows publish
    tau, and this one the speedup over it."""
    by_id = {r.id: r for r in rows}
    for r in rows:
        if r.versus is None:
            continue
        where, ref = _referenced(by_id, r, "versus")
        if r.plain or ref.plain or r.tau is None or ref.tau is None or r.speedup is None:
            raise SpecError(f"{where}: both rows speculate and publish tau, and this one its "
                            "speedup over the other")
        same = ("model", "hardware", "engine", "tp", "ep", "batch", "weight_dtype", "kv_dtype",
                "requests", "output_cv", "spec_overlap", "benchmark")
        differ = [k for k in same if getattr(ref, k) != getattr(r, k)]
        if differ:
            raise SpecError(f"{where}: the row compared with differs in {', '.join(differ)}")


def _row(item: object, path: Path, index: int, fit: bool = True) -> PublishedRow:
    where = f"{path}: row {index + 1}"
    if not isinstance(item, dict):
        raise SpecError(f"{where}: must be a mapping of fields")
    if "id" in item:
        where = f"{path}: row {show(item['id'], 40)}"
    check_keys(item, ROW_KEYS, where)
    for key in REQUIRED:
        if item.get(key) in (None, ""):
            raise SpecError(f"{where}: field '{key}' is missing")
    _check_text(item, where)
    _check_known(where, "models", str(item["model"]))
    _check_known(where, "hardware", str(item["hardware"]))
    if item["engine"] not in (OTHER_ENGINE, ROOFLINE_ENGINE):
        _check_known(where, "engines", str(item["engine"]))
        _check_serves(where, str(item["engine"]), str(item["hardware"]))
    row = PublishedRow(
        id=str(item["id"]), file=path.stem, source=str(item["source"]),
        model=str(item["model"]), hardware=str(item["hardware"]), engine=str(item["engine"]),
        batch=_int(item, "batch", where), tp=_int(item, "tp", where, 1),
        dataset=str(item["dataset"]), method=str(item["method"]),
        group=str(item.get("group") or item["method"]),
        drafter_spec=_drafter_spec(item, where),
        drafter_takes_target_width=_bool(item, "drafter_takes_target_width", where),
        drafter_spec_stands_in=_bool(item, "drafter_spec_stands_in", where),
        shape=str(item["shape"]),
        draft_tokens=_optional_int(item, "draft_tokens", where),
        depth=_optional_int(item, "depth", where),
        tau=_optional_number(item, "tau", where), speedup=_optional_number(item, "speedup", where),
        baseline_tokens_per_s=_optional_number(item, "baseline_tokens_per_s", where),
        spec_tokens_per_s=_optional_number(item, "spec_tokens_per_s", where),
        assumed=_assumed(item, where),
        weight_dtype=_weight_dtype(item, where), kv_dtype=_kv_dtype(item, where),
        sweep_reference=None if item.get("sweep_reference") is None
        else str(item["sweep_reference"]), requests=_optional_int(item, "requests", where),
        output_cv=_output_cv(item, where),
        versus=None if item.get("versus") is None else str(item["versus"]),
        spec_overlap=_bool(item, "spec_overlap", where), ep=_ep(item, where),
        max_running=_optional_int(item, "max_running", where),
        benchmark=_benchmark(item, where), tpot_ms=_optional_number(item, "tpot_ms", where),
        input_tokens=_optional_int(item, "input_tokens", where),
        output_tokens=_optional_int(item, "output_tokens", where),
        prefill_included=_bool(item, "prefill_included", where),
        context=_optional_number(item, "context", where, MAX_CONTEXT_TOKENS), fit=fit,
        path=str(path))
    _check_unread(item, where)
    _check_setting(row, where)
    _check_benchmark(row, "prefill_included" in item, where)
    return row


def _output_cv(item: dict[str, object], where: str) -> float:
    """The spread of the pool's output lengths: a number within 0-MAX_CV, for a row whose
    `requests` make a pool that drains (0 without one)."""
    value = item.get("output_cv")
    if value is None:
        return 0.0
    if not isinstance(value, int | float) or isinstance(value, bool) or \
            not 0.0 <= value <= MAX_CV:
        raise SpecError(f"{where}: field 'output_cv' must be a number within 0-{MAX_CV:g} (the "
                        f"coefficient of variation of a request's output tokens), got "
                        f"{show(value)}")
    if value and item.get("requests") is None:
        raise SpecError(f"{where}: field 'output_cv' needs 'requests': the spread of output "
                        "lengths matters where a pool of prompts drains at its end")
    return float(value)


def _benchmark(item: dict[str, object], where: str) -> str:
    value = item["benchmark"]
    if value not in BENCHMARKS:
        raise SpecError(f"{where}: field 'benchmark' must be 'batch' (a closed batch) or "
                        f"'concurrency' (clients keeping `batch` requests in flight), got "
                        f"{show(value)}")
    return str(value)


def _check_benchmark(row: PublishedRow, says_prefill: bool, where: str) -> None:
    """A concurrency row states the lengths its prefill load follows from and whether its
    number includes the requests' own prefill (`says_prefill`); a measured TPOT is a plain
    row's."""
    if row.concurrency:
        for key in ("input_tokens", "output_tokens"):
            if getattr(row, key) is None:
                raise SpecError(f"{where}: field '{key}' is missing: a concurrency row needs "
                                "its prompt and output lengths (input_tokens, output_tokens), "
                                "from which the prefill sharing its decoding steps follows")
        if not says_prefill:
            raise SpecError(f"{where}: field 'prefill_included' is missing: a concurrency row "
                            "says whether its number includes the requests' own prefill (true "
                            "for output throughput or end-to-end latency, false for TPOT)")
        if row.requests is not None:
            raise SpecError(f"{where}: field 'requests' is for a closed batch run in waves; a "
                            "concurrency run keeps `batch` requests in flight")
    if row.tpot_ms is not None and not row.plain and row.tau is None:
        raise SpecError(f"{where}: field 'tpot_ms' of a speculative row needs its 'tau' (the "
                        "measured time per output token is a round over the tokens it yields)")


def _dtype(item: dict[str, object], where: str, field: str, default: str) -> str:
    """A dtype field of the row (`default` where absent), one of specsim's dtypes."""
    value = str(item.get(field) or default)
    if value not in BYTES_PER_PARAM:
        raise SpecError(f"{where}: field '{field}' must be one of "
                        f"{', '.join(BYTES_PER_PARAM)}, got {value!r}")
    return value


def _weight_dtype(item: dict[str, object], where: str) -> str:
    """The row's weight dtype ('' for bf16/fp16 or none: the model's own)."""
    value = _dtype(item, where, "weight_dtype", "bf16")
    return "" if value in SIXTEEN_BIT else value


def _kv_dtype(item: dict[str, object], where: str) -> str:
    """The row's KV-cache dtype (bf16 unless the source ran another)."""
    return _dtype(item, where, "kv_dtype", "bf16")


def _drafter_spec(item: dict[str, object], where: str) -> str | None:
    """The row's drafter spec: a built-in slug, "none" for drafting without a model (prompt
    lookup), None when the row names none (it cannot be predicted)."""
    value = item.get("drafter_spec")
    if value is None:
        return None
    name = str(value)
    if name != NO_DRAFTER_MODEL:
        _check_known(where, "drafters", name)
    return name


def _check_serves(where: str, engine: str, hardware: str) -> None:
    """A row measured on an engine that does not serve on its GPU's vendor (TensorRT-LLM on
    an AMD GPU) is a mistake in the row: refused, naming the field."""
    from specsim.engines import check_engine_serves

    try:
        check_engine_serves(engine, _vendor(hardware), hardware)
    except SpecError as err:
        raise SpecError(f"{where}: field 'engine': {err}") from None


@functools.cache
def _vendor(hardware: str) -> str:
    """The vendor of a built-in GPU (rows name built-in ones only, `_check_known`): read once,
    not once per row (a profile read is ~1 ms, 231 rows a load)."""
    from specsim.specs.hardware import load_hardware

    return load_hardware(hardware).vendor


def _check_known(where: str, kind: str, name: str) -> None:
    names = builtin_names(kind)
    if name not in names:
        raise SpecError(f"{where}: unknown {kind.rstrip('s')} '{name}'{closest(name, names)}; "
                        f"`specsim {kind} list` shows the built-in ones")


def _int(item: dict[str, object], key: str, where: str, default: int | None = None) -> int:
    value = item.get(key, default)
    cap = CAPS.get(key, MAX_INTEGER)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= cap:
        raise SpecError(f"{where}: field '{key}' must be an integer in 1..{cap:,}, "
                        f"got {show(value)}")
    return value


def _check_text(item: dict[str, object], where: str) -> None:
    """Names, ids and prose are strings (a mapping as the source was kept as its repr)."""
    for key in TEXT_KEYS:
        value = item.get(key)
        if value is not None and not isinstance(value, str):
            raise SpecError(f"{where}: field '{key}' must be text, got {show(value)}")


def _assumed(item: dict[str, object], where: str) -> tuple[str, ...]:
    """`assumed`: what the source does not give, a list of texts ('assumed: 5' was a
    TypeError, a string was split into characters)."""
    value = item.get("assumed")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise SpecError(f"{where}: field 'assumed' must be a list of texts, got {show(value)}")
    return tuple(value)


def _check_unread(item: dict[str, object], where: str) -> None:
    """Fields kept as published but not used by a prediction, checked all the same: the
    sampling temperature (>= 0), the tree's top-k (a count) and the acceptance rate (a
    fraction)."""
    _optional_int(item, "topk", where)
    for key, high in (("temperature", MAX_NUMBER), ("acceptance_rate", 1.0)):
        value = item.get(key)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)
                                  or not 0 <= value <= high):
            raise SpecError(f"{where}: field '{key}' must be a number in 0..{high:g}, "
                            f"got {show(value)}")


def _ep(item: dict[str, object], where: str) -> int:
    """The row's expert-parallel degree: 1, or a divisor of its MoE model's routed experts."""
    ep = _int(item, "ep", where, 1)
    if ep == 1:  # no expert parallelism: nothing to check against the model
        return ep
    try:
        check_ep(load_model(str(item["model"])), ep)
    except SpecError as err:
        raise SpecError(f"{where}: field 'ep': {err}") from None
    return ep


def _bool(item: dict[str, object], key: str, where: str) -> bool:
    value = item.get(key, False)
    if not isinstance(value, bool):
        raise SpecError(f"{where}: field '{key}' must be true or false, got {show(value)}")
    return value


def _optional_int(item: dict[str, object], key: str, where: str) -> int | None:
    return None if item.get(key) is None else _int(item, key, where)


def _optional_number(item: dict[str, object], key: str, where: str,
                     high: float = MAX_NUMBER) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or \
            not 0 < value <= high or value == MAX_NUMBER:
        limit = "a positive finite number" if high == MAX_NUMBER else f"a number in (0, {high:,}]"
        raise SpecError(f"{where}: field '{key}' must be {limit}, got {show(value)}")
    return float(value)
