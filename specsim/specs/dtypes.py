"""Data types: bytes per stored element, and the precision of a forward pass."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecError

# Bytes per stored element of each dtype a weight, cache or activation may use.
BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
                   # MXFP4: 4-bit values plus one 8-bit scale per block of 32 (4.25 bits)
                   "mxfp4": 4.25 / 8, "int4": 0.5}
# The 16-bit dtypes: one model's weights or cache in either are the same bytes and time, and
# an engine's default ('auto', the checkpoint's dtype) serves them without a flag.
SIXTEEN_BIT = ("bf16", "fp16")


def is_quantized(dtype: str) -> bool:
    """Whether `dtype` stores fewer bytes than a 16-bit one (fp8, int8, mxfp4, int4)."""
    return BYTES_PER_PARAM[dtype] < 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Precision:
    """Data types of a pass: stored weights, the compute path, the KV cache, activations."""

    weight_dtype: str = ""  # "" = the model's own
    compute_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    state_dtype: str = "fp32"  # linear-attention recurrent state

    def __post_init__(self) -> None:
        for name in ("weight_dtype", "kv_dtype", "activation_dtype", "state_dtype"):
            value = getattr(self, name)
            # only the weights have a default of their own (""); an empty KV dtype was a
            # KeyError where a pass first priced the cache
            if (value or name != "weight_dtype") and value not in BYTES_PER_PARAM:
                raise SpecError(f"{name}: {value!r} is not one of "
                                f"{', '.join(BYTES_PER_PARAM)}", parameter=name)
        if not isinstance(self.compute_dtype, str) or not self.compute_dtype.strip():
            raise SpecError(f"compute_dtype: {self.compute_dtype!r} names no dtype",
                            parameter="compute_dtype")
