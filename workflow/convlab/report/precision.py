"""The arithmetic precision each cell computed in, so that rankings compare like with like: a TF32 tensor-core plan
rounds its inputs to a 10-bit mantissa and is faster for it, so it is never ranked beside strict fp32 kernels nor
called the fastest of them. A row records its own precision (the one it was verified in, after the config's
overrides: convlab.run.steps.precision); a row from before that column reads its kernel's description's."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from convlab.plan.registry import KernelSpec, load_registry

STRICT = "fp32"
# A kernel the registry does not know (an older summary's, say): not assumed to be strict fp32.
UNKNOWN = "unknown"
NAMES = {STRICT: "strict FP32", "tf32": "TF32", UNKNOWN: "unknown precision"}


def kernel_precision(kernel: str, registry: Mapping[str, KernelSpec]) -> str:
    """``kernel``'s precision as its description declares it, under its own settings (tf32 where they allow TF32
    math); UNKNOWN for a kernel the registry does not know."""
    spec = registry.get(kernel)
    return UNKNOWN if spec is None else spec.precision_under(spec.settings)


def row_precisions(rows: pd.DataFrame, registry: Mapping[str, KernelSpec] | None = None) -> pd.Series:
    """Per row of a summary, the precision it computed in: the row's own, or where it has none (a row from
    before the column) its kernel's (kernel_precision)."""
    recorded = rows.get("precision", pd.Series("", index=rows.index, dtype=object)).fillna("").astype(str)
    missing = recorded == ""
    if not missing.any():
        return recorded.astype(object)
    registry = load_registry() if registry is None else registry
    kernels = rows.loc[missing, "kernel"]
    described = {kernel: kernel_precision(kernel, registry) for kernel in kernels.unique()}
    return recorded.where(~missing, rows["kernel"].map(described)).astype(object)


def precision_name(precision: str) -> str:
    """How a page names a precision: 'strict FP32', 'TF32', or the description's word in capitals."""
    return NAMES.get(precision, precision.upper())
