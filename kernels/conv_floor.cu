// Bandwidth-floor direct convolution for few channels (issue 7): HWC and CHW entry points.
//
// Why it reaches the byte floor
//   Each thread owns a column strip: 4 output columns x ROWS output rows x all CONV_K
//   channels. It walks down the strip in a rolled loop, one output row per iteration,
//   loading only the min(stride, R) input rows that output row needs for the first time
//   (all CONV_C channels, 16-byte loads, ends of the span as float2/float), and adds each
//   input row into the ceil(R/stride) output rows it touches, whose accumulators live in
//   registers (a sliding window of rows); the completed row is stored with 16-byte stores.
//   So every input byte a thread needs is loaded by it exactly once; the only re-reads are
//   the horizontal halo (S - stride columns, shared with the neighbour lane, served by L1)
//   and the vertical halo between strips ((R - stride) / (ROWS * stride) extra rows,
//   served by L2). DRAM therefore sees C * stride^2 * 4 bytes read and K * 4 bytes
//   written per output pixel: the copy floor. Compute is 81 FFMA per 3x3 output pixel,
//   under half the FP32 rate at the floor's pace: the filter lives in __constant__ memory
//   with compile-time tap indices, so each multiply-add is one FFMA with a constant-bank
//   operand; stride and padding are compile-time too (FLOOR_STRIDE, FLOOR_PAD), so the
//   tap / column / row bookkeeping folds away. Bytes in flight: the rolled loop keeps the
//   register footprint to about (NR * C * NI + NA * 12) floats (80-160 registers), so
//   2-3 blocks of 128-256 threads per SM each hold a row of loads in flight; prefetch=1
//   issues the next row's loads before this row's FFMAs (double buffering).
//
// Paths
//   interior strips (row length and output row length multiples of 4 floats, aligned load
//   span and all input rows inside the image): the unchecked vector path above.
//   Every other strip (image border, odd sizes): a small rolled loop, one output at a time,
//   every tap bounds-checked (zero padding), scalar loads and stores.
//
// Defines (from the description): FLOOR_STRIDE = stride, FLOOR_PAD = pad, FLOOR_ROWS = output
//   rows per thread, FLOOR_BLOCK = threads per block (launch bound), FLOOR_PREFETCH = 0|1,
//   FLOOR_LAYOUT = 1 (HWC entry point only) | 0 (CHW only) | undefined (both).
// Layouts: conv2d_floor_hwc: input (H, W, C), output (OH, OW, K);
//          conv2d_floor_chw: input (C, H, W), output (K, OH, OW). Weights OIHW in c_weights.

#ifndef FLOOR_STRIDE
#error "FLOOR_STRIDE must be defined (the description's defines: FLOOR_STRIDE: stride)"
#endif
#ifndef FLOOR_PAD
#error "FLOOR_PAD must be defined (the description's defines: FLOOR_PAD: pad)"
#endif
#ifndef FLOOR_ROWS
#define FLOOR_ROWS 8
#endif
#ifndef FLOOR_BLOCK
#define FLOOR_BLOCK 256
#endif
#ifndef FLOOR_PREFETCH
#define FLOOR_PREFETCH 1
#endif

// OIHW = (K, C, R, S), filled from the weights buffer at setup (description key `constants`).
__constant__ float c_weights[CONV_K * CONV_C * CONV_R * CONV_S];

