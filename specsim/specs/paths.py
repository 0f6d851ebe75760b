"""Where specs lie: the built-in folders and their slugs (`builtin_dir`, `builtin_names`), a
slug or path resolved to a YAML file (`resolve_path`), the one test of a user's path (`probe`),
and the digest of the package's source and built-in specs (`source_digest`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

from specsim.errors import SpecError
from specsim.specs.fields import closest

# How an error names one spec of each kind.
_SINGULAR = {"models": "model", "drafters": "drafter", "scenarios": "workload",
             "engines": "engine", "published": "published file",
             "latency": "serving-latency file"}
# Folder of each kind, relative to the repository root, and to specsim/_builtin/ in a wheel.
_FOLDERS = {
    "hardware": "hardware",
    "models": "workloads/models",
    "drafters": "workloads/drafters",
    "scenarios": "workloads/scenarios",
    "engines": "engines",
    "published": "workloads/published",
    "latency": "workloads/latency",
}


def builtin_dir(kind: str) -> Path:
    """Folder holding the built-in YAML of one kind.

    An installed wheel carries it as package data under specsim/_builtin/; a checkout (or an
    editable install) has it at the top of the repository.
    """
    package = _package_dir()
    installed = package / "_builtin" / _FOLDERS[kind]
    return installed if installed.is_dir() else package.parent / _FOLDERS[kind]


@functools.cache
def _package_dir() -> Path:
    """The specsim package folder (resolved once: a loaded package does not move)."""
    return Path(__file__).resolve().parent.parent


def source_digest() -> str:
    """SHA-256 (hex) of everything a result computed from the built-in specs alone can depend
    on: every file of the specsim package's source (*.py) and of the built-in spec folders,
    by relative path and content, with the Python, numpy and scipy versions; any edit to one
    of them changes it. What a cache of such a result is keyed by."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256()

    def add(*parts: str | bytes) -> None:
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            digest.update(len(data).to_bytes(8, "little") + data)

    add(sys.version)
    for package in ("numpy", "scipy"):
        try:
            add(package, version(package))
        except PackageNotFoundError:
            add(package, "-")
    package_dir = _package_dir()
    roots = [("specsim", package_dir, "*.py")]
    roots += [(kind, builtin_dir(kind), "*") for kind in sorted(_FOLDERS)]
    for label, root, pattern in roots:
        files = sorted(p for p in root.rglob(pattern) if p.is_file()
                       and "__pycache__" not in p.parts) if root.is_dir() else []
        add(label, str(len(files)))
        for path in files:
            add(path.relative_to(root).as_posix(), path.read_bytes())
    return digest.hexdigest()


def builtin_names(kind: str) -> list[str]:
    """Sorted slugs of the built-in specs of one kind (calibrated GPU profiles as
    `calibrated/<name>`)."""
    folder = builtin_dir(kind)
    if not folder.is_dir():
        return []
    names = [p.stem for p in folder.glob("*.yaml")]
    names += [f"calibrated/{p.stem}" for p in folder.glob("calibrated/*.yaml")]
    return sorted(names)


def _builtin_match(kind: str, name: str) -> Path | None:
    """The built-in file whose slug equals `name` regardless of case, if any."""
    for slug in builtin_names(kind):
        if slug.lower() == name.lower():
            return builtin_dir(kind) / f"{slug}.yaml"
    return None


def probe(path: Path, test: str) -> bool:
    """path.exists() / is_file() / is_dir(), False where the OS refuses the name (too long):
    every test of a user's path goes through it, so an overlong name is an ordinary 'no such
    file', never an OSError from the test."""
    try:
        return bool(getattr(path, test)())
    except OSError:
        return False


def resolve_path(kind: str, name: str) -> Path:
    """Turn a slug (any case) or a path into the path of a YAML file.

    An unknown slug is one line suggesting the closest built-in name and the command that lists
    them all (the full list would not fit on one line).
    """
    singular = _SINGULAR.get(kind, kind)
    # where the built-in names are listed (no command lists the few latency files: named)
    listing = {"scenarios": "`specsim workloads list`", "published": "`specsim validate`",
               "latency": ", ".join(builtin_names(kind)) or "none"
               }.get(kind, f"`specsim {kind} list`")
    hint = f"built-in: {listing}" if kind == "latency" else f"see {listing}"
    if not name.strip():  # '' was the current folder ("is a folder"), not a name
        raise SpecError(f"empty {singular} name: give a built-in one ({listing}) or a path "
                        "to a YAML file")
    candidate = Path(name)
    path = None if candidate.suffix in (".yaml", ".yml") else _builtin_match(kind, name)
    if path is None and (candidate.suffix in (".yaml", ".yml") or probe(candidate, "exists")
                         or os.sep in name):
        shown = name if len(name) <= 60 else name[:57] + "..."
        bare = {"published": "published", "latency": "serving-latency"}.get(kind, singular)
        noun = f"{'an' if bare[0] in 'aeiou' else 'a'} {bare} YAML file"
        if probe(candidate, "is_dir"):
            raise SpecError(f"{shown}: is a folder, not {noun}")
        if probe(candidate, "exists") and not probe(candidate, "is_file"):
            raise SpecError(f"{shown}: not a regular file (a pipe, socket or device), not {noun}")
        if not probe(candidate, "is_file"):
            raise SpecError(f"{shown}: no such {bare} file")
        return candidate
    if path is None or not path.is_file():
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise SpecError(f"unknown {singular} {shown!r}"
                        f"{closest(name, builtin_names(kind))}; "
                        f"{hint}, or give a path to a YAML file")
    return path
