"""Tests of specsim.measurement.vllm_metrics with hand-written metrics pages and log lines.

Formats follow vLLM's vllm/v1/spec_decode/metrics.py (counter names, the position label, and
the "SpecDecoding metrics:" log line in its versions with and without throughputs).
"""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.measurement.vllm_metrics import (
    SpecDecodeCounts,
    parse_log_line,
    parse_prometheus_metrics,
    parse_vllm_log,
)

# Two engines of one server. Engine 0: 100 drafts, accepted per position (90, 60, 30);
# engine 1: 60 drafts, (30, 20, 10). Hand totals: n = 160, a = (120, 80, 40), accepted 240,
# drafted 3 * 160 = 480.
METRICS_PAGE = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="meta-llama/Llama-3.1-8B"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="meta-llama/Llama-3.1-8B"} 60.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="meta-llama/Llama-3.1-8B"} 1.7e9
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="meta-llama/Llama-3.1-8B"} 180.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B"} 180.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="meta-llama/Llama-3.1-8B"} 60.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 10.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
"""

# One server, no suffix, no labels besides position: n = 50, a = (40, 20), accepted 60, drafted 100.
BARE_PAGE = """\
vllm:spec_decode_num_drafts 50
vllm:spec_decode_num_draft_tokens 100
vllm:spec_decode_num_accepted_tokens 60
vllm:spec_decode_num_accepted_tokens_per_pos{position="1"} 20
vllm:spec_decode_num_accepted_tokens_per_pos{position="0"} 40
"""

# Newest log format. Hand numbers: n = 500, a = (400, 300, 150): accepted 850, drafted 1500,
# rates 0.800, 0.600, 0.300, mean length 1 + 1.7 = 2.70, acceptance 850 / 1500 = 56.7%.
LOG_NEW = (
    "INFO 05-12 10:00:00 [metrics.py:86] SpecDecoding metrics: Mean acceptance length: 2.70, "
    "Accepted throughput: 85.00 tokens/s, Drafted throughput: 150.00 tokens/s, "
    "Accepted: 850 tokens, Drafted: 1500 tokens, "
    "Per-position acceptance rate: 0.800, 0.600, 0.300, Avg Draft acceptance rate: 56.7%"
)
# Older format, second interval: n = 100, a = (50, 20, 10): accepted 80, drafted 300,
# rates 0.500, 0.200, 0.100, mean length 1.80, acceptance 26.7%.
LOG_OLD = (
    "INFO 05-12 10:00:10 [metrics.py:70] SpecDecoding metrics: Draft acceptance rate: 26.7%, "
    "Mean acceptance length: 1.80, Accepted: 80 tokens, Drafted: 300 tokens, "
    "Per-position acceptance rate: 0.500, 0.200, 0.100"
)
# Oldest format: no per-position data.
LOG_OLDEST = (
    "INFO SpecDecoding metrics: Draft acceptance rate: 56.7%, Accepted: 850 tokens, "
    "Drafted: 1500 tokens"
)


def test_prometheus_sums_engines_and_derives_conditional_alphas() -> None:
    counts = parse_prometheus_metrics(METRICS_PAGE, source="metrics.txt")
    assert counts.num_drafts == 160 and counts.num_draft_tokens == 480
    assert counts.num_accepted_tokens == 240
    assert counts.accepted_per_position == (120.0, 80.0, 40.0)
    # alpha = 120/160, 80/120, 40/80; marginal = 120/160, 80/160, 40/160
    np.testing.assert_allclose(counts.conditional_alphas, [0.75, 2 / 3, 0.5])
    np.testing.assert_allclose(counts.marginal_rates, [0.75, 0.5, 0.25])
    assert counts.mean_acceptance_length == pytest.approx(2.5)  # 1 + 240 / 160
    assert counts.draft_acceptance_rate == pytest.approx(0.5)
    assert counts.gamma == 3


def test_prometheus_without_total_suffix_and_unordered_positions() -> None:
    counts = parse_prometheus_metrics(BARE_PAGE)
    assert counts.accepted_per_position == (40.0, 20.0)
    np.testing.assert_allclose(counts.conditional_alphas, [0.8, 0.5])
    assert counts.mean_acceptance_length == pytest.approx(2.2)  # 1 + 60 / 50


def test_profile_from_counts_reproduces_mean_acceptance_length() -> None:
    # independent route: tau from conditional alphas vs 1 + accepted / drafts
    counts = parse_prometheus_metrics(METRICS_PAGE)
    profile = counts.to_profile()
    assert profile.tau(3) == pytest.approx(1 + 240 / 160)
    assert profile.source == "metrics"


def replace_line(page: str, prefix: str, new_line: str) -> str:
    return "\n".join(new_line if line.startswith(prefix) else line for line in page.splitlines())


def test_prometheus_missing_counter_is_named() -> None:
    page = "\n".join(line for line in BARE_PAGE.splitlines() if "num_drafts" not in line)
    with pytest.raises(SpecError, match="vllm:spec_decode_num_drafts"):
        parse_prometheus_metrics(page, source="m.txt")


def test_prometheus_missing_per_position_is_named() -> None:
    page = "\n".join(line for line in BARE_PAGE.splitlines() if "per_pos" not in line)
    with pytest.raises(SpecError, match="per_pos"):
        parse_prometheus_metrics(page)


def test_prometheus_negative_counter_rejected() -> None:
    page = replace_line(BARE_PAGE, "vllm:spec_decode_num_draft_tokens",
                        "vllm:spec_decode_num_draft_tokens -5")
    with pytest.raises(SpecError, match="num_draft_tokens"):
        parse_prometheus_metrics(page)


def test_prometheus_later_position_above_earlier_rejected() -> None:
    page = BARE_PAGE.replace('position="1"} 20', 'position="1"} 45')
    page = page.replace("accepted_tokens 60", "accepted_tokens 85")
    with pytest.raises(SpecError, match="position 1"):
        parse_prometheus_metrics(page)


def test_prometheus_first_position_above_drafts_rejected() -> None:
    page = BARE_PAGE.replace("num_drafts 50", "num_drafts 30")
    with pytest.raises(SpecError, match="num_drafts"):
        parse_prometheus_metrics(page)


def test_prometheus_per_position_sum_must_match_accepted() -> None:
    page = BARE_PAGE.replace("accepted_tokens 60", "accepted_tokens 61")
    with pytest.raises(SpecError, match="sum to 60"):
        parse_prometheus_metrics(page)


def test_prometheus_gap_in_positions_rejected() -> None:
    page = BARE_PAGE.replace('position="1"', 'position="2"')
    with pytest.raises(SpecError, match="lacks positions \\[1\\]"):
        parse_prometheus_metrics(page)


def test_prometheus_zero_drafts_rejected() -> None:
    page = (
        "vllm:spec_decode_num_drafts_total 0\nvllm:spec_decode_num_draft_tokens_total 0\n"
        "vllm:spec_decode_num_accepted_tokens_total 0\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 0\n'
    )
    with pytest.raises(SpecError, match="no speculative rounds"):
        parse_prometheus_metrics(page)


def test_log_line_newest_format() -> None:
    counts = parse_log_line(LOG_NEW)
    assert counts is not None
    assert counts.num_drafts == pytest.approx(500)
    np.testing.assert_allclose(counts.accepted_per_position, [400, 300, 150])
    np.testing.assert_allclose(counts.conditional_alphas, [0.8, 0.75, 0.5])
    np.testing.assert_allclose(counts.marginal_rates, [0.8, 0.6, 0.3])
    assert counts.mean_acceptance_length == pytest.approx(2.7)


def test_log_line_older_format() -> None:
    counts = parse_log_line(LOG_OLD)
    assert counts is not None
    assert counts.num_drafts == pytest.approx(100)
    np.testing.assert_allclose(counts.conditional_alphas, [0.5, 0.4, 0.5])


def test_log_aggregates_intervals_and_ignores_other_lines() -> None:
    text = "\n".join(["INFO starting server", LOG_NEW, "INFO GET /v1/completions 200", LOG_OLD])
    counts = parse_vllm_log(text, source="server.log")
    # n = 600, a = (450, 320, 160): alpha = 450/600, 320/450, 160/320
    assert counts.num_drafts == pytest.approx(600)
    np.testing.assert_allclose(counts.conditional_alphas, [0.75, 320 / 450, 0.5])
    assert counts.mean_acceptance_length == pytest.approx(1 + 930 / 600)
    assert counts.num_draft_tokens == 1800


def test_log_without_per_position_rates_rejected() -> None:
    with pytest.raises(SpecError, match="Per-position"):
        parse_vllm_log(LOG_OLDEST, source="old.log")


def test_log_without_spec_lines_rejected() -> None:
    with pytest.raises(SpecError, match="SpecDecoding metrics"):
        parse_vllm_log("INFO nothing here\n")


def test_log_interval_without_drafts_is_skipped() -> None:
    idle = (
        "SpecDecoding metrics: Mean acceptance length: nan, Accepted: 0 tokens, "
        "Drafted: 0 tokens, Per-position acceptance rate: nan, nan, nan, "
        "Avg Draft acceptance rate: nan%"
    )
    assert parse_log_line(idle) is None
    counts = parse_vllm_log("\n".join([idle, LOG_NEW]))
    assert counts.num_drafts == pytest.approx(500)


def test_log_inconsistent_mean_length_rejected() -> None:
    line = LOG_NEW.replace("Mean acceptance length: 2.70", "Mean acceptance length: 3.10")
    with pytest.raises(SpecError, match="mean acceptance length"):
        parse_log_line(line, source="s.log:7")


def test_log_inconsistent_acceptance_percent_rejected() -> None:
    line = LOG_NEW.replace("56.7%", "66.7%")
    with pytest.raises(SpecError, match="draft acceptance rate"):
        parse_log_line(line)


def test_log_increasing_rates_rejected() -> None:
    line = LOG_OLD.replace("0.500, 0.200, 0.100", "0.500, 0.200, 0.300").replace("1.80", "2.00")
    line = line.replace("Accepted: 80", "Accepted: 100").replace("26.7%", "33.3%")
    with pytest.raises(SpecError, match="exceeds"):
        parse_log_line(line)


def test_counts_validation_names_source() -> None:
    with pytest.raises(SpecError, match="bench.json"):
        SpecDecodeCounts(
            num_drafts=10, num_draft_tokens=5, num_accepted_tokens=8,
            accepted_per_position=(5.0, 3.0), source="bench.json",
        )
    with pytest.raises(SpecError, match="finite"):
        SpecDecodeCounts(
            num_drafts=10, num_draft_tokens=30, num_accepted_tokens=float("nan"),
            accepted_per_position=(5.0,), source="x",
        )


def test_unreached_position_has_zero_conditional_alpha() -> None:
    counts = SpecDecodeCounts(
        num_drafts=10, num_draft_tokens=30, num_accepted_tokens=4,
        accepted_per_position=(4.0, 0.0, 0.0), source="x",
    )
    np.testing.assert_allclose(counts.conditional_alphas, [0.4, 0.0, 0.0])
