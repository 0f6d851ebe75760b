"""`specsim plan` writes its report folder whole and safely (issue 23).

The folder is rendered into a fresh hidden folder beside --out and renamed into place, under a
lock: planted symbolic links are never written through, a failure or a crash leaves the old
report or the new one (never a mix), --force leaves no stale file, names derived from specs are
slugs, and OS trouble with the path is one line with exit 2.

Plots are replaced by a fixed PNG stub (drawing them takes seconds; test_plan.py checks the real
ones) and plans are made for TP 1 only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import specsim.present.report_hardware as report_hardware
import specsim.present.report_speculation as report_speculation
import specsim.serving.plan as serving_plan
import specsim.specs.outputs as spec_io
from specsim.errors import SpecError
from specsim.present.report import write_report
from specsim.specs.outputs import OutputFolder, atomic_write_bytes, check_writable, file_slug
from specsim.specs.paths import builtin_dir

STUB_PNG = b"\x89PNG\r\n\x1a\nstub"
REAL_MAKE_PLAN = serving_plan.make_plan
EAGLE3, EAGLE = "eagle3-llama-3.1-8b", "eagle-llama-3.1-8b"
MODEL = ("--model", "llama-3.1-8b", "--hardware", "h100-sxm")


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stub plots, and plans for TP 1 only, in the library and behind the CLI."""
    def stub_png(draw: Callable[[Any], None], size: object = None) -> bytes:
        return STUB_PNG

    monkeypatch.setattr(report_speculation, "png_bytes", stub_png)
    monkeypatch.setattr(report_hardware, "png_bytes", stub_png)

    def make_plan(**kwargs: Any) -> Any:
        kwargs.setdefault("tps", (1,))
        return REAL_MAKE_PLAN(**kwargs)

    monkeypatch.setattr(serving_plan, "make_plan", make_plan)


def _plan(*drafters: str) -> Any:
    return REAL_MAKE_PLAN(hardware="h100-sxm", model="llama-3.1-8b", drafters=list(drafters),
                          engine="roofline", workload="chat", tps=(1,))


@pytest.fixture(scope="module")
def plans() -> dict[str, Any]:
    """One plan per drafter set, made once (the plan itself is not what is tested here)."""
    return {"eagle3": _plan(EAGLE3), "both": _plan(EAGLE3, EAGLE)}


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


def run(*args: str) -> Outcome:
    """`specsim ARGS` in this process, as the console script runs it (exit code, streams)."""
    from specsim.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["specsim", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = argv
    return Outcome(code, out.getvalue(), err.getvalue())


def error_line(outcome: Outcome) -> str:
    """The one error line of a refused run (exit 2), after any progress lines."""
    assert outcome.code == 2, (outcome.code, outcome.stderr[-600:])
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("specsim:")]
    assert len(errors) == 1 and "Traceback" not in outcome.stderr, outcome.stderr[-600:]
    return errors[0]


def files_under(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under root, hidden ones included: modification time and contents."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def entries(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def old_report(out: Path) -> dict[str, tuple[int, bytes]]:
    """An existing report (a file of each kind) in `out`, as a user's earlier run left it."""
    out.mkdir(parents=True)
    for name, data in {"report.md": b"# old\n", "report.html": b"<p>old</p>",
                       "tn.png": b"old png", "slo.csv": b"old,csv\n",
                       "speedup-old-drafter.png": b"old speedup"}.items():
        (out / name).write_bytes(data)
    return files_under(out)


# ---- symbolic links ----------------------------------------------------------------------------

@pytest.mark.parametrize("force", [False, True])
def test_planted_symlinks_are_never_written_through(tmp_path: Path, force: bool) -> None:
    secret, other = tmp_path / "secret.txt", tmp_path / "other.png"
    secret.write_bytes(b"do not touch\n")
    other.write_bytes(b"nor this")
    os.utime(secret, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(secret)
    (out / "x.png").symlink_to(other)
    before = files_under(tmp_path)
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out),
                 *(("--force",) if force else ()))
    assert secret.read_bytes() == b"do not touch\n" and other.read_bytes() == b"nor this"
    assert secret.stat().st_mtime_ns == before["secret.txt"][0]
    assert other.stat().st_mtime_ns == before["other.png"][0]
    if not force:
        assert "exists and is not empty; pass --force" in error_line(result)
        assert (out / "report.html").is_symlink()
        return
    assert result.code == 0, result.stderr[-600:]
    # the folder was replaced whole: real files, and the planted links are gone
    assert not (out / "report.html").is_symlink() and (out / "report.html").is_file()
    assert not (out / "x.png").exists() and not (out / "x.png").is_symlink()
    assert entries(tmp_path) == ["other.png", "out", "secret.txt"]


