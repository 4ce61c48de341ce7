// SGEMM with a multi-stage cp.async pipeline: C = A @ B, all row-major float32; A is M x K,
// B is K x N, C is M x N.
//
// Why: sgemm_vectorized (128 x 128 tiles, 8 x 8 per thread, 2 blocks per SM) issues one 16-byte
// shared load per 16 FMAs, and with 16 warps per SM its shared-memory reads alone come close to
// the FMA issue time, so it stalls near 83 % of cuBLAS. Here every thread owns 128 outputs
// (16 x 8, or 8 x 16): 6 LDS.128 per 128 FMAs, a quarter less shared traffic per FMA. That needs
// ~200 registers, so 1 block (8 warps) per SM; the latency that 8 warps cannot hide is covered
// by a deeper pipeline instead (the layout cuBLAS's fastest fp32 kernel on Hopper also uses).
//
// Block tile BM x BN = 256 x 128 (BM a define: 128 gives 128 x 256), BK (8 or 16) deep along K,
// 256 threads. The 8 warps form a (BM/64) x (BN/64) grid of 64 x 64 warp tiles; the 32 lanes of
// a warp form an LM x LN grid (4 x 8 for 256 x 128, 8 x 4 for 128 x 256, the thread tile's
// long side along the block's long side), and lane (lm, ln) owns rows lm*4 + i*LM*4 + {0..3}
// and columns ln*4 + j*LN*4 + {0..3} of its warp tile. Per k a thread reads its A and B values
// as float4 from k-major rows of shared memory: the lanes of a quarter warp read either one
// broadcast 16-byte group or consecutive ones, so no bank conflicts.
//
// Shared memory (dynamic, STAGES stages of BK*(BM+4) + BK*BN floats; 37 KiB for 3 stages of
// BK = 8, 73 KiB for BK = 16):
// - B goes to sB[k][BN] as it is, with 16-byte cp.async.cg (no registers, not through L1).
// - A must be stored transposed (k-major) for the float4 reads along M, which a 16-byte copy
//   cannot do; each thread loads float4s of A (4 consecutive k of one row) into registers and
//   writes them as 4 scalars to sA[k][m]. Rows are BM + 4 floats long, so the two k-groups a
//   warp writes at once land on different halves of the banks (conflict-free for BK = 8).
// Pipeline: at K step kt the block computes from stage kt % STAGES while the copies of step
// kt + STAGES - 1 are in flight (B by cp.async, A as loads into registers, written to shared
// memory at the end of the step, a whole step after they were issued). One __syncthreads per
// K step, just before the last k of the step: after it the next step's first fragments are
// loaded, so the FMAs of that last k overlap their latency. The fragments (A and B values of
// one k) are double-buffered in registers, loaded one k ahead of the FMAs that use them.
//
// Sizes: the float4 / cp.async path needs K % 4 == 0 and N % 4 == 0 and 16-byte aligned A and
// B. Rows of A past M and columns of B past N only feed outputs that are never written, so
// they are clamped to the last valid row / column group (no predicates in the hot loop); a K
// step past K is zero-filled (A by a zero float4, B by cp.async with source size 0). Any other
// shape takes a scalar fallback (same tiles and warp tiling, one stage, every element loaded
// with a bounds check; a block-uniform branch). Stores of C are float4 when its rows allow,
// guarded against M and N.
//
// Measured on an H100 (SXM, 1980 MHz), square sizes, cuBLAS SGEMM via cupy.matmul (no TF32),
// every variant verified against float64: 256 x 128, BK = 16, 3 stages: 2.89 ms at 4096 (92 % of
// cuBLAS's 2.66 ms; sgemm_vectorized 3.23 ms) and 22.97 ms at 8192 (93 % of 21.30 ms; 25.51);
// BK = 8: 2.91 / 23.18 ms. 4 stages were no faster, 2 stages 0.5 % slower. 128 x 256 tiles
// (8 x 16 per thread, 241-247 registers against 224-232) were 5-11 % slower: 3.04-3.22 / 24.1-25.6.
//
// Block order: blocks are renumbered in groups of GROUP_M block rows, column by column, so the
// blocks running together share A and B panels in L2.
// Block 256 threads, grid (cdiv(N, BN), cdiv(M, BM)), dynamic shared memory as above.

#ifndef BM
#define BM 256
#endif
#ifndef BK
#define BK 8
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

typedef long long i64;
typedef unsigned long long u64;

