"""The profile CSV format: write/read round trip, each malformed file, model-shape checks.

Shapes are derived by hand from the models' config.json numbers (workloads/models/*.yaml):
Llama-3.1-8B: hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 14336, vocab
128256; Llama-2-7B: hidden 4096, 32 heads, 32 KV heads, head_dim 128, vocab 32000.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from specsim.errors import SpecError
from specsim.measurement.profile_csv import (
    PROFILE_COLUMNS,
    check_profile_matches_model,
    read_profile,
    write_profile,
)
from specsim.specs.models import load_model

HEADER = ("device,backend,model,tp,op,op_class,dtype,m,k,n,count,batch,context,queries,mask,"
          "time_median_s,time_p10_s,time_p90_s,repeats")
# Llama-3.1-8B at TP 1: qkv_proj k x n = 4096 x (32*128 + 2*8*128) = 4096 x 6144;
# attention 32 heads x head_dim 128; sampling over the 128256-token vocabulary.
ROWS = [
    "NVIDIA H200,torch,llama-3.1-8b,1,qkv_proj,gemm,bf16,128,4096,6144,1,0,0,0,none,"
    "2.0e-05,1.9e-05,2.2e-05,30",
    "NVIDIA H200,torch,llama-3.1-8b,1,o_proj,gemm,bf16,1,4096,4096,1,0,0,0,none,"
    "9.0e-06,8.5e-06,9.5e-06,30",
    "NVIDIA H200,torch,llama-3.1-8b,1,attention_decode,attention,bf16,0,32,128,0,4,2048,1,none,"
    "1.5e-05,1.4e-05,1.6e-05,30",
    "NVIDIA H200,torch,llama-3.1-8b,1,attention_tree,attention,bf16,0,32,128,0,1,512,8,tree,"
    "3.0e-05,2.9e-05,3.3e-05,30",
    "NVIDIA H200,torch,llama-3.1-8b,1,sampling,memory,bf16,8,0,128256,0,0,0,0,none,"
    "4.0e-05,3.9e-05,4.1e-05,30",
]
METADATA = ["# specsim_version: 0.1.0", "# command: specsim profile --model llama-3.1-8b"]
FIRST_ROW_LINE = len(METADATA) + 2  # metadata lines, the header, then the data


def _write(tmp_path: Path, header: str = HEADER, rows: list[str] | None = None,
           metadata: list[str] | None = None) -> Path:
    path = tmp_path / "profile.csv"
    lines = (METADATA if metadata is None else metadata) + [header] + \
        (ROWS if rows is None else rows)
    path.write_text("\n".join(lines) + "\n")
    return path


def _set_field(row: str, column: str, value: str) -> str:
    fields = row.split(",")
    fields[PROFILE_COLUMNS.index(column)] = value
    return ",".join(fields)


def test_read_profile_parses_rows_types_and_metadata(tmp_path: Path) -> None:
    frame, metadata = read_profile(_write(tmp_path))
    assert list(frame.columns) == list(PROFILE_COLUMNS)
    assert len(frame) == 5
    assert frame.loc[0, "n"] == 6144 and frame.loc[0, "time_median_s"] == pytest.approx(2.0e-5)
    assert frame["m"].dtype.kind == "i" and frame["time_p90_s"].dtype.kind == "f"
    assert metadata == {"specsim_version": "0.1.0",
                        "command": "specsim profile --model llama-3.1-8b"}


def test_round_trip_keeps_rows_and_metadata_and_pandas_reads_body(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    out = tmp_path / "copy.csv"
    metadata = {"device": "NVIDIA H200", "command": "specsim profile --out a:b.csv",
                "note": "two\nlines"}
    write_profile(frame, out, metadata)
    again, meta_again = read_profile(out)
    pd.testing.assert_frame_equal(again, frame)
    # values keep their colons; a newline in a value becomes a space (one line per key)
    assert meta_again == {"device": "NVIDIA H200", "command": "specsim profile --out a:b.csv",
                          "note": "two lines"}
    body = pd.read_csv(out, comment="#")
    assert list(body.columns) == list(PROFILE_COLUMNS) and len(body) == 5
    assert out.read_text().startswith("# device: NVIDIA H200\n")


def test_write_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    out = tmp_path / "out.csv"
    out.write_text("keep me\n")
    with pytest.raises(SpecError, match="out.csv: exists; pass --force"):
        write_profile(frame, out, {})
    assert out.read_text() == "keep me\n"
    write_profile(frame, out, {"a": 1}, force=True)
    assert read_profile(out)[1] == {"a": "1"}


def test_write_into_missing_folder_is_spec_error(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    with pytest.raises(SpecError, match="does not exist"):
        write_profile(frame, tmp_path / "no" / "out.csv", {})


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    frame, _ = read_profile(_write(tmp_path))
    out = tmp_path / "out.csv"
    out.write_text("old\n")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(SpecError, match="out.csv: cannot write .disk full"):
        write_profile(frame, out, {}, force=True)
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "profile.csv"]


def test_write_validates_before_touching_the_file(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    frame.loc[1, "time_p10_s"] = -1.0
    out = tmp_path / "bad.csv"
    with pytest.raises(SpecError, match=r"bad.csv: row 1, column 'time_p10_s'"):
        write_profile(frame, out, {})
    assert not out.exists()


def _rows_with(column: str, value: str, row: int = 0) -> list[str]:
    rows = list(ROWS)
    rows[row] = _set_field(rows[row], column, value)
    return rows


def _drop_column(column: str) -> tuple[str, list[str]]:
    index = PROFILE_COLUMNS.index(column)

    def drop(line: str) -> str:
        fields = line.split(",")
        return ",".join(fields[:index] + fields[index + 1:])

    return drop(HEADER), [drop(r) for r in ROWS]


# (case, how to write the file, what the one-line message must name besides the file)
MALFORMED: list[tuple[str, Callable[[Path], Path], list[str]]] = [
    ("empty_file", lambda p: _write(p, header="", rows=[], metadata=[]), ["empty profile"]),
    ("metadata_only", lambda p: _write(p, header="", rows=[]), ["empty profile"]),
    ("header_only", lambda p: _write(p, rows=[]), ["truncated", "no data rows"]),
    ("ragged_row_cut_short", lambda p: _write(p, rows=ROWS[:2] + [ROWS[2][:40]]),
     [f"line {FIRST_ROW_LINE + 2}", "fields"]),
    ("ragged_row_too_long", lambda p: _write(p, rows=[ROWS[0] + ",7"] + ROWS[1:]),
     [f"line {FIRST_ROW_LINE}", "20 fields"]),
    ("missing_column", lambda p: _write(p, *_drop_column("repeats")),
     ["missing column", "'repeats'"]),
    ("unknown_column", lambda p: _write(p, HEADER + ",gpu_temp", [r + ",55" for r in ROWS]),
     ["unknown column", "'gpu_temp'"]),
    ("nan_time", lambda p: _write(p, rows=_rows_with("time_median_s", "nan", 1)),
     [f"line {FIRST_ROW_LINE + 1}", "column 'time_median_s'", "not a finite number"]),
    ("empty_time", lambda p: _write(p, rows=_rows_with("time_p90_s", "")),
     [f"line {FIRST_ROW_LINE}", "column 'time_p90_s'"]),
    ("negative_time", lambda p: _write(p, rows=_rows_with("time_p10_s", "-1e-6")),
     ["column 'time_p10_s'", "> 0"]),
    ("zero_time", lambda p: _write(p, rows=_rows_with("time_median_s", "0", 4)),
     [f"line {FIRST_ROW_LINE + 4}", "column 'time_median_s'", "> 0"]),
    ("p10_above_median", lambda p: _write(p, rows=_rows_with("time_p10_s", "2.1e-05")),
     ["column 'time_p10_s'", "p10 <= median <= p90"]),
    ("median_above_p90", lambda p: _write(p, rows=_rows_with("time_median_s", "2.3e-05")),
     ["column 'time_p90_s'", "p10 <= median <= p90"]),
    ("fractional_m", lambda p: _write(p, rows=_rows_with("m", "128.5")),
     ["column 'm'", "'128.5' is not an integer"]),
    ("text_k", lambda p: _write(p, rows=_rows_with("k", "4k")),
     ["column 'k'", "not an integer"]),
    ("negative_context", lambda p: _write(p, rows=_rows_with("context", "-5", 2)),
     [f"line {FIRST_ROW_LINE + 2}", "column 'context'", ">= 0"]),
    ("zero_tp", lambda p: _write(p, rows=_rows_with("tp", "0")), ["column 'tp'", ">= 1"]),
    ("unknown_op_class", lambda p: _write(p, rows=_rows_with("op_class", "gemv")),
     ["column 'op_class'", "'gemv' is not one of gemm, attention, memory"]),
    ("unknown_attention_op", lambda p: _write(p, rows=_rows_with("op", "flash", 2)),
     ["column 'op'", "'flash'"]),
    ("wrong_mask", lambda p: _write(p, rows=_rows_with("mask", "causal", 3)),
     ["column 'mask'", "'tree'"]),
    ("gemm_without_rows", lambda p: _write(p, rows=_rows_with("m", "0")),
     ["column 'm'", "needs m >= 1"]),
    ("empty_device", lambda p: _write(p, rows=_rows_with("device", "")),
     ["column 'device'", "empty"]),
]


@pytest.mark.parametrize("make, needles", [(m, n) for _, m, n in MALFORMED],
                         ids=[case for case, _, _ in MALFORMED])
def test_malformed_profile_is_one_spec_error_naming_file_and_place(
        tmp_path: Path, make: Callable[[Path], Path], needles: list[str]) -> None:
    path = make(tmp_path)
    with pytest.raises(SpecError) as info:
        read_profile(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    for needle in needles:
        assert needle in message


def test_missing_file_is_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="nope.csv: cannot read"):
        read_profile(tmp_path / "nope.csv")


def test_profile_matches_its_own_model(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    check_profile_matches_model(frame, load_model("llama-3.1-8b"), 1)


def test_profile_of_another_model_names_op_and_both_shapes(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    # Llama-2-7B (32 KV heads): qkv_proj n = 4096 + 2 * 32 * 128 = 12288
    with pytest.raises(SpecError) as info:
        check_profile_matches_model(frame, load_model("llama-2-7b"), 1)
    assert str(info.value) == (
        f"{tmp_path / 'profile.csv'}: op qkv_proj has k x n = 4096 x 6144 but llama-2-7b at "
        "TP 1 has 4096 x 12288; was it measured for another model?")


def test_profile_at_another_tp_degree_is_rejected(tmp_path: Path) -> None:
    frame, _ = read_profile(_write(tmp_path))
    with pytest.raises(SpecError, match="measured at TP 1 but TP 2 was asked for"):
        check_profile_matches_model(frame, load_model("llama-3.1-8b"), 2)


def test_gemm_op_the_model_lacks_is_rejected(tmp_path: Path) -> None:
    rows = [_set_field(ROWS[0], "op", "experts_up")]
    frame, _ = read_profile(_write(tmp_path, rows=rows))
    with pytest.raises(SpecError, match="op experts_up is not a weight GEMM of llama-3.1-8b"):
        check_profile_matches_model(frame, load_model("llama-3.1-8b"), 1)


def test_attention_heads_and_vocabulary_are_checked(tmp_path: Path) -> None:
    model = load_model("llama-3.1-8b")
    frame, _ = read_profile(_write(tmp_path, rows=[_set_field(ROWS[2], "k", "16")]))
    with pytest.raises(SpecError, match=r"16 heads x head dim 128 per GPU .* has 32 x 128"):
        check_profile_matches_model(frame, model, 1)
    frame, _ = read_profile(_write(tmp_path, rows=[_set_field(ROWS[4], "n", "32000")]))
    with pytest.raises(SpecError, match="n = 32000 tokens but llama-3.1-8b has a vocabulary "
                                        "of 128256"):
        check_profile_matches_model(frame, model, 1)
