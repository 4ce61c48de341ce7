// Bandwidth-floor direct convolution for few channels (read the input once, write the output once): HWC and CHW entry points.
//
// Design (one DRAM read per input byte, all K output channels from that read)
//   Tiles (FLOOR_PATH 0): a block of TX x BY threads owns an output tile TXC = TX * CPT columns
//   wide and TOY = BY * RPT rows tall (all K channels). Its input window -- (TOY-1)*ST+R rows x
//   (TXC-1)*ST+S columns x C channels -- is copied into shared memory with cp.async (global ->
//   shared, no staging registers): 16 bytes per copy where rows are 16-byte aligned (HWC:
//   W*C % 4 == 0; CHW: W % 4 == 0), over the aligned superset of each window row (whole
//   32-byte sectors where the blocks' windows allow; see Window), else 4 bytes per copy.
//   Out-of-image taps are zero-filled by the copy (src-size 0), so the compute has no bounds
//   checks and no border path: odd sizes and every stride run one code. Thread (tx, ty) then
//   computes CPT adjacent columns x RPT rows, sliding down the window: each window row's taps
//   are read once (128-bit shared loads when aligned)
//   and added into the RPT rows they touch; filter taps are compile-time __constant__ operands
//   (one FFMA each). Stores are streaming (__stcs), 128-bit where CPT*K (HWC) or CPT (CHW)
//   floats are aligned; HWC rows at CPT 4 leave through shared memory, one warp's row at a time,
//   as whole 32-byte sectors (see store_row). At stride 1 the H200 issues on 70-80 % of cycles
//   here (Nsight), so CPT = 4 cuts the shared loads and stores per output 4-fold (NCHW 1.26 ->
//   1.19 x copy). Issue is not the only limit: a division-free window copy (a fifth fewer
//   instructions) did not speed up HWC, and neither did blocks of several tiles that copy the
//   next window while computing this one (measured, H200; not kept).
//   Streaming (FLOOR_PATH 1): no shared memory and no barriers; see run_stream. Faster where
//   few rows share taps (strides 2-3).
//   DRAM sees the copy floor plus the halos: vertical (R-ST)/(TOY*ST), horizontal
//   (S-ST)/(TXC*ST) (both mostly served by L2).
//   Small images: RPT 1 (size-dependent in the description) so that the grid has many short
//   blocks, and the filter's taps in registers (FLOOR_TAPS_IN_REGISTERS; see RegisterFilter).
//   Older GPUs (no cp.async): plain loads, same code. A window too large for 48 KB of static
//   shared memory (large strides or filters) takes a bounds-checked direct path.
//
// Defines (from the description): FLOOR_STRIDE = stride, FLOOR_PAD = pad, FLOOR_TX = threads
//   per block along x (blockDim.x), FLOOR_CPT = output columns per thread (TXC = TX * CPT per
//   block), FLOOR_RPT = output rows per thread, FLOOR_BLOCK = threads per block (blockDim.y =
//   FLOOR_BLOCK / FLOOR_TX), FLOOR_PATH = 0 (tiles) | 1 (streaming), FLOOR_TAPS_IN_REGISTERS =
//   1 (taps read into registers from the weights argument) | 0 (c_weights), FLOOR_LAYOUT = 1
//   (HWC entry point only) | 0 (CHW only) | undefined (both). Grid: (cdiv(OW, TXC), cdiv(OH, TOY)).
// Arguments: input, weights (the same taps as c_weights, OIHW), output, H, W, OH, OW.
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
#ifndef FLOOR_PATH
#define FLOOR_PATH 0
#endif
#ifndef FLOOR_CPT
#define FLOOR_CPT 1
#endif
#ifndef FLOOR_TAPS_IN_REGISTERS
#define FLOOR_TAPS_IN_REGISTERS 0
#endif
// Registers only where the taps fit beside the rest (the seed's 3x3 filters, 3 in and 3 out: 81);
// the description sets FLOOR_TAPS_IN_REGISTERS only for such filters.
#if FLOOR_TAPS_IN_REGISTERS
static_assert(CONV_K * CONV_C * CONV_R * CONV_S <= 96, "the filter's taps in registers: at most 96");
#else
// OIHW = (K, C, R, S), filled from the weights buffer at setup (description key `constants`).
// Declared only where read: a module holding a __constant__ array took ~0.1 us longer per launch
// at 128^2-512^2 even where its kernel never read it (H200, graph-timed, side by side).
__constant__ float c_weights[CONV_K * CONV_C * CONV_R * CONV_S];
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FLOOR_CP_ASYNC 1
#else
#define FLOOR_CP_ASYNC 0
#endif

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
constexpr int TOY = BY * RPT;                 // output rows per tile
constexpr int IR = (TOY - 1) * ST + R;        // input rows per window
constexpr int CPT = FLOOR_CPT;                // output columns per thread
constexpr int TXC = TX * CPT;                 // output columns per block
constexpr int IC = (TXC - 1) * ST + S;        // input columns per window
constexpr int SMEM_LIMIT = 48 * 1024;         // static shared memory per block

