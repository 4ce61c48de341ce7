// A deliberately faulty kernel: every thread stores 2^40 floats past the end of its output,
// an illegal address that leaves the CUDA context unusable (a sticky error).
extern "C" __global__ void fault_oob_write(const float* input, const float* weights, float* output, int H, int W,
                                           int stride, int pad, int OH, int OW) {
    output[(1ull << 40) + threadIdx.x] = 1.0f;
}