constexpr int SP_NT = 256;                       // threads per block
constexpr int SP_BM = BM;
constexpr int SP_BN = 32768 / BM;                // 256 x 128 or 128 x 256: 128 outputs per thread
constexpr int SP_WN = SP_BN / 64;                // warps along N
constexpr int SP_LM = SP_BM >= SP_BN ? 4 : 8;    // lanes along M in a warp
constexpr int SP_LN = 32 / SP_LM;                // lanes along N
constexpr int SP_TM = 64 / SP_LM;                // thread tile rows (16 or 8)
constexpr int SP_TN = 64 / SP_LN;                // thread tile columns (8 or 16)
constexpr int SP_FM = SP_TM / 4;                 // float4 fragments of A per k
constexpr int SP_FN = SP_TN / 4;                 // float4 fragments of B per k
constexpr int SP_LDA = SP_BM + 4;                // sA row length (see the header)
constexpr int SP_ASZ = BK * SP_LDA;              // floats of sA per stage
constexpr int SP_STAGE = SP_ASZ + BK * SP_BN;    // floats per stage
constexpr int SP_LA = SP_BM * BK / 4 / SP_NT;    // float4 of A per thread and K step
constexpr int SP_LB = SP_BN * BK / 4 / SP_NT;    // 16-byte copies of B per thread and K step
constexpr int SP_A_TPR = BK / 4;                 // threads per tile row of A
constexpr int SP_A_ROWS = SP_NT / SP_A_TPR;      // tile rows between a thread's float4s of A
constexpr int SP_B_TPR = SP_BN / 4;              // threads per tile row of B
constexpr int SP_B_ROWS = SP_NT / SP_B_TPR;      // tile rows between a thread's copies of B
static_assert(BM == 128 || BM == 256, "BM is 128 or 256");
static_assert(BK == 8 || BK == 16, "BK is 8 or 16");
static_assert(STAGES >= 2, "at least two stages");
static_assert(SP_LA >= 1 && SP_LB >= 1, "every thread loads some of each tile");

// The A and B values one thread uses at one k.
struct SpFrag {
    float4 a[SP_FM];
    float4 b[SP_FN];
};

__device__ __forceinline__ unsigned sp_shared_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }" : "=r"(r) : "l"(p));
    return r;
}