namespace conv_floor {

constexpr int C = CONV_C;
constexpr int K = CONV_K;
constexpr int R = CONV_R;
constexpr int S = CONV_S;
constexpr int ST = FLOOR_STRIDE;
constexpr int PD = FLOOR_PAD;
constexpr int ROWS = FLOOR_ROWS;
constexpr bool PREFETCH = FLOOR_PREFETCH != 0;  // load the next output row's input rows early
constexpr int V = 4;                          // output columns per thread (one float4 per row)
constexpr int NI = (V - 1) * ST + S;          // input columns per thread and input row
constexpr int IN_ROWS = (ROWS - 1) * ST + R;  // input rows per thread

static_assert(ST >= 1 && PD >= 0 && ROWS >= 1, "bad stride, pad or rows");
static_assert(K * C * R * S <= 16384, "filter too large for __constant__ memory");

constexpr int ceil4(int x) { return (x + 3) / 4 * 4; }

__device__ __forceinline__ float w(int k, int c, int r, int s) {
    return c_weights[((k * C + c) * R + r) * S + s];
}

// Floats per pixel along a row of one load: C for HWC (interleaved), 1 for CHW (a plane).
template <bool HWC> struct Geo {
    static constexpr int E = HWC ? C : 1;
    static constexpr int A = ceil4(E * PD);                  // floats loaded before the first tap
    static constexpr int OFF = A - E * PD;                   // first needed float in the load
    static constexpr int NV4 = (OFF + E * NI + 3) / 4;       // float4 loads per (channel) row
};

// Load floats OFF .. OFF+N-1 of a 16-byte aligned pointer p into f (same indices): a float4
// for every aligned quad wholly needed, a float2 or float for the partly needed quads at the
// ends (so no register holds a float that is not used).
template <int OFF, int N, int NV4>
__device__ __forceinline__ void load_span(const float* __restrict__ p, float (&f)[4 * NV4]) {
#pragma unroll
    for (int q = 0; q < NV4; ++q) {
        const int lo = OFF > 4 * q ? OFF : 4 * q;
        const int hi = OFF + N < 4 * q + 4 ? OFF + N : 4 * q + 4;
        if (lo == 4 * q && hi == 4 * q + 4) {
            const float4 v4 = __ldg(reinterpret_cast<const float4*>(p) + q);
            f[4 * q] = v4.x; f[4 * q + 1] = v4.y; f[4 * q + 2] = v4.z; f[4 * q + 3] = v4.w;
        } else {
#pragma unroll
            for (int e = 4 * q; e < 4 * q + 4; ++e) {
                if (e < lo || e >= hi) continue;
                if ((e & 1) == 0 && e + 1 < hi) {
                    const float2 v2 = __ldg(reinterpret_cast<const float2*>(p + e));
                    f[e] = v2.x; f[e + 1] = v2.y;
                } else if ((e & 1) == 1 && e - 1 >= lo) {
                    // loaded with its pair
                } else {
                    f[e] = __ldg(p + e);
                }
            }
        }
    }
}

// Per-thread state shared by the unrolled row steps.
struct Tile {
    const float* __restrict__ in;
    float* __restrict__ out;
    int H, W, OH, OW;
    int ox0, ix0, iy0, oy0;
    long long plane, oplane;   // CHW: floats per input / output channel
};

constexpr int NA = (R + ST - 1) / ST;     // output rows that one input row can touch
constexpr int NR = ST < R ? ST : R;       // input rows first needed by each output row
constexpr int Q0 = R - NR;                // their row offsets from oy*ST-PD: Q0 .. R-1
// (the rows between output windows when ST > R are never loaded)

// Load input row iy (all channels, columns ix0 .. ix0+NI-1) of an interior tile into buf.
template <bool HWC>
__device__ __forceinline__ void load_row(const Tile& t, int iy, float (&buf)[C][NI]) {
    using G = Geo<HWC>;
    if constexpr (HWC) {
        float f[4 * G::NV4];
        load_span<G::OFF, C * NI, G::NV4>(t.in + ((long long)iy * t.W + t.ox0 * ST) * C - G::A, f);
#pragma unroll
        for (int x = 0; x < NI; ++x)
#pragma unroll
            for (int c = 0; c < C; ++c) buf[c][x] = f[G::OFF + x * C + c];
    } else {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            float f[4 * G::NV4];
            load_span<G::OFF, NI, G::NV4>(t.in + c * t.plane + (long long)iy * t.W + t.ox0 * ST - G::A, f);
#pragma unroll
            for (int x = 0; x < NI; ++x) buf[c][x] = f[G::OFF + x];
        }
    }
}

// Add input row q (offset q from the current output row's window top oy*ST-PD) into the
// live accumulator rows: A[d] is output row oy+d and takes filter row r = q - d*ST.
template <int Q>
__device__ __forceinline__ void add_row(const float (&buf)[C][NI], float (&A)[NA][V][K]) {
#pragma unroll
    for (int d = 0; d < NA; ++d) {
        const int r = Q - d * ST;
        if (r < 0 || r >= R) continue;
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
            for (int s = 0; s < S; ++s)
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    const float x = buf[c][v * ST + s];
#pragma unroll
                    for (int k = 0; k < K; ++k) A[d][v][k] = fmaf(x, w(k, c, r, s), A[d][v][k]);
                }
    }
}

