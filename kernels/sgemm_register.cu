// SGEMM with 2-D register blocking: C = A @ B, all row-major float32; A is M x K, B is K x N,
// C is M x N.
//
// A block of (BM / 8) x (BM / 8) threads computes a BM x BM tile of C (BM = TILE, a define:
// 64 -> 64 threads, 128 -> 256 threads); each thread keeps an 8 x 8 micro-tile of outputs in
// registers. Per step of BK (a define) along K the block stages a BM x BK tile of A, stored
// transposed (sA[k][m], padded), and a BK x BM tile of B in shared memory with scalar,
// coalesced, bounds-guarded loads (zeros outside the matrices); then for each k a thread reads
// 8 values of A and 8 of B into registers and does 64 multiply-adds, i.e. 4 multiply-adds per
// shared-memory load against 1/2 in the shared kernel.
// Thread (tx, ty) owns rows ty + i * (BM / 8) and columns tx + j * (BM / 8): strided, so that
// consecutive threads read consecutive words of sB (no bank conflicts), the reads of sA are
// broadcasts and the writes of C are coalesced.
// Block (BM / 8, BM / 8), grid (cdiv(N, BM), cdiv(M, BM)).

#ifndef TILE
#define TILE 128
#endif
#ifndef BK
#define BK 8
#endif

#define RB_TM 8                    // outputs per thread along M
#define RB_TN 8                    // outputs per thread along N
#define RB_TY (TILE / RB_TM)       // threads along M
#define RB_TX (TILE / RB_TN)       // threads along N
#define RB_NT (RB_TX * RB_TY)      // threads per block
#define RB_PAD 4                   // sA row padding (spreads the transposed stores over banks)
#define RB_MIN_BLOCKS (RB_NT <= 64 ? 4 : 2)  // blocks per SM: caps registers at 255 or 128

typedef long long i64;

extern "C" __global__ void __launch_bounds__(RB_NT, RB_MIN_BLOCKS)
sgemm_register(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
               int M, int N, int K) {
    __shared__ float sA[BK][TILE + RB_PAD];
    __shared__ float sB[BK][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int t = ty * RB_TX + tx;
    const int m0 = blockIdx.y * TILE;
    const int n0 = blockIdx.x * TILE;

    float acc[RB_TM][RB_TN];
#pragma unroll
    for (int i = 0; i < RB_TM; ++i)
#pragma unroll
        for (int j = 0; j < RB_TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: element e -> (row e / BK, column e % BK); consecutive threads read along K.
#pragma unroll
        for (int l = 0; l < TILE * BK / RB_NT; ++l) {
            const int e = t + l * RB_NT;
            const int r = e / BK, c = e % BK;
            const int gm = m0 + r, gk = k0 + c;
            sA[c][r] = (gm < M && gk < K) ? A[(i64)gm * K + gk] : 0.0f;
        }
        // B tile: element e -> (row e / TILE, column e % TILE); consecutive threads along N.
#pragma unroll
        for (int l = 0; l < TILE * BK / RB_NT; ++l) {
            const int e = t + l * RB_NT;
            const int r = e / TILE, c = e % TILE;
            const int gk = k0 + r, gn = n0 + c;
            sB[r][c] = (gk < K && gn < N) ? B[(i64)gk * N + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[RB_TM], b[RB_TN];
#pragma unroll
            for (int i = 0; i < RB_TM; ++i) a[i] = sA[k][ty + i * RB_TY];
#pragma unroll
            for (int j = 0; j < RB_TN; ++j) b[j] = sB[k][tx + j * RB_TX];
#pragma unroll
            for (int i = 0; i < RB_TM; ++i)
#pragma unroll
                for (int j = 0; j < RB_TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < RB_TM; ++i) {
        const int gm = m0 + ty + i * RB_TY;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < RB_TN; ++j) {
            const int gn = n0 + tx + j * RB_TX;
            if (gn < N) C[(i64)gm * N + gn] = acc[i][j];
        }
    }
}