static_assert(ST >= 1 && PD >= 0 && RPT >= 1 && CPT >= 1, "bad stride, pad, rows or columns");
static_assert(BLOCK % TX == 0 && BY >= 1, "block must be a multiple of FLOOR_TX");
static_assert(K * C * R * S <= 16384, "filter too large for __constant__ memory");

// Floats between the first input columns of two neighbouring blocks' windows.
template <bool HWC>
__host__ __device__ constexpr int block_step() { return HWC ? TXC * ST * C : TXC * ST; }

// The window in shared memory: NP planes (HWC: 1 plane of C-interleaved rows; CHW: C planes)
// of IR rows, each row RS floats apart. WIDE windows hold an aligned superset of every row (a
// few spare floats each side), the others exactly the window.
template <bool HWC, bool WIDE>
struct Window {
    static constexpr int NP = HWC ? 1 : C;
    static constexpr int RL = HWC ? IC * C : IC;               // floats the window needs per row
    // WIDE rows start at a 32-byte boundary where every block's window starts at the same offset
    // from one (else at a 16-byte one) and span whole 32-byte sectors: two lanes' 16-byte copies
    // then fill each sector. Rows starting mid-sector had the L2 serve every sector twice (Nsight,
    // H200, NCHW 4096^2 stride 1: 15.0 M L2 read sectors, 7.9 M aligned; 1.196 -> 1.117 x copy).
    static constexpr int ALIGN = WIDE && block_step<HWC>() % 8 == 0 ? 8 : 4;     // floats
    // 16-byte chunks per row: the row and up to ALIGN - 1 floats before it, in whole sectors at 8
    static constexpr int RQ = WIDE ? (ALIGN == 8 ? (RL + 7 + 7) / 8 * 2 : (RL + 6 + 3) / 4) : 0;
    static constexpr int RS = WIDE ? RQ * 4 : RL;               // row stride in shared memory
    static constexpr int FLOATS = NP * IR * RS;
    static constexpr bool FITS = FLOATS * 4 <= SMEM_LIMIT;
};

// The filter's taps, read at compile-time offsets. Constant: __constant__ operands of the FFMAs
// (no registers), for the bandwidth-bound sizes. Registers: loaded once per thread from the
// weights buffer, for the launch-bound sizes, where a thread's chain is short and the constant
// cache's misses on c_weights (one 64-byte line after another, each an L2 round trip) were
// its longest part; these loads are all in flight together, beside the input's.
#if !FLOOR_TAPS_IN_REGISTERS
struct ConstantFilter {
    __device__ __forceinline__ explicit ConstantFilter(const float* __restrict__) {}
    __device__ __forceinline__ float operator()(int k, int c, int r, int s) const {
        return c_weights[((k * C + c) * R + r) * S + s];
    }
};
#endif

struct RegisterFilter {
    static constexpr int N = K * C * R * S;
    float v[N];
    __device__ __forceinline__ explicit RegisterFilter(const float* __restrict__ weights) {
        if ((reinterpret_cast<size_t>(weights) & 15) == 0) {
#pragma unroll
            for (int i = 0; i < N / 4; ++i) {
                const float4 q = __ldg(reinterpret_cast<const float4*>(weights) + i);
                v[4 * i] = q.x; v[4 * i + 1] = q.y; v[4 * i + 2] = q.z; v[4 * i + 3] = q.w;
            }
#pragma unroll
            for (int i = N / 4 * 4; i < N; ++i) v[i] = __ldg(weights + i);
        } else {
#pragma unroll
            for (int i = 0; i < N; ++i) v[i] = __ldg(weights + i);
        }
    }
    __device__ __forceinline__ float operator()(int k, int c, int r, int s) const {
        return v[((k * C + c) * R + r) * S + s];
    }
};

