"""Reading next-token probabilities along target rollouts from `.npz` files, with validation.

File format (numpy's `.npz`; one file per model):

- Full distributions: array ``probs`` of shape (rollouts, positions, vocab); row [r, t] is the
  model's next-token distribution at position t of rollout r and sums to one.
- Top-k: arrays ``topk_ids`` (integer, shape (rollouts, positions, k)), ``topk_probs``
  (shape (rollouts, positions, k)) and ``rest`` (shape (rollouts, positions)), the mass outside
  the listed ids; ``topk_probs`` summed over k plus ``rest`` is one. Ids in a row are distinct.
- Optional ``tokens`` (integer, shape (rollouts, positions)), in the target's file: the token
  the target sampled at each position. Block verification needs it.
- Parallel drafters: array ``acceptance`` of shape (rollouts, L, L) (or (L, L) for one
  rollout); entry [r, t0, t - 1] is A_{t0,t}, the probability that the token at position
  t = 1..L is accepted in a round that started at t0 = 0..t-1. Entries with t0 >= t (below the
  diagonal) are ignored.

The target's and the drafter's files must use the same layout and the same (rollouts,
positions). Every problem is one SpecError line naming the file, the array and the index.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.fields import show

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Rows must sum to one within this slack: float32 softmax over 10^5 tokens stays well inside.
SUM_TOLERANCE = 1e-3


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ProbArrays:
    """One model's next-token probabilities along target rollouts.

    Attributes:
        path: the file they came from (for messages).
        probs: full distributions, shape (R, T, V); None for top-k data.
        topk_ids: listed token ids, shape (R, T, k); None for full distributions.
        topk_probs: their probabilities, shape (R, T, k); None for full distributions.
        rest: mass outside the listed ids, shape (R, T); None for full distributions.
        tokens: the target's sampled token per position, shape (R, T); None if not given.
    """

    path: str
    probs: FloatArray | None = None
    topk_ids: IntArray | None = None
    topk_probs: FloatArray | None = None
    rest: FloatArray | None = None
    tokens: IntArray | None = None

    @property
    def is_topk(self) -> bool:
        """True for top-k data, False for full distributions."""
        return self.probs is None

    @property
    def shape(self) -> tuple[int, int]:
        """(rollouts R, positions T)."""
        array = self.probs if self.probs is not None else self.topk_probs
        assert array is not None
        return int(array.shape[0]), int(array.shape[1])


# What one .npz may inflate to, all arrays together; checked from the zip directory and each
# array's .npy header before anything is decompressed (a few MB of zeros can inflate to GiB).
# Full distributions over a 150k vocabulary fit ~1,700 rows at float32; top-k files are far
# smaller.
MAX_NPZ_BYTES = 2**30
MAX_NPZ_ARRAYS = 64


def _npz_sizes(path: Path, limit: int) -> None:
    """Refuse an .npz whose arrays would inflate past `limit` bytes, or whose .npy headers
    disagree with the sizes the zip directory records, reading only the headers."""
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > MAX_NPZ_ARRAYS:
            raise SpecError(f"{path}: {len(members):,} arrays; an .npz here holds at most "
                            f"{MAX_NPZ_ARRAYS}")
        total = sum(member.file_size for member in members)
        if total > limit:
            raise SpecError(f"{path}: arrays inflate to {_mib(total)}, more than "
                            f"{_mib(limit)}; give top-k arrays or fewer rollouts")
        for member in members:
            name = member.filename.removesuffix(".npy")
            with archive.open(member) as handle:
                try:
                    version = np.lib.format.read_magic(handle)
                    shape, _, dtype = (np.lib.format.read_array_header_1_0(handle)
                                       if version == (1, 0) else
                                       np.lib.format.read_array_header_2_0(handle))
                except ValueError as err:
                    raise SpecError(f"{path}: array '{show(name, 40)[1:-1]}' is not a .npy array "
                                    f"({str(err)[:80]})") from None
                header = handle.tell() if hasattr(handle, "tell") else 0
            count = 1
            for extent in shape:
                count *= int(extent)
            size = count * dtype.itemsize
            if size > limit or size + header > member.file_size:
                raise SpecError(f"{path}: array '{show(name, 40)[1:-1]}' of shape "
                                f"{show(shape, 40)} ({dtype}) needs {_mib(size)} but the file "
                                f"holds {_mib(member.file_size)}")


def _mib(size: int) -> str:
    return f"{size:,} bytes" if size < 2**20 else f"{size / 2**20:,.0f} MiB"


def _read_npz(path: Path) -> dict[str, npt.NDArray[np.generic]]:
    """All arrays of an `.npz` file; anything else is an unknown format. The sizes are
    checked before any array is read (see `_npz_sizes`)."""
    if path.suffix != ".npz":
        raise SpecError(f"{path}: unknown format (expected a numpy .npz file)")
    try:
        if path.is_dir():
            raise SpecError(f"{path}: is a folder, not a numpy .npz file")
        if path.exists() and not path.is_file():  # a named pipe would block the zip reader
            raise SpecError(f"{path}: not a regular file (a pipe, socket or device), not a "
                            "numpy .npz file")
        _npz_sizes(path, MAX_NPZ_BYTES)
        with np.load(path, allow_pickle=False) as data:
            return {name: np.asarray(data[name]) for name in data.files}
    except SpecError:
        raise
    except FileNotFoundError:
        raise SpecError(f"{path}: cannot read (no such file)") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile,
            NotImplementedError) as err:  # a compression method zipfile lacks
        text = str(err) if len(str(err)) <= 80 else str(err)[:77] + "..."
        raise SpecError(f"{path}: unknown format (not a readable .npz: {text})") from None


def _first_bad(mask: npt.NDArray[np.bool_]) -> tuple[int, ...]:
    """Index of the first True entry of `mask`."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _floats(path: Path, name: str, array: npt.NDArray[np.generic], ndim: int) -> FloatArray:
    """A finite, non-negative float array of `ndim` dimensions, or SpecError naming the index."""
    if array.ndim != ndim or not np.issubdtype(array.dtype, np.number):
        raise SpecError(f"{path}: array '{name}' must be numeric with {ndim} dimensions, "
                        f"got shape {array.shape} ({array.dtype})")
    values = array.astype(np.float64)
    bad = ~np.isfinite(values) | (values < 0.0)
    if bad.any():
        index = _first_bad(bad)
        raise SpecError(f"{path}: array '{name}' index {index} = {values[index]}: "
                        "probabilities must be finite and >= 0")
    return values


