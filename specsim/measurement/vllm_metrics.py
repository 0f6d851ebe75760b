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
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.defaults import MAX_TREE_NODES
from specsim.specs.fields import MAX_NUMBER
from specsim.specs.io import decode_text, read_text

if TYPE_CHECKING:
    import http.client

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


# Prometheus text exposition: name{labels} value [timestamp]. Read by position, not by one
# backtracking pattern, so a line costs time linear in its length (a pattern with `.*` and a
# quoted-value alternation was quadratic on a long label block).
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_NAME = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*\"")
_LABEL_VALUE = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"')  # the rest of a quoted value
# Highest draft position a counter may report (vLLM's label is the position - 1): the most
# draft tokens specsim models per round.
MAX_POSITIONS = MAX_TREE_NODES


def _sample_line(line: str) -> tuple[str, dict[str, str], str] | None:
    """(name, labels, value) of one sample line, or None if it is not one."""
    match = _NAME.match(line)
    if match is None:
        return None
    name, pos = match.group(), match.end()
    labels: dict[str, str] = {}
    if line.startswith("{", pos):
        pos += 1
        while True:
            while line.startswith((" ", "\t"), pos):
                pos += 1
            if line.startswith("}", pos):
                pos += 1
                break
            key = _LABEL_NAME.match(line, pos)
            if key is None:
                return None
            value = _LABEL_VALUE.match(line, key.end())
            if value is None:
                return None
            labels[key.group(1)] = line[key.end():value.end() - 1]
            pos = value.end()
            while line.startswith((" ", "\t"), pos):
                pos += 1
            if line.startswith(",", pos):
                pos += 1
            elif not line.startswith("}", pos):
                return None
    rest = line[pos:]
    fields = rest.split()
    if not rest[:1].isspace() or not 1 <= len(fields) <= 2:
        return None
    return name, labels, fields[0]