#if FLOOR_TAPS_IN_REGISTERS
using Filter = RegisterFilter;
#else
using Filter = ConstantFilter;
#endif

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

// Global -> shared without staging registers where the hardware has cp.async (sm_80+);
// src-size 0 writes zeros (padding) and reads nothing. 16-byte copies bypass L1 (.cg).
__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void copy4(float* dst, const float* src, bool ok) {
#if FLOOR_CP_ASYNC
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(shared_address(dst)), "l"(src), "r"(ok ? 4 : 0) : "memory");
#else
    *dst = ok ? __ldg(src) : 0.0f;
#endif
}
__device__ __forceinline__ void copy16(float* dst, const float* src, bool ok) {
#if FLOOR_CP_ASYNC
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(shared_address(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
#else
    *reinterpret_cast<float4*>(dst) = ok ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0, 0, 0, 0);
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

// First float of the window's rows in a plane row: HWC C-interleaved, CHW one float per column.
template <bool HWC>
__device__ __forceinline__ int window_first_float(int ix0) { return HWC ? ix0 * C : ix0; }

// Issue the copies of one window (input rows iy0.., first input column ix0) into buf.
// Consecutive threads take consecutive chunks of a row (coalesced).
template <bool HWC, bool WIDE>
__device__ __forceinline__ void issue_window(const float* __restrict__ in, float* buf, int H, int W,
                                             int ix0, int iy0, int tid) {
    using Win = Window<HWC, WIDE>;
    constexpr int UNIT = WIDE ? 4 : 1;                           // floats per copy
    constexpr int PER_ROW = WIDE ? Win::RQ : Win::RL;            // copies per row
    constexpr int COPIES = Win::NP * IR * PER_ROW;
    const int rowlen = HWC ? W * C : W;
    const size_t plane = (size_t)H * W;
    // WIDE: rows start at the aligned float below the window's first (floor for negatives)
    const int f0 = window_first_float<HWC>(ix0);
    const int a0 = WIDE ? (f0 & ~(Win::ALIGN - 1)) : f0;
#pragma unroll 4
    for (int e = tid; e < COPIES; e += BLOCK) {
        const int p = e / (IR * PER_ROW);
        const int rem = e - p * (IR * PER_ROW);
        const int row = rem / PER_ROW;
        const int q = rem - row * PER_ROW;
        const int gy = iy0 + row, gx = a0 + q * UNIT;
        // WIDE chunks never straddle the row's end: rowlen % 4 == 0 there
        const bool ok = (unsigned)gy < (unsigned)H && gx >= 0 && gx + UNIT <= rowlen;
        const float* src = ok ? in + p * plane + (size_t)gy * rowlen + gx : in;
        float* dst = buf + (p * IR + row) * Win::RS + q * UNIT;
        if constexpr (WIDE) copy16(dst, src, ok);
        else copy4(dst, src, ok);
    }
}

// Output columns per thread (FLOOR_CPT): with 4 (and HWC C*ST*4 or CHW ST*4 floats a
// multiple of 4) a thread's taps of one window row are 16-byte aligned in shared memory and
// its outputs 16-byte aligned in global memory, so it reads them with 128-bit shared loads
// and writes 128-bit stores: far fewer instructions per output than one column per thread,
// where the H200 is issue-bound at stride 1.
// Taps a thread reads from one window row: HWC SPAN C-interleaved floats, CHW SPAN floats per plane.
constexpr int SPAN_COLS = (CPT - 1) * ST + S;

template <bool HWC>
struct Taps {
    static constexpr int N = HWC ? SPAN_COLS * C : SPAN_COLS;                 // floats per plane row
    static constexpr int STEP = HWC ? CPT * ST * C : CPT * ST;                // floats between threads
    static constexpr bool VEC = STEP % 4 == 0 && FLOOR_CP_ASYNC;
};

// The thread's taps of one window row (one plane) into v[LEAD ..]: 128-bit loads from the
// aligned float at or below the first tap when VEC (LEAD = that float's distance below it).
template <int N, int LEAD, bool VEC>
__device__ __forceinline__ void read_taps(const float* p, float (&v)[((LEAD + N + 3) / 4) * 4]) {
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < (LEAD + N + 3) / 4; ++i) {
            const float4 q = reinterpret_cast<const float4*>(p - LEAD)[i];
            v[4 * i] = q.x; v[4 * i + 1] = q.y; v[4 * i + 2] = q.z; v[4 * i + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) v[LEAD + i] = p[i];
    }
}

// Stores of one output row's CPT columns x K channels; 128-bit where aligned and in range.
template <bool HWC>
__device__ __forceinline__ void store_cols(float* __restrict__ out, int OH, int OW, int oy, int ox,
                                           const float (&acc)[CPT][K]) {
    const bool whole = ox + CPT <= OW;
    if (HWC) {
        float* p = out + ((size_t)oy * OW + ox) * K;
        if ((CPT * K) % 4 == 0 && whole && ((OW * K) & 3) == 0) {
#pragma unroll
            for (int i = 0; i < CPT * K / 4; ++i)
                __stcs(reinterpret_cast<float4*>(p) + i,
                       make_float4(acc[(4 * i) / K][(4 * i) % K], acc[(4 * i + 1) / K][(4 * i + 1) % K],
                                   acc[(4 * i + 2) / K][(4 * i + 2) % K], acc[(4 * i + 3) / K][(4 * i + 3) % K]));
        } else {
#pragma unroll
            for (int i = 0; i < CPT; ++i)
                if (ox + i < OW)
#pragma unroll
                    for (int k = 0; k < K; ++k) __stcs(p + i * K + k, acc[i][k]);
        }
    } else {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            float* p = out + (size_t)k * OH * OW + (size_t)oy * OW + ox;
            if (CPT % 4 == 0 && whole && (OW & 3) == 0) {
#pragma unroll
                for (int i = 0; i < CPT / 4; ++i)
                    __stcs(reinterpret_cast<float4*>(p) + i,
                           make_float4(acc[4 * i][k], acc[4 * i + 1][k], acc[4 * i + 2][k], acc[4 * i + 3][k]));
            } else {
#pragma unroll
                for (int i = 0; i < CPT; ++i)
                    if (ox + i < OW) __stcs(p + i, acc[i][k]);
            }
        }
    }
}

