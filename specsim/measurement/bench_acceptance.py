"""Acceptance measured by an engine's own benchmark client, as `acceptance fit` writes it.

The result files are read by `specsim.measurement.engine_results` (vLLM ``vllm bench serve
--save-result`` JSON, SGLang ``sglang.bench_serving --output-file`` JSON Lines). Two kinds of
acceptance come out of them:

- per position: vLLM's ``spec_decode_per_position_acceptance_rates`` are the server's counters
  differenced over the timed run, marginal r_k = a_k / n for n rounds with a draft. With n
  (``spec_decode_num_drafts``) they are the same `SpecDecodeCounts` a /metrics page gives, and
  its conditional alpha_k = a_k / a_(k-1) (a_0 = n) is the one conversion both paths use.
- a mean only: tau tokens per round (accepted draft tokens + the bonus token; SGLang's
  ``accept_length``). With the draft length gamma, which SGLang's file does not hold, it is
  written as ``tau`` + ``gamma``, from which a workload derives one constant alpha.

Which input `acceptance fit` was given is told by content: a benchmark result is JSON, its first
non-blank character ``{`` or ``[``; a /metrics page or a server log is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsim.errors import SpecError
from specsim.measurement.engine_results import EngineRun, read_engine_results
from specsim.measurement.vllm_metrics import MAX_POSITIONS, SpecDecodeCounts
from specsim.specs.acceptance import AcceptanceProfile, alpha_from_tau

# Runs of one file whose tokens per round agree within this fraction (max / min - 1) are
# averaged when no run is chosen; beyond it they measured different things.
RUN_AGREEMENT = 0.01
# Enough of a file to see where its first value starts (and a log marker near the top).
PEEK_BYTES = 65536
_LOG_MARKER = b"SpecDecoding metrics:"  # a vLLM log written as JSON lines is still a log

_CLIENTS = {"vllm": "vllm bench serve --save-result", "sglang": "sglang.bench_serving"}
_SERVERS = {"vllm": "vLLM", "sglang": "SGLang"}
_ACCEPTANCE_KEYS = {"vllm": "spec_decode_acceptance_length", "sglang": "accept_length"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchAcceptance:
    """Acceptance of one benchmark run, or the mean of a file's runs that agree.

    Attributes:
        counts: vLLM's counters over the run(s) where the file gives per-position rates and
            the number of drafts; None where it gives only tokens per round.
        tokens_per_round: tau, mean tokens per verification round (accepted draft tokens + 1).
        draft_tokens: gamma, draft tokens per round (positions).
        num_drafts: rounds with a draft the numbers average over (count), None where the file
            does not say (SGLang).
        source: the file, run(s) and line(s), server and client, and the drafts averaged.
    """

    counts: SpecDecodeCounts | None
    tokens_per_round: float
    draft_tokens: int
    num_drafts: float | None
    source: str

    @property
    def per_position(self) -> bool:
        """The file gave per-position rates (else only tokens per round)."""
        return self.counts is not None

    @property
    def profile(self) -> AcceptanceProfile:
        """The chain profile: measured conditional alphas, or tau's constant alpha."""
        if self.counts is not None:
            return AcceptanceProfile(position_alphas=self.counts.to_profile().position_alphas,
                                     source=self.source)
        alpha = float(alpha_from_tau(self.tokens_per_round, self.draft_tokens))
        return AcceptanceProfile(position_alphas=(alpha,), source=self.source,
                                 measured_positions=self.draft_tokens)


def is_bench_result(path: Path) -> bool:
    """A file that holds JSON (first non-blank character { or [) and is not a vLLM log.

    Anything this cannot read (missing, a folder, a device) is left to the metrics reader,
    which names the problem.
    """
    try:
        if not path.is_file():
            return False
        with path.open("rb") as handle:
            head = handle.read(PEEK_BYTES)
    except OSError:
        return False
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1]
    return start in (b"{", b"[") and _LOG_MARKER not in head


def read_bench_acceptance(path: Path | str, *, run: int | None = None,
                          draft_tokens: int | None = None) -> BenchAcceptance:
    """The acceptance a benchmark result file measured.

    Args:
        path: a vLLM --save-result or SGLang --output-file result.
        run: 1-based run of the file to read; None: its only run, or the mean of all its runs
            when their tokens per round agree within RUN_AGREEMENT.
        draft_tokens: gamma, draft tokens per round; needed where the file gives only tokens
            per round (SGLang), checked against the positions where it gives rates.

    Raises:
        SpecError: one line naming the file, the line and the field or option: a file the
            reader refuses, a run that did not speculate, runs that disagree with no run
            chosen, a missing or contradicting draft length.
    """
    runs = read_engine_results(path)
    chosen = _chosen(runs, run, str(path))
    for r in chosen:
        _check_speculated(r)
    if all(r.marginal_acceptance for r in chosen):
        return _per_position(chosen, draft_tokens)
    return _tokens_per_round(chosen, draft_tokens)


