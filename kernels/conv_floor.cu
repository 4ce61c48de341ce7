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
//   CHW loads (sm_80+; HWC keeps the register-staged load above, which measured faster on an
//   H200, one tile per block, FLOOR_TPB ignored): cp.async global->shared, 4 bytes per thread per float (zero-fill for the
//   padding via src-size 0), so the window never passes through registers (<= 64 regs with
//   __launch_bounds__(FLOOR_BLOCK, 1024 / FLOOR_BLOCK) for 3x3). The load walk advances its
//   row/column incrementally (no divisions); CHW issues all C planes from one walk.
//   FLOOR_TPB tiles per block (vertically consecutive): with two window buffers the next
//   tile's window is in flight while the current tile computes (cp.async groups); with one
//   buffer (window > 24 KB) the tiles run back to back. Older GPUs: plain loads, same code.
//   If the window would not fit in 48 KB of static shared memory (very large strides or
//   filters), a direct bounds-checked path reads global memory instead (correct, slower).
//
// Defines (from the description): FLOOR_STRIDE = stride, FLOOR_PAD = pad, FLOOR_TX = output
//   columns per block (= blockDim.x), FLOOR_RPT = output rows per thread, FLOOR_BLOCK =
//   threads per block (blockDim.y = FLOOR_BLOCK / FLOOR_TX), FLOOR_TPB = tiles per block
//   (grid.y = cdiv(cdiv(OH, TOY), FLOOR_TPB); default 1), FLOOR_LAYOUT = 1 (HWC entry point
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FLOOR_CP_ASYNC 1
#else
#define FLOOR_CP_ASYNC 0
#endif

// One float global -> shared, asynchronously where the hardware has cp.async (sm_80+): the
// load goes straight to shared memory (no staging registers); src-size 0 stores a zero
// (padding) and reads nothing.
__device__ __forceinline__ void copy4(float* dst, const float* src, bool ok) {
#if FLOOR_CP_ASYNC
    unsigned d;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(d), "l"(src), "r"(ok ? 4 : 0) : "memory");
#else
    *dst = ok ? __ldg(src) : 0.0f;
#endif
}
__device__ __forceinline__ void commit() {
#if FLOOR_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wait_groups() {
#if FLOOR_CP_ASYNC
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
#endif
}

// Issue the loads of one tile's window (rows iy0.., columns ix0..) into buf. The window is
// NR rows of RL contiguous floats per plane (HWC: one plane of C-interleaved rows; CHW: C
// planes sharing one row/column walk); consecutive threads take consecutive floats, the
// row/column of each is advanced incrementally (no divisions in the loop).
template <bool HWC>
__device__ __forceinline__ void issue_window(const float* __restrict__ in, float* buf, int H, int W,
                                             int ix0, int iy0, int tid) {
    constexpr int RL = HWC ? IC * C : IC;
    constexpr int NR = IR;
    constexpr int PT = RL * NR;
    constexpr int NP = HWC ? 1 : C;
    constexpr int NI = (PT + BLOCK - 1) / BLOCK;
    constexpr int DR = BLOCK / RL, DC = BLOCK % RL;
    const int rowlen = HWC ? W * C : W;
    const int gx0 = HWC ? ix0 * C : ix0;
    const size_t plane = (size_t)H * W;
    int row = tid / RL, col = tid - (tid / RL) * RL;
#pragma unroll 4
    for (int i = 0; i < NI; ++i) {
        if (i + 1 < NI || row < NR) {
            const int gy = iy0 + row, gx = gx0 + col;
            const bool ok = (unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)rowlen;
            const float* src = ok ? in + (size_t)gy * rowlen + gx : in;
            float* dst = buf + row * RL + col;
#pragma unroll
            for (int p = 0; p < NP; ++p) copy4(dst + p * PT, ok ? src + p * plane : in, ok);
        }
        row += DR;
        col += DC;
        if (col >= RL) { col -= RL; ++row; }
    }
}

// Tiles per block (vertically consecutive); with two window buffers in shared memory the
// next tile's window is in flight (cp.async) while the current one computes.
#ifndef FLOOR_TPB
#define FLOOR_TPB 1
#endif
constexpr int TPB = FLOOR_TPB;
constexpr int NBUF = (TPB > 1 && FLOOR_CP_ASYNC && 2 * TOT * 4 <= 48 * 1024) ? 2 : 1;
static_assert(TPB >= 1, "bad tiles per block");