// HWC, tiles, CPT * K a multiple of 4: a warp's outputs of one row are 32 * CPT * K adjacent
// floats in global memory. They go through this warp's STAGE floats of shared memory and out as
// 128-bit stores of whole 32-byte sectors. A thread's own CPT * K floats would be 16-byte
// stores 48 bytes apart (at CPT 4, K 3): two half-sector L2 write requests per sector. At
// stride 1 on the H200 the L2 is the busiest unit (Nsight, 4096^2: 89 % of its peak at CPT 1).
// (At CPT 1 the staging's extra instructions cost more than they saved: the SMs issue on 70 %
// of cycles there.)
constexpr int STAGE = 32 * CPT * K;
constexpr bool STAGED = TX % 32 == 0 && (CPT * K) % 4 == 0;

// The one shared buffer both load paths use: the larger of the two windows that fit, then the
// warps' store stages (HWC) where they fit too.
template <bool HWC>
struct SharedBuffer {
    using Wide = Window<HWC, true>;
    using Exact = Window<HWC, false>;
    static constexpr int WIDE = Wide::FITS ? Wide::FLOATS : 0;
    static constexpr int EXACT = Exact::FITS ? Exact::FLOATS : 0;
    static constexpr int WINDOW = ((WIDE > EXACT ? WIDE : EXACT) + 3) / 4 * 4;   // 16-byte aligned
    static constexpr int STAGES = HWC && STAGED ? BLOCK / 32 * STAGE : 0;
    static constexpr bool STAGED_FITS = STAGES > 0 && (WINDOW + STAGES) * 4 <= SMEM_LIMIT;
    static constexpr int FLOATS = WINDOW + (STAGED_FITS ? STAGES : 0) + 1;
};

