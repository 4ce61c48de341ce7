// Shared-memory tiling where the OUTPUT tile is the thread block (seed 002, strategy 3,
// variant (2): "thread block = output tile; a thread may load several input elements").
// Input CHW, weights OIHW (KCRS), output CHW (K, OH, OW).
//
// A block of B x B threads computes a B x B tile of outputs, one per thread. The input those
// outputs read is a TH x TW region per channel, TH = (B - 1) * stride + CONV_R and
// TW = (B - 1) * stride + CONV_S (halo included), starting at the first output's window
// origin. The block's threads stride over the whole region (all channels) to load it into
// dynamic shared memory, zeros where it lies in the padding or past the image; then every
// thread reads its window from shared memory only.
// Dynamic shared memory: CONV_C * TH * TW floats. For B = 32 at stride 2 or 3 this exceeds
// the 48 KiB default; the cuda backend then opts in, up to the GPU's per-block opt-in limit.

// The largest block tried is 32 x 32 = 1024 threads: the bound keeps registers <= 64 so
// that launch is never refused for lack of registers.
extern "C" __global__ void __launch_bounds__(1024)
conv2d_tiled_output_chw(const float* __restrict__ input,
                        const float* __restrict__ weights,
                        float* __restrict__ output,
                        int H, int W, int stride, int pad,
                        int OH, int OW) {
    extern __shared__ float tile[];  // [CONV_C][TH][TW]

    const int bw = blockDim.x, bh = blockDim.y;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int th = (bh - 1) * stride + CONV_R;  // input rows the block's outputs read
    const int tw = (bw - 1) * stride + CONV_S;  // input columns
    const int ix0 = blockIdx.x * bw * stride - pad;  // window origin of the block's first output
    const int iy0 = blockIdx.y * bh * stride - pad;

    // Cooperative load: consecutive threads take consecutive columns of a row, so the global
    // reads of a warp are contiguous within each row.
    const int nthreads = bw * bh;
    const int region = th * tw;
    const size_t plane = (size_t)H * W;
    for (int idx = ty * bw + tx; idx < CONV_C * region; idx += nthreads) {
        const int c = idx / region;
        const int rem = idx - c * region;
        const int y = rem / tw;
        const int x = rem - y * tw;
        const int gy = iy0 + y, gx = ix0 + x;
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
#pragma unroll
    for (int c = 0; c < CONV_C; ++c) {
#pragma unroll
        for (int r = 0; r < CONV_R; ++r) {
            const float* row = tile + (c * th + ty * stride + r) * tw + tx * stride;
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
