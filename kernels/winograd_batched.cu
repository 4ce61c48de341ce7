// Winograd F(2x2, 3x3) for batched multi-channel layers (seed 004), as four stages:
//
//   (a) wino_filter_transform  U[16][K][C]  = G g G^T           one thread per (k, c)
//   (b) wino_input_transform   V[16][C][P]  = B^T d B           one thread per (c, tile)
//   (c) cuBLAS (op: matmul)    M[16][K][P]  = U[e] @ V[e]       16 GEMMs (K x C) @ (C x P)
//   (d) wino_output_transform  Y = A^T M A  -> NCHW output      one thread per (k, tile)
//
// Input NCHW, weights OIHW (KCRS), output NCHW; stride 1, 3x3 filters, any pad, any N/C/K/H/W.
// Tiles: TH = cdiv(OH, 2) rows by TW = cdiv(OW, 2) columns of 2x2 output tiles per image,
// P = N * TH * TW tiles in all, tile p = (n*TH + ty)*TW + tx. Tile (ty, tx) of image n reads the
// 4x4 input patch with top-left (2*ty - pad, 2*tx - pad); taps outside the image are zero (this
// is the zero padding and also covers the ragged last tile row/column), and outputs beyond
// OH/OW (odd output sizes) are not written. Index e = 4*i + j names the transformed position.
//
// The transforms are the seed's matrices, written out by hand (as in winograd.cu):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// giving the cross-correlation y[i][j] = sum_{r,s} d[i+r][j+s] g[r][s].
//
// C and K are runtime arguments (no per-thread arrays sized by CONV_C/CONV_K). In every stage
// the thread index runs fastest along the innermost dimension of the scratch matrix it writes
// or reads (C in U, P in V and M), so the 16 scratch accesses per thread are coalesced.
// Indices are 64-bit: 16*C*P reaches ~10^8 at VGG sizes and grows with N.

#if CONV_R != 3 || CONV_S != 3
#error "winograd_batched.cu implements F(2x2, 3x3) only: CONV_R and CONV_S must be 3"
#endif

typedef long long i64;

// (a) U[e][k][c], e = 4*i + j: U[e] is the row-major K x C matrix the GEMM takes as its A.
extern "C" __global__ void wino_filter_transform(const float* __restrict__ weights,
                                                 float* __restrict__ U, int K, int C) {
    const i64 f = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // f = k*C + c
    const i64 KC = (i64)K * C;
    if (f >= KC) return;
    const float* g = weights + f * 9;  // OIHW: filter (k, c) is 9 contiguous floats
    float t[4][3];                     // t = G g (4x3)
#pragma unroll
    for (int s = 0; s < 3; ++s) {
        const float g0 = g[0 * 3 + s], g1 = g[1 * 3 + s], g2 = g[2 * 3 + s];
        t[0][s] = g0;
        t[1][s] = 0.5f * (g0 + g1 + g2);
        t[2][s] = 0.5f * (g0 - g1 + g2);
        t[3][s] = g2;
    }
    float* u = U + f;  // u[e * KC]
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // u = t G^T (4x4)
        const float t0 = t[i][0], t1 = t[i][1], t2 = t[i][2];
        u[(4 * i + 0) * KC] = t0;
        u[(4 * i + 1) * KC] = 0.5f * (t0 + t1 + t2);
        u[(4 * i + 2) * KC] = 0.5f * (t0 - t1 + t2);
        u[(4 * i + 3) * KC] = t2;
    }
}

// (b) V[e][c][p]: V[e] is the row-major C x P matrix the GEMM takes as its B.
extern "C" __global__ void wino_input_transform(const float* __restrict__ input,
                                                float* __restrict__ V,
                                                int C, int H, int W, int pad,
                                                int TH, int TW, int P) {
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // idx = c*P + p
    const i64 CP = (i64)C * P;
    if (idx >= CP) return;
    const int c = (int)(idx / P);
    const int p = (int)(idx - (i64)c * P);
    const int tx = p % TW;
    const int nt = p / TW;
    const int ty = nt % TH;
    const int n = nt / TH;

    const int iy0 = 2 * ty - pad, ix0 = 2 * tx - pad;
    const float* plane = input + ((i64)n * C + c) * H * W;
    float d[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int iy = iy0 + i;
        const bool row_ok = iy >= 0 && iy < H;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int ix = ix0 + j;
            d[i][j] = (row_ok && ix >= 0 && ix < W) ? plane[(i64)iy * W + ix] : 0.0f;
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
    float* v = V + idx;  // v[e * CP]
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // V = t B (combine columns)
        v[(4 * i + 0) * CP] = t[i][0] - t[i][2];
        v[(4 * i + 1) * CP] = t[i][1] + t[i][2];
        v[(4 * i + 2) * CP] = t[i][2] - t[i][1];
        v[(4 * i + 3) * CP] = t[i][1] - t[i][3];
    }
}

// (d) Y = A^T M A for tile p of output channel k, M[e][k][p] from the 16 GEMMs.
extern "C" __global__ void wino_output_transform(const float* __restrict__ M,
                                                 float* __restrict__ output,
                                                 int K, int OH, int OW,
                                                 int TH, int TW, int P) {
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // idx = k*P + p
    const i64 KP = (i64)K * P;
    if (idx >= KP) return;
    const int k = (int)(idx / P);
    const int p = (int)(idx - (i64)k * P);
    const int tx = p % TW;
    const int nt = p / TW;
    const int ty = nt % TH;
    const int n = nt / TH;

    float m[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) m[e] = M[e * KP + idx];
    float a[2][4];  // a = A^T m (combine rows)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        a[0][j] = m[0 * 4 + j] + m[1 * 4 + j] + m[2 * 4 + j];
        a[1][j] = m[1 * 4 + j] - m[2 * 4 + j] - m[3 * 4 + j];
    }
    const int oy0 = 2 * ty, ox0 = 2 * tx;  // always inside OH x OW (TH, TW are cdivs)
    const bool x1_ok = ox0 + 1 < OW, y1_ok = oy0 + 1 < OH;
    float* out = output + (((i64)n * K + k) * OH + oy0) * OW + ox0;
    // y = a A (combine columns); write only the outputs inside OH x OW.
    out[0] = a[0][0] + a[0][1] + a[0][2];
    if (x1_ok) out[1] = a[0][1] - a[0][2] - a[0][3];
    if (y1_ok) {
        out[OW] = a[1][0] + a[1][1] + a[1][2];
        if (x1_ok) out[OW + 1] = a[1][1] - a[1][2] - a[1][3];
    }
}