template <bool HWC>
__device__ __forceinline__ void store_row(float* stage, float* __restrict__ out, int OH, int OW, int oy, int ox,
                                          const float (&acc)[CPT][K]) {
    if constexpr (HWC && SharedBuffer<HWC>::STAGED_FITS) {
        const int lane = threadIdx.x & 31;
        const int first = ox - lane * CPT;                       // the warp's first column
        float* row = out + ((size_t)oy * OW + first) * K;
        const bool whole = oy < OH && first + 32 * CPT <= OW && ((OW * K) & 3) == 0 &&
                           (reinterpret_cast<size_t>(out) & 15) == 0;     // the same for the whole warp
        if (whole) {
            __syncwarp();                                        // the previous row's reads are done
            float4* mine = reinterpret_cast<float4*>(stage) + lane * (CPT * K / 4);
#pragma unroll
            for (int v = 0; v < CPT * K / 4; ++v)
                mine[v] = make_float4(acc[(4 * v) / K][(4 * v) % K], acc[(4 * v + 1) / K][(4 * v + 1) % K],
                                      acc[(4 * v + 2) / K][(4 * v + 2) % K], acc[(4 * v + 3) / K][(4 * v + 3) % K]);
            __syncwarp();
#pragma unroll
            for (int v = lane; v < STAGE / 4; v += 32)
                __stcs(reinterpret_cast<float4*>(row) + v, reinterpret_cast<const float4*>(stage)[v]);
            return;
        }
    }
    if (oy < OH && ox < OW) store_cols<HWC>(out, OH, OW, oy, ox, acc);
}

// Columns tx*CPT .. +CPT-1, rows ty*RPT .. +RPT-1 of a tile, sliding down the window in shared
// memory: each window row's taps are read once and added into the RPT rows they touch.
// SHIFT: floats between a row's start in shared memory and the window's first float.
template <bool HWC, bool WIDE, int SHIFT>
__device__ __forceinline__ void compute_tile(const float* sm, float* stage, const Filter& w,
                                             float* __restrict__ out, int OH, int OW, int ox0, int oy0) {
    using Win = Window<HWC, WIDE>;
    using T = Taps<HWC>;
    constexpr bool VEC = WIDE && T::VEC;
    constexpr int LEAD = VEC ? SHIFT % 4 : 0;           // taps start LEAD floats past an aligned float
    constexpr int NV = ((LEAD + T::N + 3) / 4) * 4;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ox = ox0 + tx * CPT;
    float acc[RPT][CPT][K];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
#pragma unroll
        for (int i = 0; i < CPT; ++i)
#pragma unroll
            for (int k = 0; k < K; ++k) acc[j][i][k] = 0.0f;

    const float* base = sm + SHIFT + ty * RPT * ST * Win::RS + tx * T::STEP;
#pragma unroll
    for (int q = 0; q < (RPT - 1) * ST + R; ++q) {
        bool used = false;
#pragma unroll
        for (int j = 0; j < RPT; ++j) used |= (q - j * ST >= 0 && q - j * ST < R);
        if (!used) continue;
        float v[Win::NP][NV];
#pragma unroll
        for (int p = 0; p < Win::NP; ++p) read_taps<T::N, LEAD, VEC>(base + (p * IR + q) * Win::RS, v[p]);
#pragma unroll
        for (int j = 0; j < RPT; ++j) {
            const int r = q - j * ST;
            if (r < 0 || r >= R) continue;
#pragma unroll
            for (int i = 0; i < CPT; ++i)
#pragma unroll
                for (int c = 0; c < C; ++c)
#pragma unroll
                    for (int s = 0; s < S; ++s) {
                        const float x = HWC ? v[0][LEAD + (i * ST + s) * C + c] : v[c][LEAD + i * ST + s];
#pragma unroll
                        for (int k = 0; k < K; ++k) acc[j][i][k] = fmaf(x, w(k, c, r, s), acc[j][i][k]);
                    }
        }
    }
#pragma unroll
    for (int j = 0; j < RPT; ++j) store_row<HWC>(stage, out, OH, OW, oy0 + ty * RPT + j, ox, acc[j]);
}

// One tile per block: copy its window into shared memory, then compute from it.
template <bool HWC, bool WIDE, int SHIFT>
__device__ __forceinline__ void run_tile(float* sm, const Filter& filter, const float* __restrict__ in,
                                         float* __restrict__ out, int H, int W, int OH, int OW) {
    using Buffer = SharedBuffer<HWC>;
    const int tid = threadIdx.y * TX + threadIdx.x;
    const int ox0 = blockIdx.x * TXC;
    const int oy0 = blockIdx.y * TOY;
    issue_window<HWC, WIDE>(in, sm, H, W, ox0 * ST - PD, oy0 * ST - PD, tid);
    commit();
    wait_groups<0>();
    __syncthreads();
    float* stage = Buffer::STAGED_FITS ? sm + Buffer::WINDOW + tid / 32 * STAGE : nullptr;
    compute_tile<HWC, WIDE, SHIFT>(sm, stage, filter, out, OH, OW, ox0, oy0);
}

