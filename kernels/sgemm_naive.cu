// SGEMM, naive (seed 003, task 1): C = A @ B, all row-major float32.
// A is M x K, B is K x N, C is M x N.
//
// One thread per output element, numbered linearly over the M*N outputs (the seed's
// GEMM_cuda kernel with a 1-D thread block of `threads` threads): thread i computes
// C[i / N][i % N]. Consecutive threads of a warp take consecutive columns of one row, so the
// reads of B and the writes of C are coalesced and the reads of A are broadcasts. Operands
// come straight from global memory (through L1/L2); there is no explicit reuse.
// Grid: cdiv(M * N, threads) blocks, 1-D. Indices are 64-bit (M * N may exceed 2^31).

typedef long long i64;

extern "C" __global__ void __launch_bounds__(1024)
sgemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
            int M, int N, int K) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (i64)M * N) return;
    const int row = (int)(i / N);
    const int col = (int)(i - (i64)row * N);
    const float* a = A + (i64)row * K;
    const float* b = B + col;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum = fmaf(a[k], b[(i64)k * N], sum);
    C[i] = sum;
}