template <bool HWC>
__device__ __forceinline__ void compute_tile(const float* sm, float* __restrict__ out, int OH, int OW,
                                             int ox0, int oy0) {
    // column tx, rows ty*RPT .. +RPT-1 of the tile, sliding down the shared window.
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

template <bool HWC>
__device__ __forceinline__ void run_smem(const float* __restrict__ in, float* __restrict__ out,
                                         int H, int W, int OH, int OW) {
    __shared__ float sm[SMEM ? NBUF * TOT : 1];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const int ox0 = blockIdx.x * TX;
    const int ix0 = ox0 * ST - PD;
    const int t0 = blockIdx.y * TPB;                       // first tile row of this block
    const int nty = (OH + TOY - 1) / TOY;
    const int nt = min(TPB, nty - t0);                     // >= 1 by the grid

    issue_window<HWC>(in, sm, H, W, ix0, t0 * TOY * ST - PD, tid);
    commit();
#pragma unroll 1
    for (int i = 0; i < nt; ++i) {
        const int oy0 = (t0 + i) * TOY;
        float* cur = sm + (NBUF == 2 ? (i & 1) * TOT : 0);
        if constexpr (NBUF == 2) {
            if (i + 1 < nt)
                issue_window<HWC>(in, sm + ((i + 1) & 1) * TOT, H, W, ix0, (oy0 + TOY) * ST - PD, tid);
            commit();                                      // possibly empty: keeps the count
            wait_groups<1>();                              // this tile's window has landed
        } else {
            wait_groups<0>();
        }
        __syncthreads();
        compute_tile<HWC>(cur, out, OH, OW, ox0, oy0);
        if (i + 1 < nt) {
            __syncthreads();                               // buffer free before it is refilled
            if constexpr (NBUF == 1) {
                issue_window<HWC>(in, sm, H, W, ix0, (oy0 + TOY) * ST - PD, tid);
                commit();
            }
        }
    }
}

// HWC (measured faster on the H200 than the cp.async path): the original register-staged
// window load, one tile per block.
template <bool HWC>
__device__ __forceinline__ void run_smem_regs(const float* __restrict__ in, float* __restrict__ out,
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
    for (int jj = 0; jj < TPB * RPT; ++jj) {
        const int j = jj % RPT;
        const int oy = (blockIdx.y * TPB + jj / RPT) * TOY + threadIdx.y * RPT + j;
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
    if constexpr (SMEM && HWC) run_smem_regs<HWC>(in, out, H, W, OH, OW);
    else if constexpr (SMEM)   run_smem<HWC>(in, out, H, W, OH, OW);
    else                run_direct<HWC>(in, out, H, W, OH, OW);
}

}  // namespace conv_floor

// At least this many blocks per SM for 3x3 filters, K <= 4 and <= 24 accumulators: caps registers
// at 64 per thread (the windows no longer pass through registers, so nothing spills).
#define FLOOR_MINB ((CONV_R * CONV_S <= 9 && CONV_K <= 4 && CONV_K * FLOOR_RPT <= 24 && 1024 / FLOOR_BLOCK > 0) ? 1024 / FLOOR_BLOCK : 1)

// FLOOR_LAYOUT (optional): 1 compiles the HWC entry point only, 0 the CHW one only.
#if !defined(FLOOR_LAYOUT) || FLOOR_LAYOUT == 1
extern "C" __global__ void __launch_bounds__(FLOOR_BLOCK)
conv2d_floor_hwc(const float* __restrict__ input, float* __restrict__ output,
                 int H, int W, int OH, int OW) {
    conv_floor::run<true>(input, output, H, W, OH, OW);
}
#endif

#if !defined(FLOOR_LAYOUT) || FLOOR_LAYOUT == 0
extern "C" __global__ void __launch_bounds__(FLOOR_BLOCK, FLOOR_MINB)
conv2d_floor_chw(const float* __restrict__ input, float* __restrict__ output,
                 int H, int W, int OH, int OW) {
    conv_floor::run<false>(input, output, H, W, OH, OW);
}
#endif