def test_symlinks_planted_after_the_check_are_not_written_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: --out is an empty folder when checked; links appear while the plan runs."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"do not touch\n")
    out = tmp_path / "out"
    out.mkdir()
    real = serving_plan.make_plan

    def plant_then_plan(**kwargs: Any) -> Any:
        (out / "report.html").symlink_to(secret)
        (out / "tn.png").symlink_to(secret)
        return real(**kwargs)

    monkeypatch.setattr(serving_plan, "make_plan", plant_then_plan)
    mtime = secret.stat().st_mtime_ns
    line = error_line(run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out)))
    assert "exists and is not empty" in line
    assert secret.read_bytes() == b"do not touch\n" and secret.stat().st_mtime_ns == mtime
    assert sorted(os.listdir(out)) == ["report.html", "tn.png"]
    assert entries(tmp_path) == ["out", "secret.txt"]  # no temporary folder, no lock left


def test_out_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    old = old_report(real)
    (tmp_path / "link").symlink_to(real)
    line = error_line(run("plan", *MODEL, "--out", str(tmp_path / "link"), "--force"))
    assert "is a symbolic link" in line and "give the folder it points to" in line
    assert files_under(real) == old and (tmp_path / "link").is_symlink()
    assert entries(tmp_path) == ["link", "real"]


# ---- failures and crashes ------------------------------------------------------------------------

def test_a_failing_plot_leaves_the_old_report_and_no_temporary_folder(
        tmp_path: Path, plans: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    old = old_report(out)

    def broken(*args: object) -> bytes:
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(report_speculation, "_speedup_png", broken)
    with pytest.raises(RuntimeError, match="plotting failed"):
        write_report(plans["eagle3"], out, force=True)
    assert files_under(out) == old
    assert entries(tmp_path) == ["out"]


def test_a_disk_error_mid_write_leaves_the_old_report(
        tmp_path: Path, plans: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The third file written fails (disk full): one line, old report as it was, nothing
    left beside it."""
    out = tmp_path / "out"
    old = old_report(out)
    calls = []
    real_fsync = os.fsync

    def full(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(SpecError, match="No space left on device.*left as it was"):
        write_report(plans["eagle3"], out, force=True)
    assert files_under(out) == old
    assert entries(tmp_path) == ["out"]


def test_a_failed_second_rename_puts_the_old_report_back(
        tmp_path: Path, plans: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an atomic exchange (not Linux, or a filesystem without it) --force takes two
    renames; if the second fails, the first is undone."""
    out = tmp_path / "out"
    old = old_report(out)
    monkeypatch.setattr(spec_io, "_exchange", lambda first, second: False)
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        if ".tmp-" in str(src) and Path(dst) == out:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(SpecError, match="Input/output error"):
        write_report(plans["eagle3"], out, force=True)
    assert files_under(out) == old
    assert entries(tmp_path) == ["out"]


def test_force_without_the_atomic_exchange_replaces_the_folder(
        tmp_path: Path, plans: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    old_report(out)
    monkeypatch.setattr(spec_io, "_exchange", lambda first, second: False)
    written = write_report(plans["eagle3"], out, force=True)
    assert sorted(p.name for p in written) == entries(out)
    assert "speedup-old-drafter.png" not in entries(out)
    assert entries(tmp_path) == ["out"]


def _killed_run_leftovers(parent: Path, name: str) -> None:
    """What `kill -9` leaves beside --out: a half-written temporary folder and the lock file
    (the OS dropped the lock with the process)."""
    tmp = parent / f".{name}.tmp-k1ll3d_9"
    tmp.mkdir()
    (tmp / "tn.png").write_bytes(b"half")
    (parent / f".{name}.lock").write_bytes(b"")


def test_a_killed_run_does_not_block_the_next(tmp_path: Path) -> None:
    _killed_run_leftovers(tmp_path, "out")
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(tmp_path / "out"))
    assert result.code == 0, result.stderr[-600:]
    assert entries(tmp_path) == ["out"]  # leftovers removed, lock released
    assert "report.md" in entries(tmp_path / "out") and (tmp_path / "out" / "tn.png"
                                                           ).read_bytes() == STUB_PNG


def test_a_killed_force_run_does_not_block_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old = old_report(out)
    _killed_run_leftovers(tmp_path, "out")
    line = error_line(run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out)))
    assert "exists and is not empty" in line  # the old report is still the user's
    assert files_under(out) == old
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out), "--force")
    assert result.code == 0, result.stderr[-600:]
    assert entries(tmp_path) == ["out"]


