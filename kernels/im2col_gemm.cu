// im2col + GEMM convolution (seed 001, task 2).
//
// Stage 1, im2col_hwc: the HWC input image becomes the matrix col of shape (C*R*S, OH*OW),
// row-major, row index (c*R + r)*S + s, column index oy*OW + ox, zero where the tap falls in
// the padding.
// Stage 2, one GEMM kernel: output (K, OH*OW) = weights (K, C*R*S) @ col, i.e. the CHW output.
// OIHW weights are exactly a row-major (K, C*R*S) matrix.
//
// Every GEMM kernel takes (A, B, Cm, M, N, Kd): A is M x Kd (the weights), B is Kd x N (col),
// Cm is M x N (the output), all row-major. M = K output channels, N = OH*OW, Kd = C*R*S.
//
// Memory modes (seed 001 table 3), 2-D blocks of block x block threads:
//   gemm_basic     one thread per output element, operands read from global memory.
//   gemm_shared    TILE x TILE shared-memory tiles of A and B (TILE == block, a -D define).
//   gemm_register  register tiling: each thread keeps a REG_M x REG_N micro-tile of outputs in
//                  registers, fed from shared-memory tiles of (REG_M*TILE) x TILE of A and
//                  TILE x (REG_N*TILE) of B.
// Partition modes (seed 001 table 4):
//   gemm_row       one thread per row of the output matrix, i.e. per output channel: a thread
//                  computes all N = OH*OW outputs of its channel. Only M = K threads do work
//                  (K = 3 by default), which is why the seed measured this mode seconds-slow.
//   gemm_col       one thread per column of the output matrix, i.e. per output pixel: a thread
//                  computes the M = K channel outputs of its pixel.
//   gemm_block     one thread per output element on a 2-D grid of 2-D blocks (the seed's
//                  matrixMulBlock, which is the same code as its matrixMulBasic).
// gemm_row and gemm_col are one-dimensional partitions: they number the threads linearly,
// blockIdx.x * (threads per block) + threadIdx.y * blockDim.x + threadIdx.x, so they work with a
// 1-D block of n threads or a 2-D block of b x b threads alike.
//
// Indices into col and the output are 64-bit: col holds C*R*S*OH*OW elements, more than 2^31
// for a 4096 x 4096 image with a 7 x 7 filter.

#ifndef TILE
#define TILE 16  // the shared and register kernels' tile; their descriptions set TILE = block
#endif
#ifndef REG_M
#define REG_M 2  // gemm_register micro-tile rows (output channels) per thread
#endif
#ifndef REG_N
#define REG_N 4  // gemm_register micro-tile columns (output pixels) per thread
#endif

typedef long long i64;

