"""Where a config.json comes from: a local file or folder as given, or a Hugging Face repo id read
through huggingface_hub's cache (offline from the cache when HF_HUB_OFFLINE=1).

Split from `specs.hf_import`, which turns a config into a model spec: finding the file is a
concern of its own, shared with the drafter import (`specsim models import`,
`specsim drafters import`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from specsim.errors import SpecError
from specsim.specs.names import is_hub_id
from specsim.specs.paths import probe


@dataclass(frozen=True, slots=True)
class LocatedConfig:
    """Where a config.json was found: its local path, the name it suggests, its source URL,
    and the Hub repo it was read from (None for a local file)."""

    path: Path
    name: str
    source: str
    repo: str | None = None


def locate_config(where: str, *, cache_dir: Path | None = None) -> LocatedConfig:
    """A config.json path as given, or a Hugging Face repo id fetched through huggingface_hub's
    cache (offline from the cache when HF_HUB_OFFLINE=1). One line on any failure."""
    path = Path(where)
    if probe(path, "is_dir"):
        path = path / "config.json"
    if probe(path, "exists") or "/" not in where or not is_hub_id(where):
        if not probe(path, "exists"):
            raise SpecError(f"{where}: cannot read (no such file, and not a Hub repo id "
                            "such as Org/Name)")
        folder = path.resolve().parent.name
        name = folder if path.name == "config.json" and folder else path.stem
        return LocatedConfig(path, name, f"config.json at {path}")
    return _download(where, cache_dir)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _download(repo_id: str, cache_dir: Path | None) -> LocatedConfig:
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            EntryNotFoundError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except ImportError:
        raise SpecError(f"{repo_id}: reading a Hub repo id needs huggingface_hub "
                        "(pip install huggingface_hub), or pass a config.json path") from None
    offline = _offline()
    try:
        local = hf_hub_download(repo_id, "config.json", cache_dir=cache_dir,
                                local_files_only=offline)
    except RepositoryNotFoundError:
        raise SpecError(f"{repo_id}: repository not found on the Hugging Face Hub "
                        "(or gated: log in with `hf auth login`)") from None
    except LocalEntryNotFoundError:
        why = "offline (HF_HUB_OFFLINE=1)" if offline else "the Hub is unreachable"
        raise SpecError(f"{repo_id}: config.json is not in the Hugging Face cache and "
                        f"{why}") from None
    except EntryNotFoundError:
        raise SpecError(f"{repo_id}: the repository has no config.json") from None
    except (HfHubHTTPError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SpecError(f"{repo_id}: cannot download config.json ({first})") from None
    path = Path(local)
    revision = path.parent.name
    return LocatedConfig(path, repo_id.split("/", 1)[1],
                         f"https://huggingface.co/{repo_id}/blob/{revision}/config.json",
                         repo=repo_id)