// 16 bytes global -> shared, bypassing L1; with full == false nothing is read and the 16 bytes
// are zero-filled (the K tail).
__device__ __forceinline__ void sp_cp_async16(unsigned dst, const void* src, bool full) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(full ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void sp_cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void sp_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Fragments of one k: sa points at sA[k][tm], sb at sB[k][tn] (the thread's first columns).
__device__ __forceinline__ void sp_load_frag(SpFrag& f, const float* sa, const float* sb) {
#pragma unroll
    for (int i = 0; i < SP_FM; ++i) f.a[i] = *reinterpret_cast<const float4*>(sa + i * SP_LM * 4);
#pragma unroll
    for (int j = 0; j < SP_FN; ++j) f.b[j] = *reinterpret_cast<const float4*>(sb + j * SP_LN * 4);
}

// The N float4 of a fragment as 4N scalars, in order.
template <int N>
__device__ __forceinline__ void sp_unpack(const float4 (&v)[N], float (&out)[4 * N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
        out[4 * i] = v[i].x;
        out[4 * i + 1] = v[i].y;
        out[4 * i + 2] = v[i].z;
        out[4 * i + 3] = v[i].w;
    }
}

__device__ __forceinline__ void sp_fma(float (&acc)[SP_TM][SP_TN], const SpFrag& f) {
    float a[SP_TM], b[SP_TN];
    sp_unpack<SP_FM>(f.a, a);
    sp_unpack<SP_FN>(f.b, b);
#pragma unroll
    for (int i = 0; i < SP_TM; ++i)
#pragma unroll
        for (int j = 0; j < SP_TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

// The fallback for operands that allow no 16-byte loads (K % 4 != 0 or N % 4 != 0, or a
// misaligned pointer): same tiles and warp tiling, one stage, every element loaded alone with
// a bounds check. Speed is not its point.
__device__ __forceinline__ void sp_scalar_tiles(const float* __restrict__ A,
                                                const float* __restrict__ B, int M, int N, int K,
                                                int m0, int n0, int tm, int tn, float* smem,
                                                float (&acc)[SP_TM][SP_TN]) {
    float* sA = smem;
    float* sB = smem + SP_ASZ;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < SP_BM * BK; e += SP_NT) {  // e -> row e / BK, k e % BK
            const int r = e / BK, c = e % BK;
            sA[c * SP_LDA + r] = (m0 + r < M && k0 + c < K) ? A[(i64)(m0 + r) * K + k0 + c] : 0.0f;
        }
        for (int e = threadIdx.x; e < BK * SP_BN; e += SP_NT) {  // e -> k e / BN, column e % BN
            const int r = e / SP_BN, c = e % SP_BN;
            sB[r * SP_BN + c] = (k0 + r < K && n0 + c < N) ? B[(i64)(k0 + r) * N + n0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            SpFrag f;
            sp_load_frag(f, sA + k * SP_LDA + tm, sB + k * SP_BN + tn);
            sp_fma(acc, f);
        }
        __syncthreads();
    }
}

__device__ __forceinline__ void sp_store4(float* __restrict__ C, int M, int N, int r, int c,
                                          bool vec, float4 v) {
    if (r >= M) return;
    float* q = C + (i64)r * N + c;
    if (vec) {  // N % 4 == 0: the group is wholly inside or outside
        if (c < N) *reinterpret_cast<float4*>(q) = v;
    } else {
        if (c < N) q[0] = v.x;
        if (c + 1 < N) q[1] = v.y;
        if (c + 2 < N) q[2] = v.z;
        if (c + 3 < N) q[3] = v.w;
    }
}

extern "C" __global__ void __launch_bounds__(SP_NT, 1)
sgemm_pipelined(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K) {
    extern __shared__ float4 sp_smem4[];  // float4: 16-byte aligned for cp.async and LDS.128
    float* smem = reinterpret_cast<float*>(sp_smem4);

    // Grouped block order: GROUP_M block rows are walked column by column.
    const int grid_n = gridDim.x, grid_m = gridDim.y;
    const int pid = blockIdx.y * grid_n + blockIdx.x;
    const int per_group = GROUP_M * grid_n;
    const int group = pid / per_group;
    const int first_m = group * GROUP_M;
    const int group_rows = min(grid_m - first_m, GROUP_M);
    const int in_group = pid - group * per_group;
    const int m0 = (first_m + in_group % group_rows) * SP_BM;
    const int n0 = (in_group / group_rows) * SP_BN;

    // Compute positions (warp tiling, see the header).
    const int t = threadIdx.x;
    const int warp = t >> 5, lane = t & 31;
    const int tm = (warp / SP_WN) * 64 + (lane / SP_LN) * 4;
    const int tn = (warp % SP_WN) * 64 + (lane % SP_LN) * 4;

    float acc[SP_TM][SP_TN];
#pragma unroll
    for (int i = 0; i < SP_TM; ++i)
#pragma unroll
        for (int j = 0; j < SP_TN; ++j) acc[i][j] = 0.0f;

    const bool vecA = ((K & 3) == 0) && ((reinterpret_cast<u64>(A) & 15) == 0);
    const bool vecB = ((N & 3) == 0) && ((reinterpret_cast<u64>(B) & 15) == 0);
    const bool vecC = ((N & 3) == 0) && ((reinterpret_cast<u64>(C) & 15) == 0);

    if (!(vecA && vecB)) {  // block-uniform
        sp_scalar_tiles(A, B, M, N, K, m0, n0, tm, tn, smem, acc);
    } else {
        // A: float4 l of a thread is tile row a_r + l * SP_A_ROWS, k a_c .. a_c + 3.
        const int a_r = t / SP_A_TPR, a_c = (t % SP_A_TPR) * 4;
        const float* a_src[SP_LA];
#pragma unroll
        for (int l = 0; l < SP_LA; ++l)
            a_src[l] = A + (i64)min(m0 + a_r + l * SP_A_ROWS, M - 1) * K + a_c;
        float* const a_dst = smem + a_c * SP_LDA + a_r;  // stage 0, transposed
        // B: copy l of a thread is tile row b_r + l * SP_B_ROWS, columns b_c .. b_c + 3.
        const int b_r = t / SP_B_TPR, b_c = (t % SP_B_TPR) * 4;
        const float* const b_src = B + (i64)b_r * N + min(n0 + b_c, N - 4);
        const unsigned b_dst = sp_shared_addr(smem + SP_ASZ + b_r * SP_BN + b_c);  // stage 0

        float4 ra[SP_LA];
        // Step k0's A float4s -> registers (zeros past K; K % 4 == 0, so a float4 is all in or out).
        auto fetch_a = [&](int k0) {
#pragma unroll
            for (int l = 0; l < SP_LA; ++l) {
                ra[l] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (k0 + a_c < K) ra[l] = __ldg(reinterpret_cast<const float4*>(a_src[l] + k0));
            }
        };
        // Registers -> stage s of sA, transposed.
        auto stash_a = [&](int s) {
            float* d = a_dst + s * SP_STAGE;
#pragma unroll
            for (int l = 0; l < SP_LA; ++l) {
                d[l * SP_A_ROWS + 0 * SP_LDA] = ra[l].x;
                d[l * SP_A_ROWS + 1 * SP_LDA] = ra[l].y;
                d[l * SP_A_ROWS + 2 * SP_LDA] = ra[l].z;
                d[l * SP_A_ROWS + 3 * SP_LDA] = ra[l].w;
            }
        };
        // Step k0's B tile -> stage s of sB (rows past K zero-filled; B itself is named as their
        // source, a valid address, though nothing is read).
        auto copy_b = [&](int k0, int s) {
#pragma unroll
            for (int l = 0; l < SP_LB; ++l) {
                const bool in = k0 + b_r + l * SP_B_ROWS < K;
                const float* src = in ? b_src + (i64)(k0 + l * SP_B_ROWS) * N : B;
                sp_cp_async16(b_dst + (s * SP_STAGE + l * SP_B_ROWS * SP_BN) * 4, src, in);
            }
        };

        const int ktiles = (K + BK - 1) / BK;

        // Prologue: steps 0 .. STAGES-2 into stages 0 .. STAGES-2, one commit group each (empty
        // ones too, so that the group count below is the same for every K).
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < ktiles) {
                fetch_a(s * BK);
                stash_a(s);
                copy_b(s * BK, s);
            }
            sp_cp_async_commit();
        }
        sp_cp_async_wait<STAGES - 2>();  // step 0's copies have landed
        __syncthreads();

        SpFrag fr[2];
        sp_load_frag(fr[0], smem + tm, smem + SP_ASZ + tn);
        int rs = 0, ws = STAGES - 1;  // the stage read in this step, the one written
        for (int kt = 0; kt < ktiles; ++kt) {
            // ws was last read in step kt - 1, before that step's barrier: free to overwrite.
            const bool more = kt + STAGES - 1 < ktiles;
            if (more) {
                fetch_a((kt + STAGES - 1) * BK);
                copy_b((kt + STAGES - 1) * BK, ws);
            }
            sp_cp_async_commit();
            const float* sa = smem + rs * SP_STAGE + tm;
            const float* sb = smem + rs * SP_STAGE + SP_ASZ + tn;
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                if (k == BK - 1) {
                    // End of the step's reads but one k: publish A of step kt + STAGES - 1,
                    // wait for step kt + 1's copies, and start on its first fragments.
                    if (more) stash_a(ws);
                    sp_cp_async_wait<STAGES - 2>();
                    __syncthreads();
                    rs = rs + 1 == STAGES ? 0 : rs + 1;
                    ws = ws + 1 == STAGES ? 0 : ws + 1;
                    // (after the last step this reads a stale stage; the values go unused)
                    sp_load_frag(fr[(k + 1) & 1], smem + rs * SP_STAGE + tm,
                                 smem + rs * SP_STAGE + SP_ASZ + tn);
                } else {
                    sp_load_frag(fr[(k + 1) & 1], sa + (k + 1) * SP_LDA, sb + (k + 1) * SP_BN);
                }
                sp_fma(acc, fr[k & 1]);
            }
        }
        sp_cp_async_wait<0>();  // no copy may still target shared memory at exit
    }

    // Epilogue: accumulator row i*4 + ii is block row tm + i*LM*4 + ii, its columns the float4
    // groups tn + j*LN*4. Guarded: nothing is written outside C.
#pragma unroll
    for (int i = 0; i < SP_FM; ++i)
#pragma unroll
        for (int ii = 0; ii < 4; ++ii) {
            const int r = m0 + tm + i * SP_LM * 4 + ii;
#pragma unroll
            for (int j = 0; j < SP_FN; ++j)
                sp_store4(C, M, N, r, n0 + tn + j * SP_LN * 4, vecC,
                          make_float4(acc[i * 4 + ii][j * 4], acc[i * 4 + ii][j * 4 + 1],
                                      acc[i * 4 + ii][j * 4 + 2], acc[i * 4 + ii][j * 4 + 3]));
        }
}
