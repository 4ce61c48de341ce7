// Batched im2col for cuBLAS (seed 001's im2col + GEMM, over a batch of NCHW images).
//
// im2col_nchw turns image n of the NCHW input into the matrix col[n] of shape
// (C*R*S, OH*OW), row-major, row (c*R + r)*S + s, column oy*OW + ox, zero where the tap falls
// in the padding; any stride, pad and odd R = S. Then one batched GEMM (op: matmul, cuBLAS)
// computes output[n] (K, OH*OW) = weights (K, C*R*S) @ col[n], which is the NCHW output:
// OIHW weights are exactly a row-major (K, C*R*S) matrix.
//
// One thread per (n, c, output pixel), numbered idx = (n*C + c)*OH*OW + oy*OW + ox; it writes
// the R*S rows of channel c in its column. Consecutive threads write consecutive addresses of
// each row of col (coalesced) and read neighbouring pixels of one input plane.
// C is a runtime argument; CONV_R/CONV_S are compile-time so the tap loops unroll.
// Indices are 64-bit: col holds N*C*R*S*OH*OW elements (2.3e8 for VGG conv1_2 at N = 8).

#ifndef CONV_R
#error "im2col_batched.cu needs CONV_R and CONV_S"
#endif

typedef long long i64;

extern "C" __global__ void im2col_nchw(const float* __restrict__ input, float* __restrict__ col,
                                       int N, int C, int H, int W, int stride, int pad,
                                       int OH, int OW) {
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 npix = (i64)OH * OW;
    const i64 total = (i64)N * C * npix;
    if (idx >= total) return;
    const i64 nc = idx / npix;                 // n*C + c: the input plane
    const int pix = (int)(idx - nc * npix);    // oy*OW + ox: the column of col[n]
    const int n = (int)(nc / C);
    const int c = (int)(nc - (i64)n * C);
    const int oy = pix / OW;
    const int ox = pix - oy * OW;
    const int iy0 = oy * stride - pad;
    const int ix0 = ox * stride - pad;

    const float* plane = input + nc * H * W;
    // Row (c*R + r)*S + s of col[n], column pix.
    float* dst = col + ((i64)n * C * (CONV_R * CONV_S) + (i64)c * (CONV_R * CONV_S)) * npix + pix;
#pragma unroll
    for (int r = 0; r < CONV_R; ++r) {
        const int iy = iy0 + r;
        const bool row_in = iy >= 0 && iy < H;
#pragma unroll
        for (int s = 0; s < CONV_S; ++s) {
            const int ix = ix0 + s;
            const bool in = row_in && ix >= 0 && ix < W;
            dst[(i64)(r * CONV_S + s) * npix] = in ? plane[(i64)iy * W + ix] : 0.0f;
        }
    }
}