def _ints(path: Path, name: str, array: npt.NDArray[np.generic], shape: tuple[int, ...],
          upper: int | None) -> IntArray:
    """Integer ids of the given shape in [0, upper), or SpecError naming the index."""
    if array.shape != shape or not np.issubdtype(array.dtype, np.integer):
        raise SpecError(f"{path}: array '{name}' must be integer with shape {shape}, "
                        f"got {array.shape} ({array.dtype})")
    ids = array.astype(np.int64)
    bad = (ids < 0) | (ids >= upper if upper is not None else False)
    if np.any(bad):
        index = _first_bad(np.asarray(bad))
        raise SpecError(f"{path}: array '{name}' index {index} = {ids[index]}: token ids must "
                        f"lie in [0, {upper if upper is not None else 'vocab'})")
    return ids


def _check_sums(path: Path, name: str, sums: FloatArray) -> None:
    """Rows must sum to one within SUM_TOLERANCE."""
    bad = np.abs(sums - 1.0) > SUM_TOLERANCE
    if bad.any():
        index = _first_bad(bad)
        raise SpecError(f"{path}: array '{name}' index {index}: sums to {sums[index]:.6g}, "
                        f"not 1 (tolerance {SUM_TOLERANCE:g})")


def _full(path: Path, arrays: dict[str, npt.NDArray[np.generic]]) -> ProbArrays:
    probs = _floats(path, "probs", arrays["probs"], 3)
    _check_sums(path, "probs", probs.sum(axis=-1))
    return ProbArrays(path=str(path), probs=probs, tokens=_tokens(path, arrays, probs))


def _topk(path: Path, arrays: dict[str, npt.NDArray[np.generic]]) -> ProbArrays:
    for name in ("topk_probs", "rest"):
        if name not in arrays:
            raise SpecError(f"{path}: array '{name}' is missing (top-k data needs topk_ids, "
                            "topk_probs and rest)")
    probs = _floats(path, "topk_probs", arrays["topk_probs"], 3)
    ids = _ints(path, "topk_ids", arrays["topk_ids"], probs.shape, None)
    rest = _floats(path, "rest", arrays["rest"], 2)
    if rest.shape != probs.shape[:2]:
        raise SpecError(f"{path}: array 'rest' shape {rest.shape} does not match 'topk_probs' "
                        f"{probs.shape} (need (rollouts, positions))")
    _check_sums(path, "topk_probs", probs.sum(axis=-1) + rest)
    return ProbArrays(path=str(path), topk_ids=ids, topk_probs=probs, rest=rest,
                      tokens=_tokens(path, arrays, probs))


