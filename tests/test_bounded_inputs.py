"""Every input is read within bounds (issue 23): one YAML reader (YAML 1.2 numbers, no aliases,
no duplicate keys, bounded size, nodes and integer digits), one bounded reader for CSV, NPZ and
metrics text, and a metrics URL reader with an overall deadline, a size cap and http(s) only.

Expected values are written out by hand from the YAML 1.2 core schema, the Prometheus text
format and the files each test builds; "refused before parsing" is checked by making the
parser (or the constructor) fail if it is reached, never by timing.
"""

from __future__ import annotations

import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

import specsim.specs.io as spec_io
import specsim.specs.prob_arrays as prob_arrays
from specsim.errors import SpecError
from specsim.measurement.published import load_published
from specsim.measurement.vidur import read_vidur_attention, read_vidur_mlp
from specsim.measurement.vllm_metrics import (
    fetch_metrics,
    is_url,
    parse_prometheus_metrics,
    read_metrics,
)
from specsim.serving.scenarios import load_scenario
from specsim.specs.io import parse_yaml, read_spec_file, read_yaml
from specsim.specs.models import load_model
from specsim.specs.prob_arrays import load_prob_arrays
from specsim.specs.workloads import load_workload
from specsim.speculation.rank_files import read_ranks
from tests.test_cli import REPO, run
from tests.test_cli_speculation import METRICS

HUGE = "7" * 5000  # past Python's 4,300-digit limit on int() from text


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _builtin(kind: str, name: str) -> str:
    return (REPO / kind / f"{name}.yaml").read_text(encoding="utf-8")


def _one_line(err: pytest.ExceptionInfo[SpecError]) -> str:
    message = str(err.value)
    assert "\n" not in message and len(message) < 400, message
    return message


# ---- huge integers: refused by name, in every kind of YAML input -----------------------------

def test_huge_integer_in_a_model_spec_names_the_field(tmp_path: Path) -> None:
    text = _builtin("workloads/models", "llama-3.1-8b").replace("num_layers: 32",
                                                               f"num_layers: {HUGE}")
    path = _write(tmp_path / "m.yaml", text)
    with pytest.raises(SpecError) as err:
        load_model(str(path))
    assert "field 'num_layers': integer of 5,000 digits" in _one_line(err)


def test_huge_integer_in_a_ranks_file_yaml_and_json(tmp_path: Path) -> None:
    for text in (f"ranks: [0.5, {HUGE}]\n", f"- 0.5\n- {HUGE}\n", f"[0.5, {HUGE}]"):
        with pytest.raises(SpecError) as err:
            read_ranks(_write(tmp_path / "r.txt", text))
        assert "integer of 5,000 digits" in _one_line(err)


def test_huge_integer_in_an_acceptance_workload(tmp_path: Path) -> None:
    text = ("name: w\nsource: s\ncontext: 1000\n"
            f"acceptance: {{tau: 2.0, gamma: {HUGE}, source: s}}\n")
    with pytest.raises(SpecError) as err:
        load_workload(str(_write(tmp_path / "w.yaml", text)))
    assert "field 'acceptance.gamma': integer of 5,000 digits" in _one_line(err)


def test_huge_integer_in_published_rows(tmp_path: Path) -> None:
    text = f"about: x\nrows:\n- id: a\n  batch: 1\n- id: b\n  batch: {HUGE}\n"
    with pytest.raises(SpecError) as err:
        load_published([str(_write(tmp_path / "p.yaml", text))])
    assert "line 6: field 'rows[1].batch': integer of 5,000 digits" in _one_line(err)


def test_huge_integer_through_the_cli_is_one_line_exit_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.yaml", f"ranks: [{HUGE}]\n")
    result = run("recommend", "--alpha", "0.7", "--ranks", str(path), "--batch", "1")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "integer of 5,000 digits" in result.stderr
    assert "Traceback" not in result.stderr


# ---- aliases, size, nodes: refused before any object is built --------------------------------

def _forbid_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    def built(*args: object, **kwargs: object) -> None:
        raise AssertionError("the YAML constructor ran")

    monkeypatch.setattr(spec_io._StrictLoader, "construct_document", built)