template <int Q>
__device__ __forceinline__ void add_rows(const float (&rows)[NR][C][NI], float (&A)[NA][V][K]) {
    add_row<Q>(rows[Q - Q0], A);
    if constexpr (Q + 1 < R) add_rows<Q + 1>(rows, A);
}

constexpr bool ROLLED_PROLOGUE = R * S > 9;
constexpr int OSTART = ROLLED_PROLOGUE ? -((Q0 + ST - 1) / ST) : 0;

// Input row n (0 .. NR-1) of loop iteration o (output row oy0 + o), clamped to the tile.
__device__ __forceinline__ int row(const Tile& t, int o, int n) {
    const int iy = t.iy0 + o * ST + Q0 + n;
    return ROLLED_PROLOGUE ? max(iy, t.iy0) : iy;
}

template <bool HWC, int Q>
__device__ __forceinline__ void prologue(const Tile& t, float (&A)[NA][V][K]) {
    if constexpr (Q < Q0) {
        float buf[C][NI];
        load_row<HWC>(t, t.iy0 + Q, buf);
        add_row<Q>(buf, A);
        prologue<HWC, Q + 1>(t, A);
    }
}

// Interior tile: a rolled loop over the tile's output rows. Each iteration loads the NR input
// rows its output row needs first (with PREFETCH: the next iteration's, one iteration ahead),
// adds them into the NA live accumulator rows, stores the completed row A[0] (16-byte
// stores) and shifts the window. Register footprint: ((1 + PREFETCH) * NR * C * NI + NA * V
// * K) floats, independent of ROWS.
template <bool HWC>
__device__ __forceinline__ void tile(const Tile& t) {
    float A[NA][V][K];
#pragma unroll
    for (int d = 0; d < NA; ++d)
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < K; ++k) A[d][v][k] = 0.0f;

    // Input rows 0 .. Q0-1 of the first window (R > ST only). 3x3: an unrolled prologue.
    // Larger filters: OSTART < 0 extra loop iterations for virtual output rows -1, -2, ..
    // (never stored; their rows above the tile are clamped to its first row), so that the
    // register footprint stays one loop body's.
    if constexpr (!ROLLED_PROLOGUE) prologue<HWC, 0>(t, A);

    // The row count is hidden from the optimiser: a rolled loop bounds how far ahead the
    // scheduler hoists loads (one output row, or two with FLOOR_PREFETCH), and so the registers.
    int rows = ROWS;
    asm volatile("" : "+r"(rows));
    float cur[NR][C][NI];
    if constexpr (PREFETCH) {
#pragma unroll
        for (int n = 0; n < NR; ++n) load_row<HWC>(t, row(t, OSTART, n), cur[n]);
    }
#pragma unroll 1
    for (int o = OSTART; o < rows; ++o) {
        if constexpr (PREFETCH) {
            float nxt[NR][C][NI];
            if (o + 1 < rows) {
#pragma unroll
                for (int n = 0; n < NR; ++n) load_row<HWC>(t, row(t, o + 1, n), nxt[n]);
            }
            add_rows<Q0>(cur, A);
#pragma unroll
            for (int n = 0; n < NR; ++n)
#pragma unroll
                for (int c = 0; c < C; ++c)
#pragma unroll
                    for (int x = 0; x < NI; ++x) cur[n][c][x] = nxt[n][c][x];
        } else {
#pragma unroll
            for (int n = 0; n < NR; ++n) load_row<HWC>(t, row(t, o, n), cur[n]);
            add_rows<Q0>(cur, A);
        }

        const int oy = t.oy0 + o;
        if (ROLLED_PROLOGUE && o < 0) {
            // virtual row: not stored
        } else if constexpr (HWC) {
            float4* q = reinterpret_cast<float4*>(t.out + ((long long)oy * t.OW + t.ox0) * K);
            float ov[V * K];
#pragma unroll
            for (int v = 0; v < V; ++v)
#pragma unroll
                for (int k = 0; k < K; ++k) ov[v * K + k] = A[0][v][k];
#pragma unroll
            for (int n = 0; n < K; ++n)   // V * K / 4 == K float4s (V == 4)
                __stcs(q + n, make_float4(ov[4 * n], ov[4 * n + 1], ov[4 * n + 2], ov[4 * n + 3]));
        } else {
#pragma unroll
            for (int k = 0; k < K; ++k)
                __stcs(reinterpret_cast<float4*>(t.out + k * t.oplane + (long long)oy * t.OW + t.ox0),
                       make_float4(A[0][0][k], A[0][1][k], A[0][2][k], A[0][3][k]));
        }

#pragma unroll
        for (int d = 0; d + 1 < NA; ++d)
#pragma unroll
            for (int v = 0; v < V; ++v)
#pragma unroll
                for (int k = 0; k < K; ++k) A[d][v][k] = A[d + 1][v][k];
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < K; ++k) A[NA - 1][v][k] = 0.0f;
    }
}

