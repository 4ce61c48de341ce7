// A deliberately hung kernel: spins on a flag that nothing sets. The volatile read keeps the
// compiler from removing the loop.
__device__ volatile int never_set = 0;

extern "C" __global__ void fault_hang(const float* input, const float* weights, float* output, int H, int W,
                                      int stride, int pad, int OH, int OW) {
    while (never_set == 0) {
    }
    output[0] = 0.0f;
}
