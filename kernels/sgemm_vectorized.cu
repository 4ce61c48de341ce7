// SGEMM, register blocking + 16-byte loads + double buffering: C = A @ B, all row-major
// float32; A is M x K, B is K x N, C is M x N.
//
// Block tile 128 x 128, BK (a define, 8 or 16) deep along K, 256 threads (8 warps), each thread
// an 8 x 8 micro-tile of C in registers (64 accumulators).
//
// Warp tiling: the 8 warps form a 4 (M) x 2 (N) grid of 32 x 64 warp tiles; the 32 lanes of a
// warp form a 4 x 8 grid, and lane (lm, ln) owns rows {lm*4 .. lm*4+3, 16 + lm*4 .. +3} and
// columns {ln*4 .. ln*4+3, 32 + ln*4 .. +3} of its warp tile. Per k a thread therefore reads
// its 8 values of A and 8 of B as four 16-byte shared loads (LDS.128): the 8 lanes of each
// quarter warp read 128 consecutive bytes of sB (no bank conflict) and one broadcast word
// group of sA; then 64 FMAs.
//
// Shared memory: sA[2][BK][128 + 4] holds the A tile transposed (k-major, so that the reads
// above are 16-byte vectors along M; the padding spreads the transposed stores over the
// banks), sB[2][BK][128] the B tile as is. Two buffers: while the block computes on one, the
// next K step's tiles are fetched from global memory into registers (prefetch), and written to
// the other buffer after the compute; one __syncthreads per K step.
//
// Global loads are float4 (16 bytes): each thread loads BK/8 float4 of A (4 consecutive k of
// one row) and BK/8 float4 of B (4 consecutive n of one row); the stores of C are float4 too.
// A float4 access needs its row length to be a multiple of 4 and the base pointer 16-byte
// aligned. When A or B fails that (K % 4 != 0 or N % 4 != 0, or an offset view), the whole
// kernel takes a scalar fallback (vb_scalar_block: same tiles and warp tiling, single-buffered,
// every element loaded and stored alone with a bounds check; a grid-uniform branch, inlined).
// On the float4 path, for any M, N, K >= 1: rows of A past M and columns of B past N only feed
// outputs that are never written, so those loads are clamped to the last row / column group
// (valid addresses, no predicate in the hot loop); elements past K feed real outputs and are
// loaded as zeros (the tail K step is zero-padded); the stores of C are guarded, and scalar
// when C's rows are not 16-byte multiples.
//
// Measured on an H200 (SXM, 1980 MHz), square sizes, cuBLAS SGEMM via cupy.matmul (no TF32):
// BK = 16: 83% of cuBLAS at 4096 (42.6 vs 51.2 TFLOPS), 84% at 8192 (43.1 vs 51.2);
// BK = 8: 73-74%. Both use <= 128 registers, so 2 blocks (16 warps) fit per SM; 1 block per SM
// (more registers) was ~35% slower.
//
// Block order: blocks are renumbered in groups of GROUP_M block rows (as in Triton's matmul
// tutorial) so that the blocks running together share A and B panels in L2.
// Block 256 threads, grid (cdiv(N, 128), cdiv(M, 128)) -- any 2-D grid of those sizes.

#ifndef BK
#define BK 8
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

#define VB_BM 128
#define VB_BN 128
#define VB_NT 256
#define VB_PAD 4
#define VB_LA (VB_BM * BK / 4 / VB_NT)  // float4 loads of A per thread and K step
#define VB_LB (VB_BN * BK / 4 / VB_NT)  // float4 loads of B per thread and K step
#ifndef VB_MINB
// Blocks per SM asked of __launch_bounds__: 2, i.e. <= 128 registers and 16 warps per SM (1
// block per SM measured 35% slower on an H200).
#define VB_MINB 2
#endif

typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ void store4(float* __restrict__ p, int ld, int rows, int cols, int r,
                                       int c, bool vec, float4 v) {
    if (r >= rows) return;
    float* q = p + (i64)r * ld + c;
    if (vec) {
        if (c < cols) *reinterpret_cast<float4*>(q) = v;
    } else {
        if (c < cols) q[0] = v.x;
        if (c + 1 < cols) q[1] = v.y;
        if (c + 2 < cols) q[2] = v.z;
        if (c + 3 < cols) q[3] = v.w;
    }
}