// ---------------------------------------------------------------------------------------------
// im2col: one thread per column of col (one output pixel), as in the seed's im2col_kernel. The
// thread writes its column's C*R*S entries; consecutive threads write consecutive addresses of
// each row of col, so the writes are coalesced. Reads follow HWC: the C channels of a pixel are
// adjacent.
extern "C" __global__ void __launch_bounds__(256)  // its descriptions launch 256 threads
im2col_hwc(const float* __restrict__ input, float* __restrict__ col,
           int H, int W, int stride, int pad, int OH, int OW) {
    const int N = OH * OW;
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const int oy = n / OW;
    const int ox = n - oy * OW;
    const int iy0 = oy * stride - pad;
    const int ix0 = ox * stride - pad;
#pragma unroll
    for (int r = 0; r < CONV_R; ++r) {
        const int iy = iy0 + r;
        const bool row_in = iy >= 0 && iy < H;
#pragma unroll
        for (int s = 0; s < CONV_S; ++s) {
            const int ix = ix0 + s;
            const bool in = row_in && ix >= 0 && ix < W;
            const float* pixel = input + ((i64)iy * W + ix) * CONV_C;  // dereferenced only if in
#pragma unroll
            for (int c = 0; c < CONV_C; ++c) {
                const i64 row = (c * CONV_R + r) * CONV_S + s;
                col[row * N + n] = in ? pixel[c] : 0.0f;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One output element Cm[row, colx] from global memory (basic and block modes).
__device__ __forceinline__ void gemm_element_global(const float* __restrict__ A,
                                                    const float* __restrict__ B,
                                                    float* __restrict__ Cm,
                                                    int M, int N, int Kd, int row, int colx) {
    if (row < M && colx < N) {
        const float* a = A + (i64)row * Kd;
        const float* b = B + colx;
        float sum = 0.0f;
        for (int i = 0; i < Kd; ++i) sum += a[i] * b[(i64)i * N];
        Cm[(i64)row * N + colx] = sum;
    }
}

// Memory mode "basic" (seed matrixMulBasic): block (block, block), grid (cdiv(N, block),
// cdiv(M, block)); x runs along the output columns so that reads of B and writes are coalesced.
extern "C" __global__ void __launch_bounds__(1024)
gemm_basic(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm,
           int M, int N, int Kd) {
    const int colx = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    gemm_element_global(A, B, Cm, M, N, Kd, row, colx);
}

// Memory mode "shared" (seed matrixMulShared<TS>): block (TILE, TILE), grid (cdiv(N, TILE),
// cdiv(M, TILE)). Each step stages a TILE x TILE tile of A and of B in shared memory; threads
// outside the matrix load zeros and still reach every __syncthreads.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_shared(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm,
            int M, int N, int Kd) {
    __shared__ float sA[TILE][TILE];
    __shared__ float sB[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int colx = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int k0 = 0; k0 < Kd; k0 += TILE) {
        const int ka = k0 + tx;  // A column this thread loads
        const int kb = k0 + ty;  // B row this thread loads
        sA[ty][tx] = (row < M && ka < Kd) ? A[(i64)row * Kd + ka] : 0.0f;
        sB[ty][tx] = (kb < Kd && colx < N) ? B[(i64)kb * N + colx] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; ++i) sum += sA[ty][i] * sB[i][tx];
        __syncthreads();
    }
    if (row < M && colx < N) Cm[(i64)row * N + colx] = sum;
}

// Memory mode "register": block (TILE, TILE), grid (cdiv(N, REG_N*TILE), cdiv(M, REG_M*TILE)).
// A block computes a (REG_M*TILE) x (REG_N*TILE) tile of the output; thread (tx, ty) owns the
// REG_M x REG_N micro-tile of rows ty + i*TILE and columns tx + j*TILE (strided, so that the
// loads, the shared-memory reads and the stores of a warp stay on consecutive addresses).
// Per k step a thread loads REG_M values of A and REG_N values of B into registers and does
// REG_M*REG_N multiply-adds, against one load per multiply-add in gemm_shared.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_register(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm,
              int M, int N, int Kd) {
    __shared__ float sA[REG_M * TILE][TILE];
    __shared__ float sB[TILE][REG_N * TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * (REG_M * TILE);
    const int col0 = blockIdx.x * (REG_N * TILE);

    float acc[REG_M][REG_N];
#pragma unroll
    for (int i = 0; i < REG_M; ++i)
#pragma unroll
        for (int j = 0; j < REG_N; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < Kd; k0 += TILE) {
#pragma unroll
        for (int i = 0; i < REG_M; ++i) {
            const int row = row0 + ty + i * TILE;
            const int ka = k0 + tx;
            sA[ty + i * TILE][tx] = (row < M && ka < Kd) ? A[(i64)row * Kd + ka] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < REG_N; ++j) {
            const int kb = k0 + ty;
            const int colx = col0 + tx + j * TILE;
            sB[ty][tx + j * TILE] = (kb < Kd && colx < N) ? B[(i64)kb * N + colx] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            float a[REG_M], b[REG_N];
#pragma unroll
            for (int i = 0; i < REG_M; ++i) a[i] = sA[ty + i * TILE][k];
#pragma unroll
            for (int j = 0; j < REG_N; ++j) b[j] = sB[k][tx + j * TILE];
#pragma unroll
            for (int i = 0; i < REG_M; ++i)
#pragma unroll
                for (int j = 0; j < REG_N; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < REG_M; ++i) {
        const int row = row0 + ty + i * TILE;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < REG_N; ++j) {
            const int colx = col0 + tx + j * TILE;
            if (colx < N) Cm[(i64)row * N + colx] = acc[i][j];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Partition modes. Linear thread number across the grid, for 1-D or 2-D blocks.
__device__ __forceinline__ i64 linear_thread() {
    const int per_block = blockDim.x * blockDim.y;
    return (i64)blockIdx.x * per_block + threadIdx.y * blockDim.x + threadIdx.x;
}

// Row partition (seed matrixMulRow): thread `row` < M computes the whole output row, i.e. all
// N = OH*OW pixels of output channel `row`. Grid: cdiv(M, threads per block) blocks.
extern "C" __global__ void __launch_bounds__(1024)
gemm_row(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm,
         int M, int N, int Kd) {
    const i64 row = linear_thread();
    if (row >= M) return;
    const float* a = A + row * Kd;
    float* out = Cm + row * N;
    for (int colx = 0; colx < N; ++colx) {
        float sum = 0.0f;
        for (int i = 0; i < Kd; ++i) sum += a[i] * B[(i64)i * N + colx];
        out[colx] = sum;
    }
}

// Column partition (seed matrixMulCol): thread `colx` < N computes the whole output column, i.e.
// the M channel outputs of output pixel `colx`. Grid: cdiv(N, threads per block) blocks.
extern "C" __global__ void __launch_bounds__(1024)
gemm_col(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm,
         int M, int N, int Kd) {
    const i64 colx = linear_thread();
    if (colx >= N) return;
    for (int row = 0; row < M; ++row) {
        const float* a = A + (i64)row * Kd;
        float sum = 0.0f;
        for (int i = 0; i < Kd; ++i) sum += a[i] * B[(i64)i * N + colx];
        Cm[(i64)row * N + colx] = sum;
    }
}

// Block partition (seed matrixMulBlock): one thread per output element, block (block, block),
// grid (cdiv(N, block), cdiv(M, block)). A 64 x 64 block (4096 threads) is refused at launch.
extern "C" __global__ void __launch_bounds__(1024)
gemm_block(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm,
           int M, int N, int Kd) {
    const int colx = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    gemm_element_global(A, B, Cm, M, N, Kd, row, colx);
}
