"""The arithmetic precision each kernel computes in, as its registry description declares it, so that
rankings compare like with like: a TF32 tensor-core plan rounds its inputs to a 10-bit mantissa and is
faster for it, so it is never ranked beside strict fp32 kernels nor called the fastest of them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from convlab.plan.registry import KernelSpec, load_registry

STRICT = "fp32"
# A kernel the registry does not know (an older summary's, say): not assumed to be strict fp32.
UNKNOWN = "unknown"
NAMES = {STRICT: "strict FP32", "tf32": "TF32", UNKNOWN: "unknown precision"}


def kernel_precision(kernel: str, registry: Mapping[str, KernelSpec]) -> str:
    """``kernel``'s precision: the description's ``precision``, or tf32 where its settings allow TF32
    math (what verification reads too)."""
    spec = registry.get(kernel)
    if spec is None:
        return UNKNOWN
    return "tf32" if spec.settings.get("math") == "tf32" else spec.precision


def row_precisions(rows: pd.DataFrame, registry: Mapping[str, KernelSpec] | None = None) -> pd.Series:
    """Per row of a summary, the precision its kernel computes in."""
    registry = load_registry() if registry is None else registry
    found = {kernel: kernel_precision(kernel, registry) for kernel in rows["kernel"].unique()}
    return rows["kernel"].map(found).astype(object)


def precision_name(precision: str) -> str:
    """How a page names a precision: 'strict FP32', 'TF32', or the description's word in capitals."""
    return NAMES.get(precision, precision.upper())