def test_a_crash_between_the_two_renames_restores_the_old_report(tmp_path: Path) -> None:
    """Where --force takes two renames, a crash between them leaves --out missing, the old
    report in a hidden backup beside it and the new one in the temporary folder: the next run
    puts the old report back before anything else."""
    out = tmp_path / "out"
    old = old_report(out)
    os.rename(out, tmp_path / ".out.old-abcd_123")
    new = tmp_path / ".out.tmp-wxyz_789"
    new.mkdir()
    (new / "report.md").write_bytes(b"# new\n")
    line = error_line(run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out)))
    assert "exists and is not empty" in line
    assert files_under(out) == old
    assert entries(tmp_path) == ["out"]


def test_a_backup_left_after_the_swap_is_removed(tmp_path: Path) -> None:
    """A crash after the swap, while the old folder was being deleted: --out holds the new
    report, the backup beside it is garbage."""
    out = tmp_path / "out"
    new = old_report(out)
    backup = tmp_path / ".out.old-abcd_123"
    backup.mkdir()
    (backup / "report.md").write_bytes(b"# older\n")
    # a refused run changes nothing, the garbage included; it does not block a --force run
    assert "not empty" in error_line(run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out)))
    assert files_under(out) == new
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out), "--force")
    assert result.code == 0, result.stderr[-600:]
    assert entries(tmp_path) == ["out"] and "speedup-old-drafter.png" not in entries(out)


def test_leftovers_of_another_folder_are_not_touched(tmp_path: Path) -> None:
    """Only `.out.tmp-XXXXXXXX` / `.out.old-XXXXXXXX` belong to --out; a similar name does not."""
    keep = [tmp_path / ".out.tmp-b.tmp-abcd_123", tmp_path / ".outx.tmp-abcd_123",
            tmp_path / ".out.old-abc"]
    for folder in keep:
        folder.mkdir()
        (folder / "f").write_bytes(b"mine")
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(tmp_path / "out"))
    assert result.code == 0, result.stderr[-600:]
    assert all((folder / "f").read_bytes() == b"mine" for folder in keep)


# ---- --force, stale files, the lock --------------------------------------------------------

