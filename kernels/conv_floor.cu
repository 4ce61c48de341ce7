// Bandwidth-floor direct convolution for few channels (issue 7): HWC and CHW entry points.
//
// Design (shared-memory tile, one load per input byte, no serial latency chains)
//   A block of TX x BY threads owns an output tile of TX columns x TOY = BY * RPT rows (all K
//   channels). Phase 1: the block stages the tile's input window -- (TOY-1)*ST+R rows x
//   (TX-1)*ST+S columns x C channels -- in shared memory. Consecutive threads load
//   consecutive floats of an input row (coalesced; HWC rows are C-interleaved, CHW rows one
//   plane row each); every thread issues all its loads (fully unrolled, ~28 per thread)
//   before it stores any of them, so a block has its whole window (~28 KB) in flight at once
//   and several blocks per SM keep >= 64 KB per SM outstanding. Out-of-image taps are
//   stored as zeros (zero padding), so the compute phase has no bounds checks and no
//   separate border path: odd sizes, unaligned rows and every stride run the same code.
//   Phase 2: thread (tx, ty) computes output column tx, rows ty*RPT .. ty*RPT+RPT-1 from
//   shared memory, sliding down: each shared input row is read once (C*S words) and added
//   into the RPT accumulator rows it touches; filter taps are compile-time __constant__
//   operands (one FFMA each). Stores: HWC K consecutive floats per thread (a warp covers a
//   contiguous 32*K-float span), CHW one coalesced float per plane.
//   DRAM sees the copy floor plus the halos: vertical (R-ST)/(TOY*ST), horizontal
//   (S-ST)/(TX*ST) (both mostly served by L2).
//   Small images: pick RPT small (rows tunable / size-dependent RPT in the description) so
//   that the grid has many short blocks; nothing in a thread is serial beyond one load
//   round-trip, one barrier and RPT rows of FFMAs.
//   If the window would not fit in 48 KB of static shared memory (very large strides or
//   filters), a direct bounds-checked path reads global memory instead (correct, slower).
//
// Defines (from the description): FLOOR_STRIDE = stride, FLOOR_PAD = pad, FLOOR_TX = output
//   columns per block (= blockDim.x), FLOOR_RPT = output rows per thread, FLOOR_BLOCK =
//   threads per block (blockDim.y = FLOOR_BLOCK / FLOOR_TX), FLOOR_LAYOUT = 1 (HWC entry point
//   only) | 0 (CHW only) | undefined (both).
// Layouts: conv2d_floor_hwc: input (H, W, C), output (OH, OW, K);
//          conv2d_floor_chw: input (C, H, W), output (K, OH, OW). Weights OIHW in c_weights.

#ifndef FLOOR_STRIDE
#error "FLOOR_STRIDE must be defined (the description's defines: FLOOR_STRIDE: stride)"
#endif
#ifndef FLOOR_PAD
#error "FLOOR_PAD must be defined (the description's defines: FLOOR_PAD: pad)"
#endif
#ifndef FLOOR_BLOCK
#define FLOOR_BLOCK 256
#endif
#ifndef FLOOR_TX
#define FLOOR_TX 128
#endif
#ifndef FLOOR_RPT
#define FLOOR_RPT 4
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
constexpr int BLOCK = FLOOR_BLOCK;
constexpr int TX = FLOOR_TX;
constexpr int BY = BLOCK / TX;
constexpr int RPT = FLOOR_RPT;
constexpr int TOY = BY * RPT;                 // output rows per block
constexpr int IR = (TOY - 1) * ST + R;        // input rows per block window
constexpr int IC = (TX - 1) * ST + S;         // input columns per block window
constexpr int TOT = C * IR * IC;              // floats in the window
constexpr int NL = (TOT + BLOCK - 1) / BLOCK; // loads per thread
constexpr bool SMEM = TOT * 4 <= 48 * 1024 && NL <= 64;

static_assert(ST >= 1 && PD >= 0 && RPT >= 1, "bad stride, pad or rows");
static_assert(BLOCK % TX == 0 && BY >= 1, "block must be a multiple of FLOOR_TX");
static_assert(K * C * R * S <= 16384, "filter too large for __constant__ memory");

__device__ __forceinline__ float w(int k, int c, int r, int s) {
    return c_weights[((k * C + c) * R + r) * S + s];
}

template <bool HWC>
__device__ __forceinline__ void store(float* __restrict__ out, int OH, int OW, int oy, int ox,
                                      const float (&acc)[K]) {
    if (HWC) {
        float* p = out + ((size_t)oy * OW + ox) * K;
#pragma unroll
        for (int k = 0; k < K; ++k) __stcs(p + k, acc[k]);
    } else {
#pragma unroll
        for (int k = 0; k < K; ++k) __stcs(out + (size_t)k * OH * OW + (size_t)oy * OW + ox, acc[k]);
    }
}

