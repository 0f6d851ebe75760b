"""How the config.json importer reads keys: `Keys` names the file and the key in every error and
fills absent keys from the family's config-class defaults; `kind_list` checks a per-layer list.

Split from `specs.hf_import` so that the block readers of the generic path (`hf_decoder`) and
the family readers (`hf_hybrid`, `hf_families`) share it without importing the family table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from specsim.errors import SpecError
from specsim.specs.fields import MAX_INTEGER, MAX_LAYERS, show

Config = Mapping[str, Any]


class Keys:
    """Reads keys from the text config, naming the file and the key when one is missing or
    wrong; `defaults` are the family's config-class defaults for absent keys."""

    def __init__(self, config: Config, where: str, architecture: str,
                 defaults: Mapping[str, Any]) -> None:
        self.config, self.where, self.arch, self.defaults = config, where, architecture, defaults

    def get(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key)
        return self.defaults.get(key, default) if value is None else value

    def has(self, key: str) -> bool:
        return self.get(key) is not None

    def int(self, key: str, default: int | None = None, *, minimum: int = 0) -> int:
        """An integer key in minimum..its cap (the model spec's: MAX_LAYERS for the layer
        count, whose per-layer lists are built here, else MAX_INTEGER)."""
        value = self.get(key, default)
        if value is None:
            raise SpecError(f"{self.where}: missing key '{key}' (needed for {self.arch})")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            what = "a positive" if minimum > 0 else "a non-negative"
            raise SpecError(f"{self.where}: key '{key}' must be {what} integer, "
                            f"got {show(value, 40)}")
        cap = MAX_LAYERS if key == "num_hidden_layers" else MAX_INTEGER
        if value > cap:
            raise SpecError(f"{self.where}: key '{key}' must be at most {cap:,}, "
                            f"got {show(value, 40)}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(f"{self.where}: key '{key}' must be true or false, got {value!r}")
        return value

    def cannot(self, key: str, what: str) -> SpecError:
        return SpecError(f"{self.where}: cannot model key '{key}' ({what}) of {self.arch}")

def kind_list(value: object, length: int) -> TypeGuard[list[str]]:
    """True when `value` is a list of `length` strings (a per-layer list of kinds); checked
    before the kinds are compared as a set, which a list or mapping in it would break."""
    return isinstance(value, list) and len(value) == length and \
        all(isinstance(v, str) for v in value)