def test_force_with_other_drafters_leaves_no_stale_file_and_counts_what_it_wrote(
        tmp_path: Path, plans: dict[str, Any]) -> None:
    out = tmp_path / "out"
    write_report(plans["both"], out)
    assert {p for p in entries(out) if p.startswith("speedup-")} == {
        f"speedup-{EAGLE3}.png", f"speedup-{EAGLE}.png"}
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out), "--force")
    assert result.code == 0, result.stderr[-600:]
    names = entries(out)
    assert [p for p in names if p.startswith("speedup-")] == [f"speedup-{EAGLE3}.png"]
    said = re.search(r"and (\d+) plots and tables", result.stdout)
    assert said is not None and int(said.group(1)) == len(names) - 2  # all but report.md/.html
    assert entries(tmp_path) == ["out"]
    # the answer's first sentence on the terminal, as the report's Answer starts
    (answer,) = [line for line in result.stdout.splitlines() if line.startswith("answer: ")]
    report = (out / "report.md").read_text(encoding="utf-8")
    assert answer.removeprefix("answer: ").rstrip(".") in report


def test_a_held_lock_makes_a_second_run_fail_at_once(tmp_path: Path) -> None:
    lock = tmp_path / ".out.lock"
    with open(lock, "wb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        line = error_line(run("plan", *MODEL, "--drafter", EAGLE3, "--out",
                              str(tmp_path / "out")))
        assert "another specsim run is writing this folder" in line and ".out.lock" in line
        assert entries(tmp_path) == [".out.lock"]  # the holder's lock file is left alone
    # released: the next run goes ahead and removes the lock file when done
    assert run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(tmp_path / "out")).code == 0
    assert entries(tmp_path) == ["out"]


def test_the_lock_is_held_for_the_whole_run(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """While one run is computing its plan, another into the same --out is refused."""
    out = tmp_path / "out"
    real = serving_plan.make_plan
    seen: list[Outcome] = []

    def plan_with_a_rival(**kwargs: Any) -> Any:
        monkeypatch.setattr(serving_plan, "make_plan", real)
        seen.append(run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out), "--force"))
        return real(**kwargs)

    monkeypatch.setattr(serving_plan, "make_plan", plan_with_a_rival)
    assert run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out)).code == 0
    assert "another specsim run is writing this folder" in error_line(seen[0])
    assert entries(tmp_path) == ["out"]


def test_an_empty_existing_folder_is_used_and_a_refused_run_writes_nothing(
        tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(tmp_path / "empty")).code == 0
    assert "report.md" in entries(tmp_path / "empty")
    before = files_under(tmp_path)
    line = error_line(run("plan", *MODEL, "--workload", "nope", "--out",
                          str(tmp_path / "new" / "deeper" / "out")))
    assert "nope" in line
    assert files_under(tmp_path) == before and entries(tmp_path) == ["empty"]


# ---- names --------------------------------------------------------------------------------------

def _drafter_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((builtin_dir("drafters") / f"{EAGLE3}.yaml").read_bytes())
    return path


def test_a_drafter_path_in_a_folder_gives_a_slug_named_plot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _drafter_file(tmp_path / "some" / "dir" / "d1.yaml")
    _drafter_file(tmp_path / "other" / "D1.yaml")
    result = run("plan", *MODEL, "--drafter", "some/dir/d1.yaml", "--drafter", "other/D1.yaml",
                 "--out", "o1")
    assert result.code == 0, result.stderr[-600:]
    assert [p for p in entries(tmp_path / "o1") if p.startswith("speedup-")] == [
        "speedup-d1-2.png", "speedup-d1.png"]
    assert entries(tmp_path) == ["o1", "other", "some"]
    md = (tmp_path / "o1" / "report.md").read_text()
    assert "](speedup-d1.png)" in md and "](speedup-d1-2.png)" in md