def _laughs(levels: int, width: int) -> str:
    """The "billion laughs" file: each level lists the previous one `width` times."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [4, 8])
def test_alias_bombs_are_refused_before_construction(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     levels: int) -> None:
    text = _laughs(levels, 9)
    if levels == 4:
        assert len(text) < 400  # the 359-byte file expands 9^5-fold
    _forbid_construction(monkeypatch)
    for read in (lambda p: read_ranks(p), lambda p: read_yaml(p)):
        with pytest.raises(SpecError) as err:
            read(_write(tmp_path / "bomb.yaml", text))
        message = _one_line(err)
        assert "line 1: YAML anchors and aliases (&, *) are not supported" in message
        assert "lol" not in message  # the input is never echoed, let alone expanded


def test_a_file_over_the_size_limit_is_refused_unparsed(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"ranks: [" + b"0.0, " * (4 * 2**20 // 5) + b"0.0]\n")  # 4 MiB

    def parsed(*args: object, **kwargs: object) -> None:
        raise AssertionError("the YAML parser ran")

    monkeypatch.setattr(spec_io.yaml, "parse", parsed)
    monkeypatch.setattr(spec_io.yaml, "load", parsed)
    for read in (read_ranks, read_yaml, read_spec_file):
        with pytest.raises(SpecError) as err:
            read(path)
        assert f"{path}: larger than 1 MiB" in _one_line(err)


def test_too_many_nodes_are_refused_before_construction(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_construction(monkeypatch)
    text = "ranks:\n" + "- 0\n" * 60_000  # 240 KB, 60,002 nodes
    with pytest.raises(SpecError) as err:
        read_yaml(_write(tmp_path / "flat.yaml", text))
    assert "more than 50,000 values" in _one_line(err)


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    with pytest.raises(SpecError, match="nested more than 64 levels"):
        parse_yaml("[" * 65 + "]" * 65, "deep.yaml")


# ---- YAML 1.2 core schema ---------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("032", 32),             # YAML 1.1: octal 26
    ("010000", 10000),       # YAML 1.1: octal 4096
    ("-007", -7),
    ("0o17", 15),            # YAML 1.2 octal is explicit
    ("0x1F", 31),
    ("1e-3", 0.001),         # YAML 1.1: the string '1e-3'
    ("1.5E+2", 150.0),
    (".5", 0.5),
    ("-.inf", -float("inf")),
    ("1_000", "1_000"),      # YAML 1.1: 1000
    ("1:30", "1:30"),        # YAML 1.1: sexagesimal 90
    ("0b101", "0b101"),      # YAML 1.1: 5
    ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("y", "y"),  # 1.1: booleans
    ("True", True), ("FALSE", False),
    ("~", None), ("null", None),
    ("2024-01-31", "2024-01-31"),  # YAML 1.1: a date
    ("'032'", "032"),
])
def test_scalars_follow_the_yaml_1_2_core_schema(text: str, value: object) -> None:
    assert parse_yaml(f"v: {text}\n", "t.yaml") == {"v": value}


@pytest.mark.parametrize("text", ["!!int 1_000", "!!bool yes", "!!float 1:30",
                                  "!!binary aGk=", "!!timestamp 2024-01-31", "!!set {a}",
                                  "!!python/name:os.system ''", "!local x"])
def test_tags_outside_the_core_schema_are_refused(text: str) -> None:
    with pytest.raises(SpecError, match=r"^t\.yaml: line 1: malformed YAML"):
        parse_yaml(f"v: {text}\n", "t.yaml")


def test_a_spec_reads_leading_zeros_as_decimal_and_refuses_1_1_spellings(
        tmp_path: Path) -> None:
    text = _builtin("workloads/models", "llama-3.1-8b")
    model = load_model(str(_write(tmp_path / "z.yaml", text.replace(
        "num_layers: 32", "num_layers: 032"))))
    assert model.num_layers == 32
    with pytest.raises(SpecError) as err:
        load_model(str(_write(tmp_path / "u.yaml", text.replace(
            "num_layers: 32", "num_layers: 3_2"))))
    assert "field 'num_layers'" in _one_line(err) and "'3_2'" in str(err.value)
    with pytest.raises(SpecError) as err:
        load_model(str(_write(tmp_path / "b.yaml", text.replace(
            "tie_word_embeddings: false", "tie_word_embeddings: no"))))
    assert "field 'tie_word_embeddings' must be true or false, got 'no'" in _one_line(err)


def test_duplicate_keys_are_refused_in_ranks_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        read_ranks(_write(tmp_path / "r.yaml", "ranks: [0.5]\nranks: [0.2]\n"))
    assert "line 2: malformed YAML (key 'ranks' appears twice)" in _one_line(err)
    with pytest.raises(SpecError, match="appears twice"):  # 1 and 01 are one key in YAML 1.2
        parse_yaml("{1: a, 01: b}", "k.yaml")


def test_built_in_specs_read_the_same_under_yaml_1_2() -> None:
    """No built-in file relied on a YAML 1.1 reading: every one parses, and its numbers are the
    plain decimal numbers written in it (spot checks by hand)."""
    files = sorted(p for folder in ("hardware", "workloads", "engines")
                   for p in (REPO / folder).rglob("*.yaml"))
    assert len(files) > 50
    for path in files:
        assert isinstance(parse_yaml(path.read_text(encoding="utf-8"), path), dict)
    model = parse_yaml(_builtin("workloads/models", "deepseek-v3"), "d.yaml")
    assert (model["num_layers"], model["hidden_size"], model["tie_word_embeddings"]) == \
        (61, 7168, False)


# ---- ranks files ------------------------------------------------------------------------------

def test_a_negative_rank_says_it_is_negative(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        read_ranks(_write(tmp_path / "r.csv", "-0.1,0.2\n"))
    assert _one_line(err) == (f"{tmp_path / 'r.csv'}: entry 0 = -0.1 is negative; each entry "
                              "is a probability in [0, 1]")


@pytest.mark.parametrize(("text", "ranks"), [
    ("- 0.5\n- 0.25\n", (0.5, 0.25)),
    ("0.5, 0.25\n", (0.5, 0.25)),
    ("rank,a\n0.5\n0.25\n", (0.5, 0.25)),
    ("a_j 0.5 0.25\n", (0.5, 0.25)),
    ("tensor([0.5, 0.25], device='cuda:0')\n", (0.5, 0.25)),
    ('{"ranks": [0.5, 0.25]}', (0.5, 0.25)),
])
def test_ranks_forms_still_read(tmp_path: Path, text: str, ranks: tuple[float, ...]) -> None:
    assert read_ranks(_write(tmp_path / "r.txt", text)) == ranks


def test_a_long_unclosed_tensor_is_read_in_linear_time(tmp_path: Path) -> None:
    """`tensor([` followed by many `],` made the old pattern backtrack quadratically."""
    text = "tensor([" + "]," * 300_000
    with pytest.raises(SpecError) as err:
        read_ranks(_write(tmp_path / "t.txt", text))
    assert _one_line(err) == f"{tmp_path / 't.txt'}: entry 0 = ']' is not a number"


# ---- workloads and scenarios ------------------------------------------------------------------

def test_plan_and_recommend_loaders_share_the_context_limit(tmp_path: Path) -> None:
    text = _builtin("workloads/scenarios", "agentic").replace("value: 13200", "value: 1e11")
    path = str(_write(tmp_path / "huge-context.yaml", text))
    for load in (load_scenario, load_workload):
        with pytest.raises(SpecError) as err:
            load(path)  # type: ignore[operator]
        assert "field 'context' must be <= 1e+07, got 100000000000.0" in _one_line(err)


def test_p90_below_median_names_the_p90_field(tmp_path: Path) -> None:
    text = _builtin("workloads/scenarios", "agentic").replace("  p90: 1000\n", "  p90: 100\n")
    with pytest.raises(SpecError) as err:
        load_scenario(str(_write(tmp_path / "p90.yaml", text)))
    message = _one_line(err)
    assert "field 'output_tokens.p90' = 100 is below the median 300" in message
    assert "'output_tokens.'" not in message


# ---- metrics text -----------------------------------------------------------------------------

def _page(position: str) -> str:
    return ("vllm:spec_decode_num_drafts 10\nvllm:spec_decode_num_draft_tokens 10\n"
            "vllm:spec_decode_num_accepted_tokens 5\n"
            f'vllm:spec_decode_num_accepted_tokens_per_pos{{position="{position}"}} 5\n')


@pytest.mark.parametrize("position", ["200000000", "\u00b2", "4096", "-1", "0x1", ""])
def test_metrics_positions_outside_the_tree_limit_are_refused(position: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_prometheus_metrics(_page(position), "m.txt")
    assert "label position=" in _one_line(err) and "0..4095" in str(err.value)


def test_metrics_position_zero_reads() -> None:
    counts = parse_prometheus_metrics(_page("0"), "m.txt")
    assert counts.accepted_per_position == (5.0,)


def test_a_200_kb_adversarial_label_block_parses_correctly() -> None:
    """Labels full of escaped quotes, braces and commas (which the old `\\{(.*)\\}` pattern
    and its label scan took quadratic time over): the sums are those of the page by hand."""
    noise = ",".join(f"l{i}=" + '"a\\"},{b=\\"c"' for i in range(10_100))  # 200 KB
    assert len(noise) > 200_000
    page = (f"vllm:spec_decode_num_drafts{{{noise}}} 100\n"
            f"vllm:spec_decode_num_draft_tokens{{{noise}}} 300\n"
            f"vllm:spec_decode_num_accepted_tokens{{{noise}}} 150\n"
            f'vllm:spec_decode_num_accepted_tokens_per_pos{{{noise},position="0"}} 80\n'
            f'vllm:spec_decode_num_accepted_tokens_per_pos{{position="1",{noise}}} 50\n'
            f'vllm:spec_decode_num_accepted_tokens_per_pos{{{noise},position="2",}} 20\n')
    start = time.monotonic()
    counts = parse_prometheus_metrics(page, "m.txt")
    assert time.monotonic() - start < 30  # a generous guard; the old parser never finished
    assert counts.num_drafts == 100 and counts.num_draft_tokens == 300
    assert counts.accepted_per_position == (80.0, 50.0, 20.0)
    escaped_quotes = '\\"' * 100_000  # a label value that never closes
    unclosed = 'vllm:spec_decode_num_drafts{a="' + escaped_quotes + " 1\n"
    with pytest.raises(SpecError, match="cannot parse metrics line"):
        parse_prometheus_metrics(unclosed, "m.txt")


def test_a_metrics_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with open(path, "wb") as handle:
        handle.truncate(17 * 2**20)  # sparse: 17 MiB of NULs, no disk used
    with pytest.raises(SpecError, match="larger than 16 MiB"):
        read_metrics(str(path))


# ---- the metrics URL ----------------------------------------------------------------------------

Handler = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def serve(handler: Handler, requests: int = 1) -> Iterator[str]:
    """A loopback server answering at most `requests` requests with `handler`, then closing."""

    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            try:
                handler(self)
            except OSError:  # the client hung up (as a deadline does)
                pass

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = HTTPServer(("127.0.0.1", 0), _Handler)
    server.timeout = 10

    def loop() -> None:
        for _ in range(requests):
            server.handle_request()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        thread.join(timeout=15)
        server.server_close()


def _metrics(req: BaseHTTPRequestHandler) -> None:
    body = METRICS.encode()
    req.send_response(200)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def test_an_upper_case_scheme_is_a_url() -> None:
    assert is_url("HTTP://host/metrics") and is_url("Https://host/metrics")
    with serve(_metrics) as base:
        text, name = read_metrics(base.replace("http://", "HTTP://") + "/metrics")
    assert (text, name) == (METRICS, "vllm-metrics")


@pytest.mark.parametrize("in_headers", [False, True])
def test_a_trickling_server_is_cut_off_at_the_deadline(in_headers: bool) -> None:
    def trickle(req: BaseHTTPRequestHandler) -> None:
        head = b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n"
        if not in_headers:
            req.wfile.write(head)
        for byte in (head if in_headers else b"#" * 100):
            req.wfile.write(bytes([byte]))  # a byte every 0.1 s: each read is quick, the
            req.wfile.flush()  # whole is not
            time.sleep(0.1)

    with serve(trickle) as base:
        start = time.monotonic()
        with pytest.raises(SpecError) as err:
            fetch_metrics(f"{base}/metrics", timeout_s=5, deadline_s=0.5)
        assert time.monotonic() - start < 30  # generous: the server alone would take 10 s
    assert _one_line(err) == f"{base}/metrics: no complete answer within 0.5 s"


def test_a_redirect_to_ftp_is_refused() -> None:
    def to_ftp(req: BaseHTTPRequestHandler) -> None:
        req.send_response(302)
        req.send_header("Location", "ftp://127.0.0.1/metrics")
        req.send_header("Content-Length", "0")
        req.end_headers()

    with serve(to_ftp) as base, pytest.raises(SpecError) as err:
        fetch_metrics(f"{base}/metrics", timeout_s=5)
    assert "(redirected to ftp://127.0.0.1/metrics): only http:// and https://" in \
        _one_line(err)


def test_a_redirect_to_http_is_followed() -> None:
    def hop(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/metrics":
            _metrics(req)
            return
        req.send_response(301)
        req.send_header("Location", "/metrics")
        req.send_header("Content-Length", "0")
        req.end_headers()

    with serve(hop, requests=2) as base:
        assert fetch_metrics(f"{base}/old", timeout_s=5) == METRICS


def test_a_body_shorter_than_its_content_length_is_refused() -> None:
    def short(req: BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Length", "1000")
        req.end_headers()
        req.wfile.write(b"vllm:spec_decode")
        req.close_connection = True

    with serve(short) as base, pytest.raises(SpecError) as err:
        fetch_metrics(f"{base}/metrics", timeout_s=5)
    assert "the answer ended after 16 of its 1,000 bytes" in _one_line(err)


def test_a_page_over_the_size_cap_is_refused() -> None:
    with serve(_metrics, requests=1) as base, pytest.raises(SpecError) as err:
        fetch_metrics(f"{base}/metrics", timeout_s=5, limit=100)
    assert f"page of {len(METRICS.encode())} bytes, larger than 100" in _one_line(err)


# ---- CSV: encoding errors are one line naming the file ---------------------------------------

def test_non_utf8_vidur_tables_are_one_line(tmp_path: Path) -> None:
    mlp = tmp_path / "compute" / "a100" / "org" / "model" / "mlp.csv"
    mlp.parent.mkdir(parents=True)
    mlp.write_bytes(b"n_head,num_tokens\n32,caf\xe9\n")
    with pytest.raises(SpecError) as err:
        read_vidur_mlp(tmp_path, device="a100")
    assert _one_line(err) == (f"{mlp}: not UTF-8 text (byte 0xe9 at offset 24); save it as "
                              "UTF-8")
    attention = _write(tmp_path / "attention.csv", "x")
    attention.write_bytes(b"\xff\xfe\x00")  # a UTF-16 BOM and half a character
    with pytest.raises(SpecError, match="malformed UTF-16 text"):
        read_vidur_attention(attention)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("device,time_ms\nA100 \u00b5s,1\n".encode("latin-1"))
    with pytest.raises(SpecError, match=r"latin\.csv: not UTF-8 text"):
        read_vidur_attention(latin)


def test_a_profile_csv_field_over_the_csv_limit_is_one_line(tmp_path: Path) -> None:
    from specsim.measurement.profile_csv import PROFILE_COLUMNS, read_profile

    row = ",".join(["x" * 200_000] + ["1"] * (len(PROFILE_COLUMNS) - 1))
    path = _write(tmp_path / "p.csv", ",".join(PROFILE_COLUMNS) + "\n" + row + "\n")
    with pytest.raises(SpecError) as err:
        read_profile(path)
    assert "line 2: not a CSV row (field larger than field limit" in _one_line(err)


# ---- NPZ: the inflated size is checked from the headers before loading -----------------------

def _zeros_npz(path: Path, shape: tuple[int, ...]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("probs.npy", "w") as handle:
        np.save(handle, np.zeros(shape, dtype=np.float64))
    return path


def test_an_npz_bomb_is_refused_before_it_is_inflated(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = _zeros_npz(tmp_path / "bomb.npz", (1000, 1000))  # 8 MB of zeros
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(prob_arrays, "MAX_NPZ_BYTES", 2**20)

    def loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("np.load ran")

    monkeypatch.setattr(prob_arrays.np, "load", loaded)
    with pytest.raises(SpecError) as err:
        load_prob_arrays(path)
    assert _one_line(err) == (f"{path}: arrays inflate to 8 MiB, more than 1 MiB; give top-k "
                              "arrays or fewer rollouts")


def test_an_npy_header_claiming_more_than_its_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "liar.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("probs.npy", "w") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f8", "fortran_order": False, "shape": (100_000, 100_000, 10)})
        handle.write(bytes(800))
    with pytest.raises(SpecError) as err:
        load_prob_arrays(path)
    assert "array 'probs' of shape (100000, 100000, 10) (float64) needs 762,939 MiB but the " \
        "file holds" in _one_line(err)
    result = run("acceptance", "from-probs", str(path), str(path), "--out",
                 str(tmp_path / "o.yaml"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "o.yaml").exists()


def test_a_small_honest_npz_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.npz"
    np.savez_compressed(path, probs=np.full((2, 3, 4), 0.25))
    assert load_prob_arrays(path).shape == (2, 3)


def test_written_yaml_reads_back_as_written_under_yaml_1_2(tmp_path: Path) -> None:
    from specsim.specs.io import parse_yaml
    from specsim.specs.outputs import write_yaml

    # Strings that PyYAML's YAML 1.1 writer leaves unquoted but a YAML 1.2 reader takes for
    # numbers or null; each must come back as the same string.
    data = {"octal": "0o17", "exp": "1e3", "hex": "0x1F", "lead": "032", "null": "null",
            "flag": "yes", "empty": "", "colon": "a: b", "dash": "- x", "two": "a\nb",
            "number": 1.5, "integer": 7}
    path = tmp_path / "w.yaml"
    write_yaml(path, data, force=False)
    assert parse_yaml(path.read_text(), path) == data