// The fallback for operands that allow no float4 loads (K % 4 != 0 or N % 4 != 0, or a
// misaligned pointer): the same block tile and warp tiling, single-buffered, every element
// loaded and stored alone with a bounds check. Kept out of line (__noinline__) so that its
// registers do not crowd the float4 path's.
__device__ __forceinline__ void vb_scalar_block(const float* __restrict__ A,
                                             const float* __restrict__ B, float* __restrict__ C,
                                             int M, int N, int K, int m0, int n0, float* sA_,
                                             float* sB_) {
    float (*sA)[VB_BM + VB_PAD] = reinterpret_cast<float (*)[VB_BM + VB_PAD]>(sA_);
    float (*sB)[VB_BN] = reinterpret_cast<float (*)[VB_BN]>(sB_);
    const int t = threadIdx.x;
    const int warp = t >> 5, lane = t & 31;
    const int tm = (warp >> 1) * 32 + (lane >> 3) * 4;
    const int tn = (warp & 1) * 64 + (lane & 7) * 4;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll 2  // (full unrolling hoists all the address math: spills at BK = 16)
        for (int l = 0; l < VB_BM * BK / VB_NT; ++l) {  // A tile, element e -> (e / BK, e % BK)
            const int e = t + l * VB_NT;
            const int r = e / BK, c = e % BK;
            sA[c][r] = (m0 + r < M && k0 + c < K) ? A[(i64)(m0 + r) * K + k0 + c] : 0.0f;
        }
#pragma unroll 2
        for (int l = 0; l < VB_BN * BK / VB_NT; ++l) {  // B tile, element e -> (e / BN, e % BN)
            const int e = t + l * VB_NT;
            const int r = e / VB_BN, c = e % VB_BN;
            sB[r][c] = (k0 + r < K && n0 + c < N) ? B[(i64)(k0 + r) * N + n0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&sA[k][tm]);
            const float4 a1 = *reinterpret_cast<const float4*>(&sA[k][tm + 16]);
            const float4 b0 = *reinterpret_cast<const float4*>(&sB[k][tn]);
            const float4 b1 = *reinterpret_cast<const float4*>(&sB[k][tn + 32]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gm = m0 + tm + (i & 3) + (i >> 2) * 16;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int gn = n0 + tn + (j & 3) + (j >> 2) * 32;
            if (gn < N) C[(i64)gm * N + gn] = acc[i][j];
        }
    }
}