def _prometheus_samples(text: str, source: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of the spec-decode counters, keyed by base name (without a _total suffix)."""
    wanted = (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS, ACCEPTED_PER_POSITION)
    by_name: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#") or not line.startswith("vllm:spec_decode"):
            continue
        sample = _sample_line(line)
        if sample is None:
            raise SpecError(f"{source}:{number}: cannot parse metrics line {line[:80]!r}")
        name, labels, value = sample
        if name in wanted or (name.endswith("_total") and name[: -len("_total")] in wanted):
            try:
                number_value = float(value)
            except ValueError:
                raise SpecError(f"{source}:{number}: {name} has a non-numeric value") from None
            by_name[name].append((labels, number_value))
    return by_name


def _position(labels: dict[str, str], source: str) -> int:
    """The `position` label of a per-position sample: an integer in 0..MAX_POSITIONS - 1."""
    if "position" not in labels:
        raise SpecError(f"{source}: {ACCEPTED_PER_POSITION} sample without a position label")
    text = labels["position"]
    if not re.fullmatch(r"[0-9]{1,9}", text) or int(text) >= MAX_POSITIONS:
        shown = text if len(text) <= 20 else text[:17] + "..."
        raise SpecError(f"{source}: {ACCEPTED_PER_POSITION} label position={shown!r} must be "
                        f"an integer in 0..{MAX_POSITIONS - 1} (draft positions - 1)")
    return int(text)


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
        per_position[_position(labels, source)] += value
    gamma = max(per_position) + 1
    missing = sorted(set(range(gamma)) - set(per_position))
    if missing:
        listed = ", ".join(map(str, missing[:8]))
        more = f", ...] ({len(missing):,} of 0..{gamma - 1})" if len(missing) > 8 else "]"
        raise SpecError(f"{source}: {ACCEPTED_PER_POSITION} lacks positions [{listed}{more}")
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
    listed = fields["rates"].split(",")
    if len(listed) > MAX_POSITIONS:
        raise SpecError(f"{source}: {len(listed):,} per-position acceptance rates; at most "
                        f"{MAX_POSITIONS} draft positions")
    rates = np.array([float(r) for r in listed])
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

FETCH_TIMEOUT_S = 10.0  # one network operation: connecting, or one read
FETCH_DEADLINE_S = 30.0  # the whole fetch, redirects included
# A /metrics page is kilobytes and a vLLM log a few MB; refuse anything absurd, unread.
MAX_PAGE_BYTES = 16 * 2**20
MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)


def is_url(source: str) -> bool:
    """An http:// or https:// address (the scheme in any case, as URLs allow)."""
    return source[:8].lower().startswith(("http://", "https://"))


def _shown(url: str) -> str:
    return url if len(url) <= 80 else url[:77] + "..."


def fetch_metrics(url: str, *, timeout_s: float = FETCH_TIMEOUT_S,
                  deadline_s: float = FETCH_DEADLINE_S, limit: int = MAX_PAGE_BYTES) -> str:
    """The text of a live vLLM /metrics endpoint (GET).

    Each network operation waits at most `timeout_s` seconds and the whole fetch, redirects
    included, at most `deadline_s` (a server that trickles bytes is cut off then); only http
    and https are read, on every redirect; the body is refused past `limit` bytes, or when it
    is shorter than its Content-Length. Every problem is one SpecError line naming the URL.
    """
    import urllib.parse

    shown = _shown(url)
    deadline = time.monotonic() + deadline_s
    current = url
    for hop in range(MAX_REDIRECTS + 1):
        location, body = _get(current, shown, hop=hop, timeout_s=timeout_s, deadline=deadline,
                              deadline_s=deadline_s, limit=limit)
        if location is None:
            return decode_text(body, shown)
        current = urllib.parse.urljoin(current, location)
    raise SpecError(f"{shown}: more than {MAX_REDIRECTS} redirects")


def _get(url: str, shown: str, *, hop: int, timeout_s: float, deadline: float,
         deadline_s: float, limit: int) -> tuple[str | None, bytes]:
    """(redirect location, b"") or (None, body) of one GET; SpecError on any problem."""
    import http.client
    import socket
    import threading
    import urllib.parse

    where = shown if hop == 0 else f"{shown} (redirected to {_shown(url)})"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise SpecError(f"{where}: not a valid URL ({err})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise SpecError(f"{where}: only http:// and https:// addresses are read, not "
                        f"{parts.scheme or 'a relative path'!r}")
    if not parts.hostname or (port is not None and port == 0):
        raise SpecError(f"{where}: not a valid URL (need http://host:port/metrics)")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise SpecError(f"{where}: no complete answer within {deadline_s:g} s")
    kind = http.client.HTTPSConnection if parts.scheme.lower() == "https" \
        else http.client.HTTPConnection
    conn = kind(parts.hostname, port, timeout=min(timeout_s, remaining))
    expired = threading.Event()
    sockets: list[socket.socket] = []  # the connection's; http.client lets go of it early

    def cut_off() -> None:  # the deadline: end whatever read is blocked on the socket
        expired.set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(remaining, cut_off)
    timer.daemon = True
    timer.start()
    response: http.client.HTTPResponse | None = None
    try:
        try:
            conn.connect()
        except TimeoutError:
            raise SpecError(f"{where}: cannot connect (no answer within "
                            f"{min(timeout_s, remaining):g} s)") from None
        except OSError as err:
            if expired.is_set():
                raise SpecError(f"{where}: no complete answer within {deadline_s:g} s") \
                    from None
            raise SpecError(f"{where}: cannot connect ({err.strerror or err})") from None
        sockets.append(conn.sock)
        if expired.is_set():
            raise SpecError(f"{where}: no complete answer within {deadline_s:g} s")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            conn.request("GET", target, headers={"Accept": "text/plain"})
            response = conn.getresponse()
            if response.status in _REDIRECTS:
                location = response.getheader("Location")
                if not location:
                    raise SpecError(f"{where}: HTTP {response.status} redirect without a "
                                    "Location")
                return location, b""
            if not 200 <= response.status < 300:
                raise SpecError(f"{where}: HTTP {response.status} {response.reason}")
            body = _body(response, where, limit)
        except TimeoutError:
            raise SpecError(f"{where}: no answer within {timeout_s:g} s") from None
        except (OSError, http.client.HTTPException, ValueError) as err:
            if expired.is_set():
                raise SpecError(f"{where}: no complete answer within {deadline_s:g} s") \
                    from None
            if isinstance(err, http.client.IncompleteRead):
                raise SpecError(f"{where}: the answer ended early (after "
                                f"{len(err.partial):,} bytes of a chunk)") from None
            text = str(err) if len(str(err)) <= 80 else str(err)[:77] + "..."
            raise SpecError(f"{where}: cannot read ({type(err).__name__}: {text})") from None
        if expired.is_set():  # the cut-off ended the body as an end of file would
            raise SpecError(f"{where}: no complete answer within {deadline_s:g} s")
        declared = response.getheader("Content-Length", "")
        if declared.strip().isdigit() and len(body) != int(declared):
            raise SpecError(f"{where}: the answer ended after {len(body):,} of its "
                            f"{int(declared):,} bytes (Content-Length); try again")
        return None, body
    finally:
        timer.cancel()
        if response is not None:
            response.close()  # the socket stays open while its response holds it
        conn.close()


def _body(response: http.client.HTTPResponse, where: str, limit: int) -> bytes:
    """The body of a response, refused past `limit` bytes (by its Content-Length where it
    gives one, before reading)."""
    declared = response.getheader("Content-Length", "")
    if declared.strip().isdigit() and int(declared) > limit:
        raise SpecError(f"{where}: page of {int(declared):,} bytes, larger than {limit:,}; not "
                        "a /metrics page")
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise SpecError(f"{where}: page larger than {limit:,} bytes; not a /metrics page")
        chunks.append(chunk)


def metrics_name(source: str) -> str:
    """A default workload name for counters read from `source` (a file's stem, or a fixed
    name for a live endpoint)."""

    return "vllm-metrics" if is_url(source) else Path(source).stem


def read_metrics(source: str, *, timeout_s: float = FETCH_TIMEOUT_S,
                 deadline_s: float = FETCH_DEADLINE_S) -> tuple[str, str]:
    """(text, default name) of a saved /metrics page or vLLM log, or of a live endpoint URL
    (see `fetch_metrics` for the time limits); either is refused past MAX_PAGE_BYTES."""
    if is_url(source):
        return fetch_metrics(source, timeout_s=timeout_s, deadline_s=deadline_s), \
            "vllm-metrics"
    scheme, sep, _ = source.partition("://")
    if sep and scheme.isalpha():
        raise SpecError(f"{source[:80]}: unsupported URL scheme '{scheme}' (use http:// or "
                        "https://, or give a file path)")

    path = Path(source)
    return read_text(path, what="vLLM metrics page or log", limit=MAX_PAGE_BYTES), path.stem


def read_counts(source: str, *, deadline_s: float = FETCH_DEADLINE_S) -> SpecDecodeCounts:
    """The counters of a saved /metrics page, a vLLM log file (told apart by content), or a live
    endpoint URL."""
    text, _ = read_metrics(source, deadline_s=deadline_s)
    parse = parse_prometheus_metrics if "spec_decode_num_drafts" in text else parse_vllm_log
    return parse(text, source)
