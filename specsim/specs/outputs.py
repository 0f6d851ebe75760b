"""Writing outputs: checked paths, atomic files, YAML that reads back as written, and output
folders replaced whole (`OutputFolder`).

Reading is `specsim.specs.io`; this module imports its strict YAML loader (so a written string
reads back as the same string) and never the reverse.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml

from specsim.errors import SpecError
from specsim.specs.fields import show
from specsim.specs.io import _StrictLoader
from specsim.specs.paths import probe

PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def check_writable(path: Path, *, force: bool, suffixes: tuple[str, ...] = (),
                   reads: tuple[Path, ...] = ()) -> None:
    """Refuse an output path that cannot or should not be written, before any work is done.

    A folder, a symbolic link, a pipe, socket or device (the rename that writes an output
    would replace the node itself: as root, --force turned /dev/null into a file), a path
    under an existing file, a name longer than the filesystem allows, the file of one of the
    command's inputs `reads` (--force replaced the config.json being imported), or (given
    `suffixes`) another extension is always refused; an existing file is refused unless `force`
    (every command's --force). Whatever the OS says about the path is one SpecError.
    """
    if suffixes and path.suffix.lower() not in suffixes:
        raise SpecError(f"{path}: output must end in {', '.join(suffixes)} "
                        f"(got {path.suffix or 'no suffix'!r})")
    try:
        check_name_lengths(path)
        if path.is_symlink():  # replaced by the rename, the file it points to left as it was
            raise SpecError(f"{path}: is a symbolic link; give the file it points to (an "
                            "output is written to a new file and renamed over the name)")
        if path.is_dir():
            raise SpecError(f"{path}: is a folder; give a file name")
        if path.exists() and not path.is_file():  # --force renamed a file over /dev/null
            raise SpecError(f"{path}: not a regular file (a pipe, socket or device); give a "
                            "file name")
        for source in reads:
            if path.exists() and _same_file(path, source):
                raise SpecError(f"{path}: is the input file {source}; write the output to "
                                "another name")
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise SpecError(f"{path}: {parent} is a file, not a folder")
                break
        if path.exists() and not force:
            raise SpecError(f"{path}: exists; pass --force to overwrite")
    except OSError as err:
        raise SpecError(f"{path}: cannot write there ({err.strerror or err})") from None


def check_files_folder(folder: Path, *, option: str) -> None:
    """Refuse a folder to write files into (recommend's --configs-out) before any work is done:
    an existing file, a path under a file, or a name longer than the filesystem allows is one
    SpecError naming the folder and the option. A missing folder is fine (it is created)."""
    try:
        check_name_lengths(folder)
        for path in (folder, *folder.parents):
            if path.exists():
                if not path.is_dir():
                    what = "is a file" if path == folder else f"is under the file {path}"
                    raise SpecError(f"{folder}: {option} {what}; give a folder")
                break
    except OSError as err:
        raise SpecError(f"{folder}: cannot use as the {option} folder "
                        f"({err.strerror or err})") from None


def write_files(folder: Path, files: Mapping[str, bytes], *, force: bool) -> list[Path]:
    """Write each named file into `folder`, all checked first and none written if one is
    refused (an existing different file without `force`); a file already holding the same
    bytes is left as it is. Returns the paths."""
    paths = {folder / name: data for name, data in files.items()}
    for path, data in paths.items():
        if probe(path, "is_file") and _same_bytes(path, data):
            continue  # the same file again: nothing to overwrite
        check_writable(path, force=force)
    for path, data in paths.items():
        make_parent(path)
        atomic_write_bytes(path, data)
    return list(paths)


def _same_file(path: Path, other: Path) -> bool:
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError):  # no such file, a name the OS refuses
        return False


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(data) + 1) == data
    except OSError:
        return False


def atomic_write(path: Path, write: Callable[[TextIO], object]) -> None:
    """Write a text file through `write(handle)`, all or nothing (see `atomic_write_bytes`)."""
    buffer = io.StringIO(newline="")
    try:
        write(buffer)
    except OSError as err:
        raise SpecError(f"{path}: cannot write ({err.strerror or err})") from None
    atomic_write_bytes(path, buffer.getvalue().encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file all or nothing.

    The bytes go to a temporary file in the same folder, which is then renamed over `path`
    (os.replace): a reader sees the old file or the new one, never half of one. On any error
    the temporary file is removed and `path` is left as it was; OS errors become SpecError.
    """
    try:
        # a cut of the name: the longest name the filesystem allows must still get a temp file
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp",
                                   dir=path.parent)
    except OSError as err:
        raise SpecError(f"{path}: cannot write ({err.strerror or err})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; give a normal file's mode
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise SpecError(f"{path}: cannot write ({err.strerror or err})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Yaml12Dumper(yaml.SafeDumper):
    """PyYAML's writer follows YAML 1.1; our reader YAML 1.2. A string the 1.2 reader would read
    as something else (`0o17`, `1e3`, `0x1F`) is written quoted, so every file reads back as
    it was written."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    try:
        plain_is_str = yaml.load(value, Loader=_StrictLoader) == value  # noqa: S506
    except yaml.YAMLError:
        plain_is_str = False
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style=None if plain_is_str else '"')


_Yaml12Dumper.add_representer(str, _represent_str)


def write_yaml(path: Path, data: Mapping[str, Any], *, force: bool) -> None:
    """Write a mapping as YAML, atomically; refuse to overwrite a file unless `force`."""
    check_writable(path, force=force)
    text = yaml.dump(dict(data), Dumper=_Yaml12Dumper, sort_keys=False, allow_unicode=True,
                     width=100)
    make_parent(path)
    atomic_write_bytes(path, text.encode("utf-8"))


def make_parent(path: Path) -> None:
    """Create an output's missing folders (check_writable has ruled out a file in the way)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SpecError(f"{path}: cannot create its folder ({err.strerror or err})") from None


# ---- output folders: written whole, put in place by one rename --------------------------------

NAME_MAX_BYTES = 255  # a path component's limit where the OS does not say (ext4, xfs, APFS)


def check_name_lengths(path: Path) -> None:
    """Refuse a path with a component longer than its filesystem allows, as one SpecError (the
    OS would raise ENAMETOOLONG from wherever the name is first used)."""
    limit = NAME_MAX_BYTES
    existing = next((p for p in (path, *path.parents) if probe(p, "is_dir")), None)
    if existing is not None and hasattr(os, "pathconf"):
        try:
            limit = int(os.pathconf(existing, "PC_NAME_MAX"))
        except (OSError, ValueError):
            pass
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > limit and part != path.anchor:
            text = str(path) if len(str(path)) <= 80 else f"{str(path)[:40]}...{str(path)[-20:]}"
            raise SpecError(f"{text}: a name in this path is {size} bytes long; the filesystem "
                            f"allows {limit}")


def _hidden_stem(name: str) -> str:
    """What the hidden lock, temporary and backup names beside a folder `name` start with: the
    name when it is short and plain, else a cut of it and a hash (still one per name)."""
    import hashlib

    if re.fullmatch(r"[A-Za-z0-9._-]{1,80}", name):
        return name
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)[:40]}-{digest}"


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where the
    OS, the C library or the filesystem cannot, so the caller falls back to two renames."""
    import ctypes
    import errno
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second),
                 rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (new names, renames) to disk where the OS allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


SAFE_FILE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,199}")


def file_slug(text: str, taken: set[str] | None = None) -> str:
    """A file name part made from a spec's name or path: lower-case [a-z0-9._-], no '/', no
    leading dot, at most 80 characters; with `taken`, the first of slug, slug-2, slug-3, ...
    not in it (which is then added), so two specs never share a file."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    slug = re.sub(r"-{2,}", "-", slug).lstrip(".-_")[:80].rstrip("-") or "unnamed"
    if taken is None:
        return slug
    name, number = slug, 1
    while name in taken:
        number += 1
        name = f"{slug}-{number}"
    taken.add(name)
    return name


class OutputFolder:
    """A folder of outputs (a report) replaced whole, never written in place.

    Checked when made: `path` is not a symbolic link (refused: the folder is replaced, so a link
    would be silently cut; give the folder it points to), not '.' or '..', not under a file,
    no name too long, and not a non-empty folder unless `force` (an empty one is fine).

    Entered (`with`), it creates missing parent folders and takes an exclusive lock on the
    hidden file `.<name>.lock` beside the folder (fcntl.flock: the OS drops it when a process
    dies, so a killed run never blocks the next); a second run into the same folder fails at
    once. `publish` writes the files into a fresh hidden folder `.<name>.tmp-XXXXXXXX` beside
    it (created new, names created exclusively, links never followed), then puts it in place
    by one rename; with `force` an existing folder is swapped out in one atomic exchange
    (Linux), or else renamed to `.<name>.old-XXXXXXXX` first and back if the second rename
    fails. A crash leaves the old complete folder or the new one at `path`, plus at worst
    hidden leftovers beside it, which the next run removes (restoring an `.old-` folder where
    a crash fell between the two renames). On any error before the swap, `path` is as it was,
    the temporary folder is removed, and so are the lock and the parent folders made.
    """

    def __init__(self, path: Path, *, force: bool, option: str = "--out") -> None:
        self.path = path
        self.force = force
        self.option = option
        self._stem = _hidden_stem(path.name)
        self._lock: Path = path.parent / f".{self._stem}.lock"
        self._lock_fd: int | None = None
        self._made: list[Path] = []
        self._published = False
        self._check()

    # -- checks ---------------------------------------------------------------------------------

    def _check(self) -> None:
        out = self.path
        if out.name in ("", ".", ".."):
            raise SpecError(f"{out}: {self.option} must name the folder to write, not "
                            "'.' or '..'")
        try:
            check_name_lengths(out)
            for folder in (out, *out.parents):
                if folder.exists() and not folder.is_dir():
                    raise SpecError(f"{out}: {folder} is a file, not a folder; {self.option} "
                                    "names a folder")
            if out.is_symlink():
                raise SpecError(f"{out}: is a symbolic link; {self.option} must be a real "
                                "folder (it is replaced whole): give the folder it points to")
            if out.is_dir() and not self.force and next(os.scandir(out), None) is not None:
                raise SpecError(f"{out}: exists and is not empty; pass --force to overwrite")
        except OSError as err:
            raise SpecError(f"{out}: cannot use as the {self.option} folder "
                            f"({err.strerror or err})") from None

    # -- lock -----------------------------------------------------------------------------------

    def __enter__(self) -> OutputFolder:
        try:
            self._make_parents()
            self._lock_fd = self._take_lock()
            self._recover()
            self._check()  # again: the folder may have changed before the lock was ours
        except OSError as err:
            self._release()
            raise SpecError(f"{self.path}: cannot use as the {self.option} folder "
                            f"({err.strerror or err})") from None
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _make_parents(self) -> None:
        missing = [p for p in self.path.parents if not p.exists()]
        for folder in reversed(missing):  # outermost first
            try:
                folder.mkdir()
            except FileExistsError:
                continue
            self._made.append(folder)

    def _take_lock(self) -> int:
        import sys

        busy = SpecError(f"{self.path}: another specsim run is writing this folder (it holds "
                         f"{self._lock.name}); wait for it to finish")
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(
            os, "O_CLOEXEC", 0)
        if sys.platform == "win32":  # no flock: the lock file itself is the lock
            try:
                return os.open(self._lock, flags | os.O_EXCL, 0o644)
            except FileExistsError:
                raise busy from None
        import fcntl

        while True:
            fd = os.open(self._lock, flags, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise busy from None
            # the run that held it may have removed the file meanwhile: lock the one that is there
            try:
                named = os.stat(self._lock, follow_symlinks=False)
            except FileNotFoundError:
                named = None
            held = os.fstat(fd)
            if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
                return fd
            os.close(fd)

    def _release(self) -> None:
        if self._lock_fd is not None:
            try:
                self._lock.unlink()
            except OSError:
                pass
            os.close(self._lock_fd)
            self._lock_fd = None
        if not self._published:
            for folder in reversed(self._made):  # innermost first; only if still empty
                try:
                    folder.rmdir()
                except OSError:
                    break
            self._made = []

    def _leftovers(self, kind: str) -> list[Path]:
        pattern = re.compile(rf"\.{re.escape(self._stem)}\.{kind}-[a-z0-9_]{{8}}")
        return [p for p in self.path.parent.iterdir()
                if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink()]

    def _recover(self) -> None:
        """Clear what a killed run left beside the folder (the lock is ours, so no live run
        owns it): a temporary folder is removed; a backup is restored where the folder is
        missing (a crash between the two renames of a --force), else removed."""
        import shutil

        olds = sorted(self._leftovers("old"), key=lambda p: p.stat().st_mtime)
        if olds and not os.path.lexists(self.path):
            os.rename(olds.pop(), self.path)
        for folder in self._leftovers("tmp") + olds:
            shutil.rmtree(folder, ignore_errors=True)

    # -- writing --------------------------------------------------------------------------------

    def publish(self, files: Mapping[str, bytes]) -> list[Path]:
        """Write `files` (plain names to bytes) as the whole folder; returns their paths."""
        import shutil

        if self._lock_fd is None:
            raise RuntimeError("OutputFolder.publish outside its `with` block")
        for name in files:
            if not SAFE_FILE_NAME.fullmatch(name):
                raise SpecError(f"{self.path}: refusing to write a file named {show(name)} "
                                "(plain lower-case names only)")
        out = self.path
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{self._stem}.tmp-", dir=out.parent))
        except OSError as err:
            raise SpecError(f"{out}: cannot write ({err.strerror or err})") from None
        try:
            self._fill(tmp, files)
            self._swap_in(tmp)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SpecError(f"{out}: cannot write ({err.strerror or err}); left as it "
                            "was") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._published = True
        return sorted(out / name for name in files)

    @staticmethod
    def _fill(tmp: Path, files: Mapping[str, bytes]) -> None:
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        for name, data in files.items():
            fd = os.open(tmp / name, flags, 0o666)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; give a normal folder's mode
        _fsync_folder(tmp)

    def _swap_in(self, tmp: Path) -> None:
        import errno

        out = self.path
        if out.is_symlink():
            raise SpecError(f"{out}: became a symbolic link during the run; not replaced")
        if not os.path.lexists(out) or not self.force:
            try:
                os.rename(tmp, out)  # onto nothing, or onto an empty folder
            except OSError as err:
                if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise SpecError(f"{out}: exists and is not empty; pass --force to "
                                    "overwrite") from None
                raise
            _fsync_folder(out.parent)
            return
        if not out.is_dir():
            raise SpecError(f"{out}: is a file, not a folder; {self.option} names a folder")
        garbage = tmp  # after the exchange the old folder is at `tmp`
        if not _exchange(tmp, out):
            old = Path(tempfile.mkdtemp(prefix=f".{self._stem}.old-", dir=out.parent))
            os.rename(out, old)
            try:
                os.rename(tmp, out)
            except BaseException:
                os.rename(old, out)
                raise
            garbage = old
            try:
                os.rename(old, tmp)  # a temporary name: a crash from here leaves only garbage
                garbage = tmp
            except OSError:
                pass  # an .old- folder beside a complete one: the next run removes it
        _fsync_folder(out.parent)
        import shutil

        shutil.rmtree(garbage, ignore_errors=True)