extern "C" __global__ void __launch_bounds__(VB_NT, VB_MINB)
sgemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                 int M, int N, int K) {
    __shared__ __align__(16) float sA[2][BK][VB_BM + VB_PAD];
    __shared__ __align__(16) float sB[2][BK][VB_BN];

    // Grouped block order: GROUP_M block rows are walked column by column.
    const int grid_n = gridDim.x, grid_m = gridDim.y;
    const int pid = blockIdx.y * grid_n + blockIdx.x;
    const int per_group = GROUP_M * grid_n;
    const int group = pid / per_group;
    const int first_m = group * GROUP_M;
    const int group_rows = min(grid_m - first_m, GROUP_M);
    const int in_group = pid - group * per_group;
    const int m0 = (first_m + in_group % group_rows) * VB_BM;
    const int n0 = (in_group / group_rows) * VB_BN;

    const bool vecA = ((K & 3) == 0) && ((reinterpret_cast<u64>(A) & 15) == 0);
    const bool vecB = ((N & 3) == 0) && ((reinterpret_cast<u64>(B) & 15) == 0);
    const bool vecC = ((N & 3) == 0) && ((reinterpret_cast<u64>(C) & 15) == 0);
    if (!(vecA && vecB)) {  // block-uniform: the scalar path, in its own function
        vb_scalar_block(A, B, C, M, N, K, m0, n0, &sA[0][0][0], &sB[0][0][0]);
        return;
    }

    const int t = threadIdx.x;
    // Global -> register staging. A: float4 f = t + l*256 -> tile row f / (BK/4), k (f % (BK/4))*4.
    // B: float4 f -> tile row f / 32, n (f % 32) * 4.
    constexpr int A_STEP = VB_NT / (BK / 4);   // tile rows between a thread's A float4s
    constexpr int B_STEP = VB_NT / (VB_BN / 4);  // tile rows between a thread's B float4s
    const int a_r = t / (BK / 4), a_c = (t % (BK / 4)) * 4;
    const int b_r = t / (VB_BN / 4), b_c = (t % (VB_BN / 4)) * 4;
    // Rows of A past M and columns of B past N are clamped to the last one (N >= 4 here).
    const float* a_ptr[VB_LA];  // row min(m0 + a_r + l*A_STEP, M-1) of A, column a_c
#pragma unroll
    for (int l = 0; l < VB_LA; ++l) a_ptr[l] = A + (i64)min(m0 + a_r + l * A_STEP, M - 1) * K + a_c;
    const float* b_ptr = B + (i64)b_r * N + min(n0 + b_c, N - 4);  // row b_r, column n0 + b_c

    // Part l of K step k0 -> registers: the l-th float4 of A and of B (zeros past K).
    float4 ra, rb;
    auto fetch = [&](int k0, int l) {
        ra = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (k0 + a_c < K) ra = __ldg(reinterpret_cast<const float4*>(a_ptr[l] + k0));
        rb = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (k0 + b_r + l * B_STEP < K)
            rb = __ldg(reinterpret_cast<const float4*>(b_ptr + (i64)(k0 + l * B_STEP) * N));
    };
    // Registers -> part l of shared buffer buf (A transposed).
    auto stash = [&](int buf, int l) {
        float* s = &sA[buf][a_c][a_r + l * A_STEP];
        s[0 * (VB_BM + VB_PAD)] = ra.x;
        s[1 * (VB_BM + VB_PAD)] = ra.y;
        s[2 * (VB_BM + VB_PAD)] = ra.z;
        s[3 * (VB_BM + VB_PAD)] = ra.w;
        *reinterpret_cast<float4*>(&sB[buf][b_r + l * B_STEP][b_c]) = rb;
    };

    // Compute positions (warp tiling, see the header).
    const int warp = t >> 5, lane = t & 31;
    const int wm = warp >> 1, wn = warp & 1;
    const int lm = lane >> 3, ln = lane & 7;
    const int tm = wm * 32 + lm * 4;  // rows tm .. tm+3 and tm+16 .. tm+19 of the block tile
    const int tn = wn * 64 + ln * 4;  // columns tn .. tn+3 and tn+32 .. tn+35

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int ktiles = (K + BK - 1) / BK;

    // Prologue: K step 0 into buffer 0.
#pragma unroll
    for (int l = 0; l < VB_LA; ++l) {
        fetch(0, l);
        stash(0, l);
    }
    __syncthreads();

    // Main loop. Step kt computes from buffer cur while step kt+1 goes to buffer cur^1, in
    // VB_LA parts (1 for BK = 8, 2 for BK = 16): part l is fetched into registers before the
    // l-th slice of BK / VB_LA k's and stored after it, so only one float4 of A and one of B
    // are in flight per thread (this keeps BK = 16 within 128 registers).
    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < ktiles;
#pragma unroll
        for (int l = 0; l < VB_LA; ++l) {
            if (more) fetch((kt + 1) * BK, l);
#pragma unroll
            for (int kk = 0; kk < BK / VB_LA; ++kk) {
                const int k = l * (BK / VB_LA) + kk;
                const float4 a0 = *reinterpret_cast<const float4*>(&sA[cur][k][tm]);
                const float4 a1 = *reinterpret_cast<const float4*>(&sA[cur][k][tm + 16]);
                const float4 b0 = *reinterpret_cast<const float4*>(&sB[cur][k][tn]);
                const float4 b1 = *reinterpret_cast<const float4*>(&sB[cur][k][tn + 32]);
                const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            }
            // The other buffer is free: its last readers passed the previous __syncthreads.
            if (more) stash(cur ^ 1, l);
        }
        __syncthreads();
    }

    // Epilogue: row i of the micro-tile is block row tm + (i & 3) + (i >> 2) * 16; its columns
    // are two float4 at tn and tn + 32. Guarded: nothing is written outside C.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gm = m0 + tm + (i & 3) + (i >> 2) * 16;
        store4(C, N, M, N, gm, n0 + tn, vecC,
               make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        store4(C, N, M, N, gm, n0 + tn + 32, vecC,
               make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
    }
}