// Border / unaligned tiles: one output at a time, every tap bounds-checked (zero padding).
// Deliberately a small rolled loop: it runs for a thin frame of threads only (and for the
// whole image when a row is not a multiple of 4 floats), and it keeps the register
// footprint of the kernel that of the interior path.
template <bool HWC>
__device__ __forceinline__ void edge_tile(const Tile& t) {
#pragma unroll 1
    for (int i = 0; i < ROWS; ++i) {
        const int oy = t.oy0 + i;
        if (oy >= t.OH) break;
#pragma unroll 1
        for (int v = 0; v < V; ++v) {
            const int ox = t.ox0 + v;
            if (ox >= t.OW) break;
            float acc[K];
#pragma unroll
            for (int k = 0; k < K; ++k) acc[k] = 0.0f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int iy = oy * ST - PD + r;
                if ((unsigned)iy >= (unsigned)t.H) continue;
#pragma unroll
                for (int s = 0; s < S; ++s) {
                    const int ix = ox * ST - PD + s;
                    if ((unsigned)ix >= (unsigned)t.W) continue;
#pragma unroll
                    for (int c = 0; c < C; ++c) {
                        const long long idx = HWC ? ((long long)iy * t.W + ix) * C + c
                                                  : c * t.plane + (long long)iy * t.W + ix;
                        const float x = __ldg(t.in + idx);
#pragma unroll
                        for (int k = 0; k < K; ++k) acc[k] = fmaf(x, w(k, c, r, s), acc[k]);
                    }
                }
            }
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const long long idx = HWC ? ((long long)oy * t.OW + ox) * K + k
                                          : k * t.oplane + (long long)oy * t.OW + ox;
                t.out[idx] = acc[k];
            }
        }
    }
}

template <bool HWC>
__device__ __forceinline__ void run(const float* __restrict__ in, float* __restrict__ out,
                                    int H, int W, int OH, int OW) {
    using G = Geo<HWC>;
    const int tx = blockIdx.x * blockDim.x + threadIdx.x;
    const int ty = blockIdx.y * blockDim.y + threadIdx.y;
    const int ox0 = tx * V;
    const int oy0 = ty * ROWS;
    if (ox0 >= OW || oy0 >= OH) return;

    // Interior: rows of input and output are 16-byte aligned, and the aligned load footprint
    // (columns) and every input row of the tile lie inside the image. This implies every
    // output of the tile lies inside the output too.
    const int L = W * G::E;                       // floats per input row (per channel for CHW)
    const int base = ox0 * ST * G::E - G::A;      // first float loaded, multiple of 4
    const int iy0 = oy0 * ST - PD;
    const bool interior = (L % 4 == 0) && ((HWC ? OW * K : OW) % 4 == 0) && base >= 0 &&
                          base + 4 * G::NV4 <= L && iy0 >= 0 && iy0 + IN_ROWS <= H;
    const Tile t{in, out, H, W, OH, OW, ox0, ox0 * ST - PD, iy0, oy0,
                 (long long)H * W, (long long)OH * OW};
    if (interior) tile<HWC>(t);
    else          edge_tile<HWC>(t);
}

}  // namespace conv_floor

// FLOOR_LAYOUT (optional): 1 compiles the HWC entry point only, 0 the CHW one only.
#if !defined(FLOOR_LAYOUT) || FLOOR_LAYOUT == 1
extern "C" __global__ void __launch_bounds__(FLOOR_BLOCK)
conv2d_floor_hwc(const float* __restrict__ input, float* __restrict__ output,
                 int H, int W, int OH, int OW) {
    conv_floor::run<true>(input, output, H, W, OH, OW);
}
#endif

#if !defined(FLOOR_LAYOUT) || FLOOR_LAYOUT == 0
extern "C" __global__ void __launch_bounds__(FLOOR_BLOCK)
conv2d_floor_chw(const float* __restrict__ input, float* __restrict__ output,
                 int H, int W, int OH, int OW) {
    conv_floor::run<false>(input, output, H, W, OH, OW);
}
#endif
