// "Cached" shared-memory tiling (seed 002, strategy 4): the block loads only its own share of
// the input into shared memory, no halo, and reads the taps that fall outside that share
// (the halo, which belongs to the neighbouring blocks' shares) straight from global memory,
// counting on L1/L2 to hold them because the neighbours read the same elements.
// Input CHW, weights OIHW (KCRS), output CHW (K, OH, OW).
//
// Strided version of the seed's tile: a block of B x B threads computes B x B outputs, one per
// thread. Its share of the input is the (B * stride) x (B * stride) footprint (every channel)
// starting at the window centre of its first output; the blocks' footprints tile the input
// without overlap. At stride 1 and pad = (R - 1) / 2 this is exactly the seed's tile (input
// tile = output tile positions, halo of R / 2 read from global memory). At stride > 1 each
// thread loads stride * stride elements per channel.
// Dynamic shared memory: CONV_C * (B * stride)^2 floats (above 48 KiB for B = 32, stride 3,
// where the cuda backend opts in, up to the GPU's per-block opt-in limit).

// The largest block tried is 32 x 32 = 1024 threads: the bound keeps registers <= 64 so
// that launch is never refused for lack of registers.
extern "C" __global__ void __launch_bounds__(1024)
conv2d_tiled_cached_chw(const float* __restrict__ input,
                        const float* __restrict__ weights,
                        float* __restrict__ output,
                        int H, int W, int stride, int pad,
                        int OH, int OW) {
    extern __shared__ float tile[];  // [CONV_C][TH][TW]

    const int bw = blockDim.x, bh = blockDim.y;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int th = bh * stride, tw = bw * stride;
    // Input position of the first output's window centre: the tile's top-left corner.
    const int ty0 = blockIdx.y * th - pad + CONV_R / 2;
    const int tx0 = blockIdx.x * tw - pad + CONV_S / 2;

    const int nthreads = bw * bh;
    const int region = th * tw;
    const size_t plane = (size_t)H * W;
    for (int idx = ty * bw + tx; idx < CONV_C * region; idx += nthreads) {
        const int c = idx / region;
        const int rem = idx - c * region;
        const int y = rem / tw;
        const int x = rem - y * tw;
        const int gy = ty0 + y, gx = tx0 + x;
        tile[idx] = (gy >= 0 && gy < H && gx >= 0 && gx < W)
                        ? input[c * plane + (size_t)gy * W + gx]
                        : 0.0f;  // zero padding
    }
    __syncthreads();

    const int ox = blockIdx.x * bw + tx;
    const int oy = blockIdx.y * bh + ty;
    if (ox >= OW || oy >= OH) return;  // after the barrier: edge threads still helped load

    float acc[CONV_K];
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) acc[k] = 0.0f;

    // Tap (r, s) reads input (oy*stride - pad + r, ox*stride - pad + s), which is
    // tile element (ly, lx) = (ty*stride + r - R/2, tx*stride + s - S/2).
    // Not unrolled over r: unrolling all R x S taps with the tile/halo branches let the
    // compiler hoist loads until a 7 x 7 filter needed 85 registers, too many for 1024 threads.
#pragma unroll 1
    for (int r = 0; r < CONV_R; ++r) {
        const int ly = ty * stride + r - CONV_R / 2;
        const int gy = oy * stride - pad + r;
        const bool row_in_tile = ly >= 0 && ly < th;
        const bool row_in_image = gy >= 0 && gy < H;
#pragma unroll
        for (int s = 0; s < CONV_S; ++s) {
            const int lx = tx * stride + s - CONV_S / 2;
            const int gx = ox * stride - pad + s;
            float v[CONV_C];
            if (row_in_tile && lx >= 0 && lx < tw) {
#pragma unroll
                for (int c = 0; c < CONV_C; ++c) v[c] = tile[(c * th + ly) * tw + lx];
            } else if (row_in_image && gx >= 0 && gx < W) {
                // Halo: a neighbour's share, read through the read-only (L1) path.
#pragma unroll
                for (int c = 0; c < CONV_C; ++c) v[c] = __ldg(input + c * plane + (size_t)gy * W + gx);
            } else {
                continue;  // zero padding outside the image
            }
#pragma unroll
            for (int c = 0; c < CONV_C; ++c) {
#pragma unroll
                for (int k = 0; k < CONV_K; ++k) {
                    acc[k] += v[c] * weights[((k * CONV_C + c) * CONV_R + r) * CONV_S + s];
                }
            }
        }
    }
    const size_t out_plane = (size_t)OH * OW;
    float* out = output + (size_t)oy * OW + ox;
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) out[k * out_plane] = acc[k];
}