template <bool HWC>
__device__ __forceinline__ void run_smem(const float* __restrict__ in, float* __restrict__ out,
                                         int H, int W, int OH, int OW) {
    __shared__ float sm[SMEM ? TOT : 1];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const int ox0 = blockIdx.x * TX;
    const int oy0 = blockIdx.y * TOY;
    const int ix0 = ox0 * ST - PD;
    const int iy0 = oy0 * ST - PD;

    // Phase 1: all loads in flight, then all shared stores.
    float v[NL];
#pragma unroll
    for (int i = 0; i < NL; ++i) {
        const int e = tid + i * BLOCK;
        v[i] = 0.0f;
        if (i + 1 < NL || e < TOT) {
            if (HWC) {
                const int row = e / (IC * C);
                const int f = e - row * (IC * C);
                const int gy = iy0 + row;
                const int gx = ix0 * C + f;
                if ((unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)(W * C))
                    v[i] = __ldg(in + ((size_t)gy * W) * C + gx);
            } else {
                const int c = e / (IR * IC);
                const int rem = e - c * (IR * IC);
                const int row = rem / IC;
                const int col = rem - row * IC;
                const int gy = iy0 + row;
                const int gx = ix0 + col;
                if ((unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)W)
                    v[i] = __ldg(in + (size_t)c * H * W + (size_t)gy * W + gx);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < NL; ++i) {
        const int e = tid + i * BLOCK;
        if (i + 1 < NL || e < TOT) sm[e] = v[i];
    }
    __syncthreads();

    // Phase 2: column tx, rows ty*RPT .. +RPT-1 of the tile, sliding down the shared window.
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ox = ox0 + tx;
    if (ox >= OW) return;
    float acc[RPT][K];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
#pragma unroll
        for (int k = 0; k < K; ++k) acc[j][k] = 0.0f;

    const int rbase = ty * RPT * ST;      // first window row of this thread
#pragma unroll
    for (int q = 0; q < (RPT - 1) * ST + R; ++q) {
        bool used = false;
#pragma unroll
        for (int j = 0; j < RPT; ++j) used |= (q - j * ST >= 0 && q - j * ST < R);
        if (!used) continue;
        float x[C][S];
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
            for (int s = 0; s < S; ++s)
                x[c][s] = HWC ? sm[(rbase + q) * (IC * C) + (tx * ST + s) * C + c]
                              : sm[(c * IR + rbase + q) * IC + tx * ST + s];
#pragma unroll
        for (int j = 0; j < RPT; ++j) {
            const int r = q - j * ST;
            if (r < 0 || r >= R) continue;
#pragma unroll
            for (int c = 0; c < C; ++c)
#pragma unroll
                for (int s = 0; s < S; ++s)
#pragma unroll
                    for (int k = 0; k < K; ++k) acc[j][k] = fmaf(x[c][s], w(k, c, r, s), acc[j][k]);
        }
    }
#pragma unroll
    for (int j = 0; j < RPT; ++j) {
        const int oy = oy0 + ty * RPT + j;
        if (oy < OH) store<HWC>(out, OH, OW, oy, ox, acc[j]);
    }
}

// Fallback for windows too large for shared memory: one thread per output column strip,
// every tap bounds-checked, read from global memory (L1/L2 serve the reuse).
template <bool HWC>
__device__ __forceinline__ void run_direct(const float* __restrict__ in, float* __restrict__ out,
                                           int H, int W, int OH, int OW) {
    const int ox = blockIdx.x * TX + threadIdx.x;
    if (ox >= OW) return;
#pragma unroll 1
    for (int j = 0; j < RPT; ++j) {
        const int oy = blockIdx.y * TOY + threadIdx.y * RPT + j;
        if (oy >= OH) return;
        float acc[K];
#pragma unroll
        for (int k = 0; k < K; ++k) acc[k] = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int iy = oy * ST - PD + r;
            if ((unsigned)iy >= (unsigned)H) continue;
#pragma unroll
            for (int s = 0; s < S; ++s) {
                const int ix = ox * ST - PD + s;
                if ((unsigned)ix >= (unsigned)W) continue;
#pragma unroll
                for (int c = 0; c < C; ++c) {
                    const float x = HWC ? __ldg(in + ((size_t)iy * W + ix) * C + c)
                                        : __ldg(in + (size_t)c * H * W + (size_t)iy * W + ix);
#pragma unroll
                    for (int k = 0; k < K; ++k) acc[k] = fmaf(x, w(k, c, r, s), acc[k]);
                }
            }
        }
        store<HWC>(out, OH, OW, oy, ox, acc);
    }
}

template <bool HWC>
__device__ __forceinline__ void run(const float* __restrict__ in, float* __restrict__ out,
                                    int H, int W, int OH, int OW) {
    if constexpr (SMEM) run_smem<HWC>(in, out, H, W, OH, OW);
    else                run_direct<HWC>(in, out, H, W, OH, OW);
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
