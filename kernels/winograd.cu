// Winograd F(2x2, 3x3) convolution (seed 004): one thread per 2x2 output tile.
// Input CHW, weights OIHW, output CHW; stride 1 and 3x3 filters only (winograd.yaml's
// `supports:` turns the other cells into `unsupported` rows).
//
// Each block first transforms all K*C 3x3 filters, U = G g G^T (4x4 each), into shared
// memory. Each thread then loads the 4x4 input tile of every input channel (zero outside
// the image: that is the zero padding, and it also covers the ragged last tile row/column),
// transforms it, V = B^T d B, and keeps the C transformed tiles in registers. For each output
// channel k it forms M = sum_c U[k][c] (.) V[c] (elementwise) and writes Y = A^T M A, the
// 2x2 outputs, skipping those beyond OH/OW (odd output sizes).
//
// The transforms are the seed's matrices, written out by hand:
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// With these, A^T[(G g G^T) (.) (B^T d B)]A is the cross-correlation y[i][j] =
// sum_{r,s} d[i+r][j+s] g[r][s], which is what a CNN calls convolution.

#if CONV_R != 3 || CONV_S != 3
#error "winograd.cu implements F(2x2, 3x3) only: CONV_R and CONV_S must be 3"
#endif

// Transformed filters live in static shared memory: K*C*16 floats (12 KiB for K=64, C=3).
static_assert(CONV_K * CONV_C * 16 * sizeof(float) <= 48 * 1024,
              "winograd.cu: K*C*16 transformed filter taps exceed 48 KiB of static shared memory");

extern "C" __global__ void winograd_f2x3_chw(const float* __restrict__ input,
                                             const float* __restrict__ weights,
                                             float* __restrict__ output,
                                             int H, int W, int pad, int OH, int OW) {
    __shared__ float U[CONV_K * CONV_C * 16];

    // 1. Filter transform, shared by the whole block: U[(k*C + c)*16 + 4*i + j].
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int nthreads = blockDim.x * blockDim.y;
    for (int f = tid; f < CONV_K * CONV_C; f += nthreads) {
        const float* g = weights + f * 9;  // OIHW: filter (k, c) is contiguous, f = k*C + c
        float t[4][3];                     // t = G g  (4x3)
#pragma unroll
        for (int s = 0; s < 3; ++s) {
            const float g0 = g[0 * 3 + s], g1 = g[1 * 3 + s], g2 = g[2 * 3 + s];
            t[0][s] = g0;
            t[1][s] = 0.5f * (g0 + g1 + g2);
            t[2][s] = 0.5f * (g0 - g1 + g2);
            t[3][s] = g2;
        }
        float* u = U + f * 16;             // u = t G^T  (4x4)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float t0 = t[i][0], t1 = t[i][1], t2 = t[i][2];
            u[4 * i + 0] = t0;
            u[4 * i + 1] = 0.5f * (t0 + t1 + t2);
            u[4 * i + 2] = 0.5f * (t0 - t1 + t2);
            u[4 * i + 3] = t2;
        }
    }
    __syncthreads();

    const int tx = blockIdx.x * blockDim.x + threadIdx.x;  // tile column
    const int ty = blockIdx.y * blockDim.y + threadIdx.y;  // tile row
    const int ox0 = 2 * tx, oy0 = 2 * ty;                  // its top-left output
    if (ox0 >= OW || oy0 >= OH) return;                    // after the barrier

    // 2. Input transform of every channel's 4x4 tile; rows iy0..iy0+3, columns ix0..ix0+3.
    const int iy0 = oy0 - pad, ix0 = ox0 - pad;
    float V[CONV_C][16];
#pragma unroll
    for (int c = 0; c < CONV_C; ++c) {
        const float* plane = input + (size_t)c * H * W;
        float d[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int iy = iy0 + i;
            const bool row_ok = iy >= 0 && iy < H;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int ix = ix0 + j;
                d[i][j] = (row_ok && ix >= 0 && ix < W) ? plane[(size_t)iy * W + ix] : 0.0f;
            }
        }
        float t[4][4];  // t = B^T d (combine rows)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            t[0][j] = d[0][j] - d[2][j];
            t[1][j] = d[1][j] + d[2][j];
            t[2][j] = d[2][j] - d[1][j];
            t[3][j] = d[1][j] - d[3][j];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // V = t B (combine columns)
            V[c][4 * i + 0] = t[i][0] - t[i][2];
            V[c][4 * i + 1] = t[i][1] + t[i][2];
            V[c][4 * i + 2] = t[i][2] - t[i][1];
            V[c][4 * i + 3] = t[i][1] - t[i][3];
        }
    }

    const bool x1_ok = ox0 + 1 < OW, y1_ok = oy0 + 1 < OH;
    // 3. Per output channel: elementwise products summed over C, then the output transform.
#pragma unroll 1
    for (int k = 0; k < CONV_K; ++k) {
        float m[16];
#pragma unroll
        for (int e = 0; e < 16; ++e) m[e] = 0.0f;
#pragma unroll
        for (int c = 0; c < CONV_C; ++c) {
            const float* u = U + (k * CONV_C + c) * 16;  // same address across the warp: broadcast
#pragma unroll
            for (int e = 0; e < 16; ++e) m[e] += u[e] * V[c][e];
        }
        float a[2][4];  // a = A^T m (combine rows)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            a[0][j] = m[0 * 4 + j] + m[1 * 4 + j] + m[2 * 4 + j];
            a[1][j] = m[1 * 4 + j] - m[2 * 4 + j] - m[3 * 4 + j];
        }
        float* out = output + (size_t)k * OH * OW + (size_t)oy0 * OW + ox0;
        // y = a A (combine columns); write only the outputs inside OH x OW.
        out[0] = a[0][0] + a[0][1] + a[0][2];
        if (x1_ok) out[1] = a[0][1] - a[0][2] - a[0][3];
        if (y1_ok) {
            out[OW] = a[1][0] + a[1][1] + a[1][2];
            if (x1_ok) out[OW + 1] = a[1][1] - a[1][2] - a[1][3];
        }
    }
}
