// Direct (sliding-window) convolution, one thread per output pixel, planar layouts
// (seed 002, strategy 1 "basic", with every output channel per thread as in direct.cu).
// Input CHW, weights OIHW (KCRS), output CHW (K, OH, OW).
// Each thread computes all CONV_K outputs of its pixel, so its input window is read once;
// zero padding is implicit: out-of-range taps are skipped. CONV_C/K/R/S are compile-time
// constants so the loops unroll and the accumulators stay in registers.
// In CHW the threads of a warp (consecutive ox) read consecutive addresses of one plane at
// stride 1, and stride-separated addresses otherwise.

// The largest block tried is 32 x 32 = 1024 threads: the bound keeps registers <= 64 so
// that launch is never refused for lack of registers.
extern "C" __global__ void __launch_bounds__(1024)
conv2d_direct_chw(const float* __restrict__ input,
                  const float* __restrict__ weights,
                  float* __restrict__ output,
                  int H, int W, int stride, int pad,
                  int OH, int OW) {
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= OW || oy >= OH) return;

    float acc[CONV_K];
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) acc[k] = 0.0f;

    const int iy0 = oy * stride - pad;  // top-left corner of the window (may be in the padding)
    const int ix0 = ox * stride - pad;
    const size_t plane = (size_t)H * W;
#pragma unroll
    for (int r = 0; r < CONV_R; ++r) {
        const int iy = iy0 + r;
        if (iy < 0 || iy >= H) continue;  // zero padding: the tap contributes nothing
#pragma unroll
        for (int s = 0; s < CONV_S; ++s) {
            const int ix = ix0 + s;
            if (ix < 0 || ix >= W) continue;
            const float* pixel = input + (size_t)iy * W + ix;
#pragma unroll
            for (int c = 0; c < CONV_C; ++c) {
                const float v = pixel[c * plane];
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
