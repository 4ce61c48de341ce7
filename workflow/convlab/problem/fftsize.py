"""FFT grid sizes shared by the cupy.fft kernel and its NumPy twin."""


def fast_len(n: int) -> int:
    """The smallest 2^a 3^b 5^c 7^d >= n (sizes FFT libraries handle fastest)."""
    best = 1 << max(0, (n - 1).bit_length())
    f7 = 1
    while f7 < best:
        f5 = f7
        while f5 < best:
            f3 = f5
            while f3 < best:
                f2 = f3
                while f2 < n:
                    f2 *= 2
                best = min(best, f2)
                f3 *= 3
            f5 *= 5
        f7 *= 7
    return best
