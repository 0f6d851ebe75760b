"""Parse vLLM's speculative-decoding counters into acceptance statistics; reading a saved page
or a live /metrics endpoint is the one I/O part, at the end of the module.

Two inputs, both as text:

- a saved Prometheus ``/metrics`` page with the counters ``vllm:spec_decode_num_drafts``,
  ``vllm:spec_decode_num_draft_tokens``, ``vllm:spec_decode_num_accepted_tokens`` and
  ``vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`` (optionally ``_total``-suffixed,
  with any further labels such as model_name or engine, which are summed over);
- vLLM's periodic log lines ``SpecDecoding metrics: ... Accepted: A tokens, Drafted: D tokens,
  Per-position acceptance rate: r_1, r_2, ...`` (with or without mean acceptance length,
  throughputs and draft acceptance rate, depending on the vLLM version).

vLLM counts a_i = rounds that accepted draft position i (i = 1..gamma; vLLM's position label
is i - 1) and n = rounds with a draft; its per-position rate is the marginal a_i / n. The
conditional acceptance used by specsim is alpha_i = a_i / a_{i-1} with a_0 = n.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.io import MAX_NUMBER, read_text
from specsim.speculation.acceptance import AcceptanceProfile

FloatArray = npt.NDArray[np.float64]

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"

# Counts from the same counters must agree to this relative slack (they are exact integers).
COUNT_TOLERANCE = 1e-9
# Log lines print rates with 3 decimals and the mean acceptance length with 2.
RATE_ROUNDING = 0.0005
LENGTH_ROUNDING = 0.005


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecDecodeCounts:
    """vLLM's speculative-decoding counters, summed over engines and models.

    Attributes:
        num_drafts: rounds that carried a draft, n (count).
        num_draft_tokens: draft tokens proposed (count).
        num_accepted_tokens: draft tokens accepted (count), sum of accepted_per_position.
        accepted_per_position: a_i, rounds that accepted draft position i = 1..gamma,
            shape (gamma,) (count; estimated from rounded rates when parsed from logs).
        source: where the counts come from.
    """

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_position: tuple[float, ...]
    source: str

    def __post_init__(self) -> None:
        counts = (self.num_drafts, self.num_draft_tokens, self.num_accepted_tokens)
        per_position = np.asarray(self.accepted_per_position, dtype=np.float64)
        if not all(math.isfinite(c) and c >= 0 for c in counts) or np.any(
            ~np.isfinite(per_position) | (per_position < 0)
        ):
            raise SpecError(f"{self.source}: counters must be finite and >= 0, got {counts}")
        if self.num_drafts <= 0:
            raise SpecError(f"{self.source}: {DRAFTS} is 0; no speculative rounds recorded yet")
        if per_position.size == 0:
            raise SpecError(f"{self.source}: no per-position accepted counts")
        _check_non_increasing(per_position, self.num_drafts, self.source)
        if self.num_accepted_tokens > self.num_draft_tokens * (1 + COUNT_TOLERANCE):
            raise SpecError(
                f"{self.source}: accepted tokens {self.num_accepted_tokens:g} exceed drafted "
                f"tokens {self.num_draft_tokens:g}"
            )

    @property
    def gamma(self) -> int:
        """Number of draft positions reported."""
        return len(self.accepted_per_position)

    @property
    def marginal_rates(self) -> FloatArray:
        """Unconditional per-position acceptance a_i / n, shape (gamma,) (vLLM's rate)."""
        return np.asarray(self.accepted_per_position, dtype=np.float64) / self.num_drafts

    @property
    def conditional_alphas(self) -> FloatArray:
        """Conditional acceptance alpha_i = a_i / a_{i-1}, a_0 = n, shape (gamma,).

        A position that no round reached (a_{i-1} = 0) gets alpha_i = 0.
        """
        a = np.asarray(self.accepted_per_position, dtype=np.float64)
        previous = np.concatenate([[self.num_drafts], a[:-1]])
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.where(previous > 0, a / previous, 0.0), dtype=np.float64)

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens per round, tau = 1 + sum a_i / n (includes the bonus token)."""
        return 1.0 + float(self.marginal_rates.sum())

    @property
    def draft_acceptance_rate(self) -> float:
        """Accepted over drafted tokens (vLLM's "draft acceptance rate"), unitless."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    def to_profile(self) -> AcceptanceProfile:
        """Chain acceptance profile with the measured conditional alphas."""
        return AcceptanceProfile(
            position_alphas=tuple(self.conditional_alphas.clip(0.0, 1.0)), source=self.source
        )


def _check_non_increasing(per_position: FloatArray, num_drafts: float, source: str) -> None:
    """Raise SpecError unless n >= a_1 >= a_2 >= ... (a round accepts a prefix)."""
    chain = np.concatenate([[num_drafts], per_position])
    slack = COUNT_TOLERANCE * num_drafts
    rising = np.flatnonzero(chain[1:] > chain[:-1] + slack)
    if rising.size:
        i = int(rising[0])
        before = "num_drafts" if i == 0 else f"position {i - 1}"
        raise SpecError(
            f"{source}: accepted count at position {i} ({chain[i + 1]:g}) exceeds {before} "
            f"({chain[i]:g}); a round can only accept a prefix of its draft"
        )


# Prometheus text exposition: name{labels} value [timestamp]
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _prometheus_samples(text: str, source: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of the spec-decode counters, keyed by base name (without a _total suffix)."""
    wanted = (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS, ACCEPTED_PER_POSITION)
    by_name: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#") or not line.startswith("vllm:spec_decode"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise SpecError(f"{source}:{number}: cannot parse metrics line {line[:80]!r}")
        name, labels, value = match.groups()
        if name in wanted or (name.endswith("_total") and name[: -len("_total")] in wanted):
            try:
                number_value = float(value)
            except ValueError:
                raise SpecError(f"{source}:{number}: {name} has a non-numeric value") from None
            by_name[name].append((dict(_LABEL.findall(labels or "")), number_value))
    return by_name


def _counter(samples: dict[str, list[tuple[dict[str, str], float]]], name: str,
             source: str) -> list[tuple[dict[str, str], float]]:
    """Samples of one counter: the `_total` series if exposed, else the bare name."""
    found = samples.get(name + "_total") or samples.get(name)
    if not found:
        raise SpecError(f"{source}: counter {name} (or {name}_total) is missing")
    for labels, value in found:
        if not math.isfinite(value) or value < 0 or value > MAX_NUMBER:
            raise SpecError(f"{source}: {name}{labels} = {value:g} must be a count in "
                            f"[0, {MAX_NUMBER:g}]")
    return found


def parse_prometheus_metrics(text: str, source: str = "metrics") -> SpecDecodeCounts:
    """Acceptance counts from a saved Prometheus /metrics page of a vLLM server.

    Args:
        text: the page's text.
        source: name for error messages (e.g. the file path).

    Returns:
        SpecDecodeCounts summed over all label sets other than `position`.
    """
    samples = _prometheus_samples(text, source)
    totals = {
        name: sum(value for _, value in _counter(samples, name, source))
        for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS)
    }
    per_position: dict[int, float] = defaultdict(float)
    for labels, value in _counter(samples, ACCEPTED_PER_POSITION, source):
        if not labels.get("position", "").isdigit():
            raise SpecError(f"{source}: {ACCEPTED_PER_POSITION} sample without a position label")
        per_position[int(labels["position"])] += value
    gamma = max(per_position) + 1
    missing = sorted(set(range(gamma)) - set(per_position))
    if missing:
        raise SpecError(f"{source}: {ACCEPTED_PER_POSITION} lacks positions {missing}")
    accepted = [per_position[i] for i in range(gamma)]
    if totals[DRAFT_TOKENS] < totals[DRAFTS] * (1 - COUNT_TOLERANCE):
        raise SpecError(f"{source}: {totals[DRAFT_TOKENS]:g} draft tokens are fewer than "
                        f"num_drafts {totals[DRAFTS]:g} (each draft proposes at least one)")
    if totals[DRAFT_TOKENS] > totals[DRAFTS] * gamma * (1 + COUNT_TOLERANCE) + 0.5:
        raise SpecError(f"{source}: {totals[DRAFT_TOKENS]:g} draft tokens exceed {gamma} "
                        f"positions x num_drafts {totals[DRAFTS]:g}")
    if abs(sum(accepted) - totals[ACCEPTED_TOKENS]) > COUNT_TOLERANCE * max(1.0, sum(accepted)):
        raise SpecError(
            f"{source}: per-position accepted counts sum to {sum(accepted):g} but "
            f"{ACCEPTED_TOKENS} is {totals[ACCEPTED_TOKENS]:g}"
        )
    return SpecDecodeCounts(
        num_drafts=totals[DRAFTS],
        num_draft_tokens=totals[DRAFT_TOKENS],
        num_accepted_tokens=totals[ACCEPTED_TOKENS],
        accepted_per_position=tuple(accepted),
        source=source,
    )


_LOG_MARKER = "SpecDecoding metrics:"
_LOG_FIELDS = {
    "accepted": re.compile(r"\bAccepted: (\d+) tokens"),
    "drafted": re.compile(r"\bDrafted: (\d+) tokens"),
    "mean_length": re.compile(r"Mean acceptance length: (\d+(?:\.\d+)?)"),
    "rates": re.compile(r"Per-position acceptance rate: (\d+\.\d+(?:,\s*\d+\.\d+)*)"),
    "percent": re.compile(r"Draft acceptance rate: (\d+(?:\.\d+)?)%"),
}
_LOG_LABELS = {
    "accepted": "Accepted: N tokens",
    "drafted": "Drafted: N tokens",
    "rates": "Per-position acceptance rate (older vLLM); use the /metrics counters instead",
}


def _log_fields(line: str, source: str) -> dict[str, str]:
    """The numeric fields of a log line as strings; SpecError if a required one is absent."""
    found = {}
    for key, pattern in _LOG_FIELDS.items():
        match = pattern.search(line)
        if match is not None:
            found[key] = match.group(1)
    for key, label in _LOG_LABELS.items():
        if key not in found and not (key == "rates" and found.get("drafted") == "0"):
            raise SpecError(f"{source}: SpecDecoding line lacks '{label}'")
    return found


def parse_log_line(line: str, source: str = "log") -> SpecDecodeCounts | None:
    """Counts of one "SpecDecoding metrics:" log line; None for an interval without drafts.

    The line gives accepted and drafted tokens and the per-position marginal rates r_i (3
    decimals). The number of rounds is recovered as accepted / sum(r_i), exact up to the
    rounding of the rates (drafted / gamma if nothing was accepted), and a_i = r_i * n.
    """
    fields = _log_fields(line, source)
    accepted, drafted = float(fields["accepted"]), float(fields["drafted"])
    if drafted == 0:
        return None
    rates = np.array([float(r) for r in fields["rates"].split(",")])
    if np.any(rates > 1.0):
        raise SpecError(f"{source}: per-position acceptance rates must be <= 1, got {rates}")
    _check_logged_summaries(fields, rates, accepted / drafted, source)
    if accepted > 0 and rates.sum() > 0:
        num_drafts = accepted / rates.sum()  # vLLM: sum_i a_i = accepted, r_i = a_i / n
    else:
        num_drafts = drafted / rates.size  # every round drafted gamma tokens
    return SpecDecodeCounts(
        num_drafts=num_drafts,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_position=tuple(rates * num_drafts),
        source=source,
    )


def _check_logged_summaries(
    fields: dict[str, str], rates: FloatArray, acceptance_rate: float, source: str
) -> None:
    """Raise SpecError if the logged mean length or acceptance rate contradicts the counts."""
    if "mean_length" in fields:
        logged = float(fields["mean_length"])
        slack = LENGTH_ROUNDING + RATE_ROUNDING * rates.size + 1e-9
        if abs(logged - (1.0 + rates.sum())) > slack:
            raise SpecError(
                f"{source}: mean acceptance length {logged} disagrees with 1 + sum of "
                f"per-position rates = {1.0 + rates.sum():.3f}"
            )
    if "percent" in fields:
        logged = float(fields["percent"])
        if abs(logged - 100.0 * acceptance_rate) > 0.05 + 1e-9:  # printed with 1 decimal
            raise SpecError(
                f"{source}: draft acceptance rate {logged}% disagrees with accepted / drafted "
                f"= {100.0 * acceptance_rate:.2f}%"
            )


def parse_vllm_log(text: str, source: str = "log") -> SpecDecodeCounts:
    """Counts summed over every "SpecDecoding metrics:" line of a vLLM server log.

    Args:
        text: the log's text (other lines are ignored).
        source: name for error messages (e.g. the file path).

    Returns:
        SpecDecodeCounts over all logged intervals (each line covers one interval).
    """
    parsed = [
        parse_log_line(line, f"{source}:{number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if _LOG_MARKER in line
    ]
    counts = [c for c in parsed if c is not None]
    if not counts:
        raise SpecError(f"{source}: no '{_LOG_MARKER}' line with drafted tokens found")
    gammas = {c.gamma for c in counts}
    if len(gammas) != 1:
        raise SpecError(f"{source}: lines report different numbers of positions {sorted(gammas)}")
    return SpecDecodeCounts(
        num_drafts=sum(c.num_drafts for c in counts),
        num_draft_tokens=sum(c.num_draft_tokens for c in counts),
        num_accepted_tokens=sum(c.num_accepted_tokens for c in counts),
        accepted_per_position=tuple(
            np.sum([c.accepted_per_position for c in counts], axis=0).tolist()
        ),
        source=source,
    )


# ----------------------------------------------------------------------------- reading (I/O)

FETCH_TIMEOUT_S = 10.0
MAX_PAGE_BYTES = 64 * 1024 * 1024  # a /metrics page is kilobytes; refuse anything absurd


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def fetch_metrics(url: str, *, timeout_s: float = FETCH_TIMEOUT_S) -> str:
    """The text of a live vLLM /metrics endpoint (GET, `timeout_s` seconds at most per
    network operation); connection failures and HTTP errors are one line naming the URL."""
    import http.client
    import urllib.error
    import urllib.parse
    import urllib.request

    shown = url if len(url) <= 80 else url[:77] + "..."
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise SpecError(f"{shown}: not a valid URL ({err})") from None
    if not parts.hostname or (port is not None and port == 0):
        raise SpecError(f"{shown}: not a valid URL (need http://host:port/metrics)")
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            body: bytes = response.read(MAX_PAGE_BYTES + 1)
    except urllib.error.HTTPError as err:
        raise SpecError(f"{shown}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        raise SpecError(f"{shown}: cannot connect ({err.reason})") from None
    except TimeoutError:
        raise SpecError(f"{shown}: no answer within {timeout_s:g} s") from None
    except OSError as err:
        raise SpecError(f"{shown}: cannot read ({err})") from None
    except (http.client.HTTPException, ValueError) as err:
        raise SpecError(f"{shown}: cannot read ({type(err).__name__}: {err})") from None
    if len(body) > MAX_PAGE_BYTES:
        raise SpecError(f"{shown}: page larger than {MAX_PAGE_BYTES} bytes; not a /metrics page")
    return body.decode("utf-8", errors="replace")


def metrics_name(source: str) -> str:
    """A default workload name for counters read from `source` (a file's stem, or a fixed
    name for a live endpoint)."""

    return "vllm-metrics" if is_url(source) else Path(source).stem


def read_metrics(source: str, *, timeout_s: float = FETCH_TIMEOUT_S) -> tuple[str, str]:
    """(text, default name) of a saved /metrics page or vLLM log, or of a live endpoint URL."""
    if is_url(source):
        return fetch_metrics(source, timeout_s=timeout_s), "vllm-metrics"
    scheme, sep, _ = source.partition("://")
    if sep and scheme.isalpha():
        raise SpecError(f"{source[:80]}: unsupported URL scheme '{scheme}' (use http:// or "
                        "https://, or give a file path)")

    path = Path(source)
    return read_text(path, what="vLLM metrics page or log"), path.stem


def read_counts(source: str) -> SpecDecodeCounts:
    """The counters of a saved /metrics page, a vLLM log file (told apart by content), or a live
    endpoint URL."""
    text, _ = read_metrics(source)
    parse = parse_prometheus_metrics if "spec_decode_num_drafts" in text else parse_vllm_log
    return parse(text, source)