def _tokens(path: Path, arrays: dict[str, npt.NDArray[np.generic]],
            probs: FloatArray) -> IntArray | None:
    if "tokens" not in arrays:
        return None
    vocab = probs.shape[2] if "probs" in arrays else None
    return _ints(path, "tokens", arrays["tokens"], probs.shape[:2], vocab)


def load_prob_arrays(path: Path) -> ProbArrays:
    """Read and validate one model's probabilities (see the module docstring for the layout)."""
    arrays = _read_npz(path)
    if "probs" in arrays:
        return _full(path, arrays)
    if "topk_ids" in arrays:
        return _topk(path, arrays)
    raise SpecError(f"{path}: unknown format: no array 'probs' or 'topk_ids' "
                    f"(found {sorted(arrays) or 'none'})")


def check_pair(target: ProbArrays, draft: ProbArrays) -> None:
    """The two files must share the layout, the rollouts and the positions."""
    if target.is_topk != draft.is_topk:
        kinds = {True: "top-k", False: "full distributions"}
        raise SpecError(f"{draft.path}: holds {kinds[draft.is_topk]} but {target.path} holds "
                        f"{kinds[target.is_topk]}; give both in the same layout")
    name = "topk_probs" if target.is_topk else "probs"
    t_array = target.topk_probs if target.is_topk else target.probs
    d_array = draft.topk_probs if draft.is_topk else draft.probs
    assert t_array is not None and d_array is not None
    same = t_array.shape[:2] == d_array.shape[:2]
    if same and not target.is_topk and t_array.shape[2] != d_array.shape[2]:
        same = False
    if not same:
        raise SpecError(f"{draft.path}: array '{name}' shape {d_array.shape} does not match "
                        f"{target.path} '{name}' shape {t_array.shape}")


def load_start_acceptance(path: Path) -> FloatArray:
    """Per-start acceptance A[r, t0, t - 1] of a parallel drafter, shape (R, L, L).

    Only entries with t0 < t are read; they must lie in [0, 1].
    """
    arrays = _read_npz(path)
    if "acceptance" not in arrays:
        raise SpecError(f"{path}: unknown format: no array 'acceptance' "
                        f"(found {sorted(arrays) or 'none'})")
    raw = arrays["acceptance"]
    raw = raw[None] if raw.ndim == 2 else raw
    if raw.ndim != 3 or raw.shape[1] != raw.shape[2] or raw.shape[1] == 0 \
            or not np.issubdtype(raw.dtype, np.number):
        raise SpecError(f"{path}: array 'acceptance' must be numeric of shape (rollouts, L, L) "
                        f"or (L, L), got {arrays['acceptance'].shape}")
    values = raw.astype(np.float64)
    used = np.triu(np.ones(values.shape[1:], dtype=bool))[None]  # [t0, t - 1] with t0 <= t - 1
    bad = used & ~((values >= 0.0) & (values <= 1.0))
    if bad.any():
        index = _first_bad(bad)
        raise SpecError(f"{path}: array 'acceptance' index {index} = {values[index]}: "
                        "acceptance must lie in [0, 1]")
    return np.where(used, values, 0.0)


def load_vector(path: Path, name: str, *, probabilities: bool, size: int | None = None,
                required: bool = True) -> FloatArray | None:
    """A 1-D array `name` from an .npz: a distribution (probabilities=True) or finite values."""
    arrays = _read_npz(path)
    if name not in arrays:
        if required:
            raise SpecError(f"{path}: unknown format: no array '{name}' "
                            f"(found {sorted(arrays) or 'none'})")
        return None
    raw = arrays[name]
    if raw.ndim != 1 or raw.size == 0 or (size is not None and raw.size != size) \
            or not np.issubdtype(raw.dtype, np.number):
        want = f"({size},)" if size is not None else "(V,) with V >= 1"
        raise SpecError(f"{path}: array '{name}' must be numeric of shape {want}, "
                        f"got {raw.shape}")
    if probabilities:
        values = _floats(path, name, raw, 1)
        _check_sums(path, name, values.sum(keepdims=True))
        return np.asarray(values / values.sum(), dtype=np.float64)
    values = raw.astype(np.float64)
    if not np.all(np.isfinite(values)):
        index = _first_bad(~np.isfinite(values))
        raise SpecError(f"{path}: array '{name}' index {index} = {values[index]}: must be finite")
    return values
