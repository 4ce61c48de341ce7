// Direct convolution with the filter in constant memory (seed 002, strategy 2).
// Input CHW, output CHW (K, OH, OW); the weights (OIHW = KCRS) live in c_weights, which the
// runner fills from the weights buffer before the run (description key `constants`).
// Every thread of a warp reads the same weight at the same time (the tap loop is uniform),
// which is the access the constant cache broadcasts in one transaction.
// One thread per output pixel computes all CONV_K outputs; zero padding is implicit.

// Sized by the compile-time problem constants; 64 KiB of constant memory holds
// CONV_K * CONV_C * CONV_R * CONV_S <= 16384 floats (3 * 3 * 7 * 7 = 441 here).
__constant__ float c_weights[CONV_K * CONV_C * CONV_R * CONV_S];

// The largest block tried is 32 x 32 = 1024 threads: the bound keeps registers <= 64 so
// that launch is never refused for lack of registers.
extern "C" __global__ void __launch_bounds__(1024)
conv2d_direct_const_chw(const float* __restrict__ input,
                        float* __restrict__ output,
                        int H, int W, int stride, int pad,
                        int OH, int OW) {
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= OW || oy >= OH) return;

    float acc[CONV_K];
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) acc[k] = 0.0f;

    const int iy0 = oy * stride - pad;
    const int ix0 = ox * stride - pad;
    const size_t plane = (size_t)H * W;
#pragma unroll
    for (int r = 0; r < CONV_R; ++r) {
        const int iy = iy0 + r;
        if (iy < 0 || iy >= H) continue;  // zero padding
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
                    acc[k] += v * c_weights[((k * CONV_C + c) * CONV_R + r) * CONV_S + s];
                }
            }
        }
    }
    const size_t out_plane = (size_t)OH * OW;
    float* out = output + (size_t)oy * OW + ox;
#pragma unroll
    for (int k = 0; k < CONV_K; ++k) out[k * out_plane] = acc[k];
}
