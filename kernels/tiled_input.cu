// Shared-memory tiling where the INPUT tile is the thread block (seed 002, strategy 3,
// variant (1): "thread block = input tile; some threads do not compute").
// Input CHW, weights OIHW (KCRS), output CHW (K, OH, OW).
//
// A block of B x B threads (B = blockDim) loads a B x B input tile of every channel into
// shared memory, one element per thread per channel, zeros where the tile lies in the padding
// or past the image. Only the threads that sit on a window origin whose whole CONV_R x CONV_S
// window fits in the tile compute an output, so each block produces
//   OUT_H = (B - CONV_R) / stride + 1  rows  and  OUT_W = (B - CONV_S) / stride + 1  columns
// of outputs, and consecutive blocks' input tiles overlap by the halo. The launch grid is
// cdiv(OW, OUT_W) x cdiv(OH, OUT_H). B must be >= the filter size (8 >= 7 holds here).
// Dynamic shared memory: CONV_C * B * B floats.

// The largest block tried is 32 x 32 = 1024 threads: the bound keeps registers <= 64 so
// that launch is never refused for lack of registers.
extern "C" __global__ void __launch_bounds__(1024)
conv2d_tiled_input_chw(const float* __restrict__ input,
                       const float* __restrict__ weights,
                       float* __restrict__ output,
                       int H, int W, int stride, int pad,
                       int OH, int OW) {
    extern __shared__ float tile[];  // [CONV_C][B][B]

    const int bw = blockDim.x, bh = blockDim.y;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int out_w = (bw - CONV_S) / stride + 1;  // outputs per block, per dimension
    const int out_h = (bh - CONV_R) / stride + 1;

    // The block's first output and the input position of its window origin.
    const int ox0 = blockIdx.x * out_w;
    const int oy0 = blockIdx.y * out_h;
    const int ix = ox0 * stride - pad + tx;  // the input element this thread loads
    const int iy = oy0 * stride - pad + ty;

    const bool inside = ix >= 0 && ix < W && iy >= 0 && iy < H;
    const size_t plane = (size_t)H * W;
#pragma unroll
    for (int c = 0; c < CONV_C; ++c) {
        // Zero outside the image: this is the zero padding.
        tile[(c * bh + ty) * bw + tx] = inside ? input[c * plane + (size_t)iy * W + ix] : 0.0f;
    }
    __syncthreads();

    // Compute only on window origins: (tx, ty) = (j * stride, i * stride) with j < out_w,
    // i < out_h, so the window (tx .. tx + CONV_S - 1) stays inside the tile.
    if (tx % stride != 0 || ty % stride != 0) return;
    const int j = tx / stride, i = ty / stride;
    if (j >= out_w || i >= out_h) return;
    const int ox = ox0 + j, oy = oy0 + i;
    if (ox >= OW || oy >= OH) return;

    float acc[CONV_K];
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) acc[k] = 0.0f;
#pragma unroll
    for (int c = 0; c < CONV_C; ++c) {
#pragma unroll
        for (int r = 0; r < CONV_R; ++r) {
            const float* row = tile + (c * bh + ty + r) * bw + tx;
#pragma unroll
            for (int s = 0; s < CONV_S; ++s) {
                const float v = row[s];
#pragma unroll
                for (int k = 0; k < CONV_K; ++k) {
                    acc[k] += v * weights[((k * CONV_C + c) * CONV_R + r) * CONV_S + s];
                }
            }
        }
    }
    const size_t out_plane = (size_t)OH * OW;
    float* out = output + (size_t)oy * OW + ox;
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) out[k * out_plane] = acc[k];
}
