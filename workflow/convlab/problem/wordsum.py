"""The sum of an array's words as unsigned integers, modulo 2**64: exact, and the same in any order
of summation, so that a write that changes any value changes it (but for a 2**-64 chance).

On the host NumPy sums them. On the device one small kernel of its own sums them: CuPy's own sum of
a contiguous array goes through CUB's block reduction, whose headers take NVRTC about 2 s a kernel
to compile, and it compiles one kernel per block size it picks for an array's length, so a cold
cache paid seconds in a worker's warm-up and again in the first cells of each size. This kernel
compiles in a fraction of that, once, for any length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# One kernel per word size: each thread adds its words (a grid-stride loop), each warp adds its
# threads' sums, and one atomic add per warp adds it to the total. Unsigned addition wraps modulo
# 2**64, so the order of the additions cannot change the result.
WORD_TYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
_KERNEL = """
extern "C" __global__ void convlab_word_sum_{size}(const {word}* words, unsigned long long count,
                                                   unsigned long long* total) {{
    unsigned long long sum = 0;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {{
        sum += words[i];
    }}
    for (int offset = 16; offset > 0; offset >>= 1) {{
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }}
    if ((threadIdx.x & 31) == 0 && sum != 0) {{
        atomicAdd(total, sum);
    }}
}}
"""
SOURCE = "".join(_KERNEL.format(size=size, word=word) for size, word in WORD_TYPES.items())
THREADS = 256
MAX_BLOCKS = 2048
_MODULES: dict[int, Any] = {}


def _kernel(xp: Any, itemsize: int) -> Any:
    """The device kernel for words of ``itemsize`` bytes, its module built once per array module."""
    module = _MODULES.get(id(xp))
    if module is None:
        module = _MODULES[id(xp)] = xp.RawModule(code=SOURCE)
    return module.get_function(f"convlab_word_sum_{itemsize}")


def word_sum(xp: Any, array: Any) -> int:
    """The sum of ``array``'s words (its itemsize: 1, 2, 4 or 8 bytes) modulo 2**64, on the side it
    lives on (``xp``: NumPy or CuPy)."""
    flat = xp.ascontiguousarray(array).reshape(-1)
    words = flat.view(f"u{flat.itemsize}")
    if xp is np or flat.itemsize not in WORD_TYPES:
        return int(words.sum(dtype=np.uint64))
    total = xp.zeros(1, dtype=xp.uint64)
    count = words.size
    if count:
        blocks = min(MAX_BLOCKS, -(-count // THREADS))
        _kernel(xp, flat.itemsize)((blocks,), (THREADS,), (words, np.uint64(count), total))
    return int(total.get()[0])