def test_a_drafter_path_with_dotdot_writes_nothing_outside_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    _drafter_file(tmp_path / "d1x.yaml")
    (work / "specs").mkdir()  # the OS resolves specs/.. only where specs exists
    before = files_under(tmp_path)
    result = run("plan", *MODEL, "--drafter", "specs/../../../d1x.yaml", "--out", "o1")
    assert result.code == 0, result.stderr[-600:]
    after = files_under(tmp_path)
    new = sorted(set(after) - set(before))
    assert new and all(name.startswith("a/b/o1/") for name in new)
    assert "a/b/o1/speedup-d1x.png" in new
    assert {k: after[k] for k in before} == before


def test_file_slugs_by_hand() -> None:
    assert file_slug("eagle3-llama-3.1-8b") == "eagle3-llama-3.1-8b"
    assert file_slug("specs/../../d1x.yaml") == "specs-..-..-d1x.yaml"
    assert file_slug("../.hidden") == "hidden"
    assert file_slug("My Drafter/v2") == "my-drafter-v2"
    assert file_slug("///") == "unnamed"
    assert file_slug("x" * 300) == "x" * 80
    taken: set[str] = set()
    assert [file_slug(s, taken) for s in ("d1", "D1", "d1", "d1-2")] == [
        "d1", "d1-2", "d1-3", "d1-2-2"]


# ---- one-line errors for paths the OS refuses --------------------------------------------------

def test_an_out_name_too_long_is_one_line(tmp_path: Path) -> None:
    long = tmp_path / ("x" * 300)
    line = error_line(run("plan", *MODEL, "--out", str(long)))
    assert "300 bytes long" in line and "allows 255" in line
    assert entries(tmp_path) == []
    # the longest allowed name works: its hidden lock and temporary names are cut to fit
    out = tmp_path / ("y" * 255)
    assert run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out)).code == 0
    assert entries(tmp_path) == ["y" * 255] and "report.md" in entries(out)


def test_a_file_output_name_too_long_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="300 bytes long"):
        check_writable(tmp_path / ("m" * 295 + ".yaml"), force=True, suffixes=(".yaml",))
    with pytest.raises(SpecError, match="bytes long"):
        check_writable(tmp_path / ("m" * 300) / "x.png", force=True)
    # a name at the limit is fine, and atomic writes of it work
    path = tmp_path / ("m" * 250 + ".yaml")
    check_writable(path, force=False, suffixes=(".yaml",))
    atomic_write_bytes(path, b"a: 1\n")
    assert path.read_bytes() == b"a: 1\n" and entries(tmp_path) == [path.name]


def test_models_import_out_too_long_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama"}')
    line = error_line(run("models", "import", str(config), "--out",
                          str(tmp_path / ("m" * 300 + ".yaml"))))
    assert "305 bytes long" in line  # 300 m and .yaml
    assert entries(tmp_path) == ["config.json"]


@pytest.mark.parametrize("force", [False, True])
def test_report_md_that_is_a_folder(tmp_path: Path, force: bool) -> None:
    out = tmp_path / "out"
    (out / "report.md").mkdir(parents=True)
    (out / "report.md" / "inside").write_bytes(b"x")
    result = run("plan", *MODEL, "--drafter", EAGLE3, "--out", str(out),
                 *(("--force",) if force else ()))
    if not force:
        assert "exists and is not empty; pass --force" in error_line(result)
        assert (out / "report.md" / "inside").read_bytes() == b"x"
        return
    assert result.code == 0, result.stderr[-600:]
    assert (out / "report.md").is_file() and "inside" not in str(list(out.rglob("*")))
    assert entries(tmp_path) == ["out"]


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused(tmp_path: Path, name: str,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "must name the folder to write" in error_line(
        run("plan", *MODEL, "--out", name, "--force"))
    assert entries(tmp_path) == []


def test_publish_refuses_a_file_name_that_is_a_path(tmp_path: Path) -> None:
    with OutputFolder(tmp_path / "out", force=False) as folder, pytest.raises(
            SpecError, match="refusing to write a file named"):
        folder.publish({"report.md": b"x", "../escape.png": b"y"})
    assert entries(tmp_path) == []