def _chosen(runs: list[EngineRun], run: int | None, path: str) -> list[EngineRun]:
    """The run asked for, the only run, or every run when their acceptance agrees."""
    if run is not None:
        if not 1 <= run <= len(runs):
            raise SpecError(f"option --run: {run}, but {path} holds {_runs_text(runs)}; "
                            f"choose 1..{len(runs)}")
        return [runs[run - 1]]
    if len(runs) == 1:
        return runs
    for r in runs:
        _check_speculated(r, hint=f"; choose another run with --run N (1..{len(runs)})")
    taus = [r.tokens_per_round or 1.0 for r in runs]
    spread = max(taus) / min(taus) - 1.0
    if spread > RUN_AGREEMENT or len({len(r.marginal_acceptance) for r in runs}) > 1:
        listed = ", ".join(f"{t:.4g}" for t in taus)
        raise SpecError(f"{path}: {_runs_text(runs)} measured {listed} tokens per round "
                        f"({spread:.1%} apart, more than {RUN_AGREEMENT:.0%}); choose one "
                        f"with --run N (1..{len(runs)})")
    return runs


def _runs_text(runs: list[EngineRun]) -> str:
    """'1 run' or '2 runs (lines 1, 2)'."""
    if len(runs) == 1:
        return "1 run"
    lines = ", ".join(str(r.line) for r in runs if r.line is not None)
    return f"{len(runs)} runs" + (f" (lines {lines})" if lines else "")


def _check_speculated(run: EngineRun, hint: str = "") -> None:
    key = _ACCEPTANCE_KEYS[run.engine]
    if run.tokens_per_round is None:
        state = "missing" if run.engine == "vllm" else "null"
        raise SpecError(f"{run.where}: field '{key}' {state}: this run did not speculate{hint}")
    if run.num_drafts == 0:
        raise SpecError(f"{run.where}: field 'spec_decode_num_drafts' is 0: this run did not "
                        f"speculate{hint}")


def _per_position(runs: list[EngineRun], draft_tokens: int | None) -> BenchAcceptance:
    """vLLM's counters over the run(s): a_k = r_k n summed over runs (a pooled mean)."""
    first = runs[0]
    gamma = len(first.marginal_acceptance)
    if draft_tokens is not None and draft_tokens != gamma:
        raise SpecError(f"option --draft-tokens: {draft_tokens}, but {first.where} field "
                        f"'spec_decode_per_position_acceptance_rates' has {gamma} positions")
    for r in runs:
        for key, value in (("spec_decode_num_drafts", r.num_drafts),
                           ("spec_decode_draft_tokens", r.num_draft_tokens)):
            if value is None:
                raise SpecError(f"{r.where}: field '{key}' missing: the per-position rates "
                                "need the counts they are a fraction of")
    drafts = [float(r.num_drafts or 0) for r in runs]
    accepted = np.sum([np.asarray(r.marginal_acceptance) * n
                       for r, n in zip(runs, drafts, strict=True)], axis=0)
    counts = SpecDecodeCounts(
        num_drafts=sum(drafts),
        num_draft_tokens=float(sum(r.num_draft_tokens or 0 for r in runs)),
        num_accepted_tokens=float(accepted.sum()),
        accepted_per_position=tuple(float(a) for a in accepted),
        source=_where_text(runs))
    return BenchAcceptance(counts=counts, tokens_per_round=counts.mean_acceptance_length,
                           draft_tokens=gamma, num_drafts=counts.num_drafts,
                           source=_source(runs, "spec_decode_per_position_acceptance_rates",
                                          f"{counts.num_drafts:,.0f} drafts"))


def _tokens_per_round(runs: list[EngineRun], draft_tokens: int | None) -> BenchAcceptance:
    """tau (the mean over the runs) and the draft length the user gives."""
    first = runs[0]
    key = _ACCEPTANCE_KEYS[first.engine]
    tau = float(np.mean([r.tokens_per_round or 1.0 for r in runs]))
    if draft_tokens is None:
        raise SpecError(f"{_where_text(runs)}: field '{key}' gives only tokens per round "
                        f"({tau:.4g}), not the draft length: give it with --draft-tokens K")
    if not 1 <= draft_tokens <= MAX_POSITIONS:
        raise SpecError(f"option --draft-tokens: must be in 1..{MAX_POSITIONS}, got "
                        f"{draft_tokens}")
    if tau > draft_tokens + 1:
        raise SpecError(f"{first.where}: field '{key}' is {tau:g}: more than --draft-tokens "
                        f"{draft_tokens} + 1 = {draft_tokens + 1} tokens per round")
    drafts = [r.num_drafts for r in runs]
    total = None if None in drafts else float(sum(n or 0 for n in drafts))
    counted = "drafts not reported" if total is None else f"{total:,.0f} drafts"
    return BenchAcceptance(counts=None, tokens_per_round=tau, draft_tokens=draft_tokens,
                           num_drafts=total,
                           source=_source(runs, key, f"{counted}; {draft_tokens} draft "
                                          "tokens per round given with --draft-tokens"))


def _where_text(runs: list[EngineRun]) -> str:
    if len(runs) == 1:
        return runs[0].where
    return f"{runs[0].file}: lines {', '.join(str(r.line) for r in runs)}"


def _source(runs: list[EngineRun], field: str, counted: str) -> str:
    """Which file, run(s), server and client the numbers come from, and what they average."""
    first = runs[0]
    model = f", model {first.model_id}" if first.model_id else ""
    mean = f"mean of {len(runs)} runs, " if len(runs) > 1 else ""
    return (f"{_SERVERS[first.engine]} server's {field} in "
            f"{_where_text(runs)} ({mean}{_CLIENTS[first.engine]}, backend {first.backend}"
            f"{model}): {counted}")