// WIDE windows start at the aligned float at or below the window's first: the distance is the
// same for every block when a block's columns span a multiple of 4 floats (then the taps'
// alignment is compile-time), else it is read per block.
template <bool HWC>
__device__ __forceinline__ void run_wide(float* sm, const Filter& filter, const float* __restrict__ in,
                                         float* __restrict__ out, int H, int W, int OH, int OW) {
    if constexpr (block_step<HWC>() % 4 == 0) {
        constexpr int SHIFT = (-(HWC ? C : 1) * PD) & (Window<HWC, true>::ALIGN - 1);
        run_tile<HWC, true, SHIFT>(sm, filter, in, out, H, W, OH, OW);
    } else {
        switch (window_first_float<HWC>(blockIdx.x * TXC * ST - PD) & 3) {
            case 0: run_tile<HWC, true, 0>(sm, filter, in, out, H, W, OH, OW); break;
            case 1: run_tile<HWC, true, 1>(sm, filter, in, out, H, W, OH, OW); break;
            case 2: run_tile<HWC, true, 2>(sm, filter, in, out, H, W, OH, OW); break;
            default: run_tile<HWC, true, 3>(sm, filter, in, out, H, W, OH, OW); break;
        }
    }
}

// Streaming path (FLOOR_PATH 1): no shared memory, no barriers. A thread walks rows ty*RPT..
// of its CPT columns (one after another), reading each input row's C*S taps straight from
// global memory (L1 serves the neighbours' overlap) and adding them into the RPT rows they
// touch; the row loop is fully unrolled so all of a column's loads can be in flight at once.
// Fewer instructions and barriers than the tiles where few rows share taps (stride 2-3).
// A warp whose taps all lie inside the image takes the UNCHECKED copy of the column: one
// address per input row (per plane for CHW) and every tap a load at an immediate offset from it.
// The checked copy's per-tap bounds, predicates and zeros were most of its instructions (Nsight,
// H200, 256^2 stride 1: 7.4 warp instructions per output, of which the FMAs are 2.5), and at the
// launch-bound sizes time follows instructions: a warp issues about every 4.5 cycles there.
template <bool HWC, bool UNCHECKED>
__device__ __forceinline__ void stream_column(const Filter& w, const float* __restrict__ in, float* __restrict__ out,
                                              int H, int W, int OH, int OW, int ox, int oy0) {
    const int iy0 = oy0 * ST - PD;
    const int ix0 = ox * ST - PD;
    const size_t plane = (size_t)H * W;
    float acc[RPT][K];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
#pragma unroll
        for (int k = 0; k < K; ++k) acc[j][k] = 0.0f;
#pragma unroll
    for (int q = 0; q < (RPT - 1) * ST + R; ++q) {
        bool used = false;
#pragma unroll
        for (int j = 0; j < RPT; ++j) used |= (q - j * ST >= 0 && q - j * ST < R);
        if (!used) continue;
        const int gy = iy0 + q;
        float x[C][S];
        if constexpr (UNCHECKED) {
            const float* row = in + (HWC ? ((size_t)gy * W + ix0) * C : (size_t)gy * W + ix0);
#pragma unroll
            for (int s = 0; s < S; ++s)
#pragma unroll
                for (int c = 0; c < C; ++c) x[c][s] = __ldg(HWC ? row + s * C + c : row + c * plane + s);
        } else {
            const bool row_ok = (unsigned)gy < (unsigned)H;
#pragma unroll
            for (int s = 0; s < S; ++s) {
                const bool ok = row_ok && (unsigned)(ix0 + s) < (unsigned)W;
#pragma unroll
                for (int c = 0; c < C; ++c)
                    x[c][s] = ok ? __ldg(HWC ? in + ((size_t)gy * W + ix0 + s) * C + c
                                             : in + c * plane + (size_t)gy * W + ix0 + s)
                                 : 0.0f;
            }
        }
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
    for (int j = 0; j < RPT; ++j)
        if (oy0 + j < OH) store<HWC>(out, OH, OW, oy0 + j, ox, acc[j]);
}

template <bool HWC>
__device__ __forceinline__ void run_stream(const Filter& w, const float* __restrict__ in, float* __restrict__ out,
                                           int H, int W, int OH, int OW) {
    const int oy0 = blockIdx.y * TOY + threadIdx.y * RPT;
    if (oy0 >= OH) return;
    const int iy0 = oy0 * ST - PD;
    // every input row the thread's RPT outputs read (those past OH are read but not stored)
    const bool rows_inside = iy0 >= 0 && iy0 + (RPT - 1) * ST + R <= H;
#pragma unroll 1
    for (int i = 0; i < CPT; ++i) {
        const int ox = (blockIdx.x * TX + threadIdx.x) * CPT + i;
        if (ox >= OW) return;
        const int ix0 = ox * ST - PD;
        // uniform per warp, so that no warp runs both copies
        if (__all_sync(__activemask(), rows_inside && ix0 >= 0 && ix0 + S <= W))
            stream_column<HWC, true>(w, in, out, H, W, OH, OW, ox, oy0);
        else
            stream_column<HWC, false>(w, in, out, H, W, OH, OW, ox, oy0);
    }
}

// Fallback for windows too large for shared memory: one thread per output column strip,
// every tap bounds-checked, read from global memory (L1/L2 serve the reuse).
template <bool HWC>
__device__ __forceinline__ void run_direct(const Filter& w, const float* __restrict__ in, float* __restrict__ out,
                                           int H, int W, int OH, int OW) {
#pragma unroll 1
    for (int col = 0; col < CPT; ++col) {
        const int ox = (blockIdx.x * TX + threadIdx.x) * CPT + col;
        if (ox >= OW) return;
#pragma unroll 1
        for (int j = 0; j < RPT; ++j) {
            const int oy = blockIdx.y * TOY + threadIdx.y * RPT + j;
            if (oy >= OH) break;
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
}

template <bool HWC>
__device__ __forceinline__ void run(const float* __restrict__ in, const float* __restrict__ weights,
                                    float* __restrict__ out, int H, int W, int OH, int OW) {
    const Filter filter(weights);
#if FLOOR_PATH == 1
    run_stream<HWC>(filter, in, out, H, W, OH, OW);
    return;
#endif
    // one buffer for both load paths: two static arrays would both count against occupancy
    __shared__ __align__(16) float sm[SharedBuffer<HWC>::FLOATS];
    const bool aligned_rows = ((HWC ? W * C : W) & 3) == 0 && (reinterpret_cast<size_t>(in) & 15) == 0;
    if constexpr (Window<HWC, true>::FITS) {
        if (aligned_rows) { run_wide<HWC>(sm, filter, in, out, H, W, OH, OW); return; }
    }
    if constexpr (Window<HWC, false>::FITS) {
        run_tile<HWC, false, 0>(sm, filter, in, out, H, W, OH, OW);
    } else {
        run_direct<HWC>(filter, in, out, H, W, OH, OW);
    }
}

}  // namespace conv_floor

// At least this many blocks per SM for 3x3 filters, K <= 4 and <= 24 accumulators: caps registers
// at 64 per thread (windows never pass through registers, so nothing spills). Taps in registers
// take more than that; the launch-bound sizes they are for have few blocks per SM anyway.
#ifndef FLOOR_MINB
#define FLOOR_MINB ((!FLOOR_TAPS_IN_REGISTERS && CONV_R * CONV_S <= 9 && CONV_K <= 4 && CONV_K * FLOOR_RPT * FLOOR_CPT <= 24 && 1024 / FLOOR_BLOCK > 0) ? 1024 / FLOOR_BLOCK : 1)
#endif

// FLOOR_LAYOUT (optional): 1 compiles the HWC entry point only, 0 the CHW one only.
#if !defined(FLOOR_LAYOUT) || FLOOR_LAYOUT == 1
extern "C" __global__ void __launch_bounds__(FLOOR_BLOCK, FLOOR_MINB)
conv2d_floor_hwc(const float* __restrict__ input, const float* __restrict__ weights,
                 float* __restrict__ output, int H, int W, int OH, int OW) {
    conv_floor::run<true>(input, weights, output, H, W, OH, OW);
}
#endif

#if !defined(FLOOR_LAYOUT) || FLOOR_LAYOUT == 0
extern "C" __global__ void __launch_bounds__(FLOOR_BLOCK, FLOOR_MINB)
conv2d_floor_chw(const float* __restrict__ input, const float* __restrict__ weights,
                 float* __restrict__ output, int H, int W, int OH, int OW) {
    conv_floor::run<false>(input, weights, output, H, W, OH, OW);
}
#endif
