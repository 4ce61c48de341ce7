"""What actually ran, named for a reader: the cpu backend runs numpy/OpenCV twins under the GPU kernels'
names, so every report page names a cell by its kernel and, on a twin backend, the twin that ran; and kernels
that ran the same code are recognised as such, never ranked against each other."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

# Backends that run a kernel's cpu twin: the twin takes no tunable or setting of the kernel, so its
# implementation label is the whole of the code that ran, and kernels sharing a twin ran the same code.
TWIN_BACKENDS = ("cpu",)


def _text_column(rows: pd.DataFrame, name: str) -> pd.Series:
    # Older summaries lack backend and implementation: read them as unknown, not as an error.
    if name in rows.columns:
        return rows[name].fillna("").astype(str)
    return pd.Series("", index=rows.index, dtype=object)


def short_implementation(implementation: str) -> str:
    """The head of an implementation label, for legends and sentences: up to its first comma or its first
    spaced parenthesis outside brackets ('OpenCV filter2D per channel pair, full resolution ... (cpu twin)'
    -> 'OpenCV filter2D per channel pair'; 'numpy Winograd F(2x2,3x3), ...' keeps its F(2x2,3x3))."""
    depth = 0
    for index, char in enumerate(implementation):
        if char == "(":
            if depth == 0 and index and implementation[index - 1] == " ":
                return implementation[:index].strip()
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            return implementation[:index].strip()
    return implementation.strip()


def ran_label(kernels: str | Iterable[str], implementation: str, backend: str) -> str:
    """The name a reader sees for what ran: the kernel itself on a GPU; on a twin backend the kernel(s)
    and the twin that actually ran ('cudnn → OpenCV filter2D per channel pair'), so that numpy is never
    presented as cuBLAS."""
    names = ", ".join(sorted(set([kernels] if isinstance(kernels, str) else kernels)))
    if backend not in TWIN_BACKENDS or not isinstance(implementation, str) or not implementation:
        return names
    return f"{names} → {short_implementation(implementation)}"


def code_identity(rows: pd.DataFrame) -> pd.Series:
    """Per row, the identity of the code that ran. On a twin backend it is the implementation (two kernels
    with the same twin ran the same numpy call); on a GPU it is the kernel, whose own functions, defines
    and settings are part of its code even where the implementation names a shared source file
    (im2col_gemm.cu) or library (cuDNN in another layout or math mode)."""
    implementation = _text_column(rows, "implementation")
    twin = _text_column(rows, "backend").isin(TWIN_BACKENDS) & (implementation != "")
    return ("impl:" + implementation).where(twin, "kernel:" + _text_column(rows, "kernel"))


def code_labels(rows: pd.DataFrame) -> dict[str, str]:
    """Code identity -> the label of every kernel of ``rows`` that ran it ('cublas, sgemm_shared → numpy
    float32 BLAS matmul'): kernels that ran the same code are one entry, never ranked against each other."""
    frame = pd.DataFrame({"code": code_identity(rows), "kernel": _text_column(rows, "kernel"),
                          "implementation": _text_column(rows, "implementation"),
                          "backend": _text_column(rows, "backend")})
    return {code: ran_label(part["kernel"], part["implementation"].iloc[0], part["backend"].iloc[0])
            for code, part in frame.groupby("code", sort=False)}


def ran_labels(rows: pd.DataFrame) -> pd.Series:
    """Per row, ran_label() of its own kernel."""
    return pd.Series([ran_label(k, i, b) for k, i, b in zip(_text_column(rows, "kernel"),
                                                           _text_column(rows, "implementation"),
                                                           _text_column(rows, "backend"))],
                     index=rows.index, dtype=object)


def kernel_labels(summary: pd.DataFrame) -> dict[str, str]:
    """Kernel -> ran_label() from the rows that name an implementation (a failed cell names none)."""
    rows = summary[_text_column(summary, "implementation") != ""]
    labels = ran_labels(rows)
    return {kernel: labels[part.index].mode().iloc[0] for kernel, part in rows.groupby("kernel")}


def shared_code(summary: pd.DataFrame, experiment: str, kernel: str, other: str) -> str:
    """The implementation that both kernels ran in ``experiment`` (then a speed-up of one over the other
    is noise, not a finding), or "" when they ran different code."""
    rows = summary[(summary["experiment"] == experiment) & summary["kernel"].isin([kernel, other])
                   & (_text_column(summary, "implementation") != "")]
    codes = code_identity(rows)
    mine, theirs = set(codes[rows["kernel"] == kernel]), set(codes[rows["kernel"] == other])
    if kernel == other or not mine or mine != theirs or len(mine) != 1 or not next(iter(mine)).startswith("impl:"):
        return ""
    return next(iter(mine))[len("impl:"):]
