// SGEMM with shared-memory tiles: C = A @ B, all row-major float32; A is M x K, B is K x N,
// C is M x N.
//
// Block (TILE, TILE), grid (cdiv(N, TILE), cdiv(M, TILE)); TILE is a -D define (the
// description sets TILE = block). Each step stages a TILE x TILE tile of A and one of B in
// shared memory (one element per thread, coalesced along x) and every thread does TILE
// multiply-adds from them: operands are read from global memory once per TILE uses instead of
// once per use. Threads outside the matrices load zeros and still reach every __syncthreads,
// so any M, N, K >= 1 works. sA is padded by one column; its reads are broadcasts anyway.

#ifndef TILE
#define TILE 16
#endif

typedef long long i64;

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm_shared(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
             int M, int N, int K) {
    __shared__ float sA[TILE][TILE + 1];
    __shared__ float sB[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;  // the column of A this thread stages
        const int kb = k0 + ty;  // the row of B this thread stages
        sA[ty][tx] = (row < M && ka < K) ? A[(i64)row * K + ka] : 0.0f;
        sB[ty][tx] = (kb < K && col < N) ? B[(i64)kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) sum = fmaf(sA[ty][k], sB[k][tx], sum);
        __syncthreads();
    }
    if (row < M && col < N) C[(i64)row * N + col] = sum;
}
