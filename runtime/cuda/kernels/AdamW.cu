// AdamW on the device: the host's operations one by one in fp32 (no fused multiply-add) and its
// split masters' bits, so that a parameter updated here holds what the host would have made.
#include "runtime/cuda/kernels/DeviceAdamW.h"

#include "runtime/MasterHalves.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/kernels/Access.cuh"

#include <algorithm>

namespace mt::cuda {
namespace {

/// One block a chunk, a thread a lane: lane j sums elements j, j + 16, ... in order, as the
/// host's vector units do; thread 0 then adds the lanes pairwise as combineLanes does.
__global__ void chunkSquaresKernel(const float *gradient, int64_t count, double *squares) {
  __shared__ double lanes[kAdamWSquareLanes];
  const int64_t begin = blockIdx.x * kAdamWNormChunk;
  const int64_t end = min(count, begin + kAdamWNormChunk);
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kAdamWSquareLanes) {
    double x = gradient[i];
    sum = __dadd_rn(sum, __dmul_rn(x, x));
  }
  lanes[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int width = kAdamWSquareLanes / 2; width > 0; width /= 2)
      for (int j = 0; j < width; ++j)
        lanes[j] = __dadd_rn(lanes[j], lanes[j + width]);
    squares[blockIdx.x] = lanes[0];
  }
}

__global__ void adamwKernel(AdamWConstants k, uint16_t *high, uint16_t *low, float *m, float *v,
                            const float *gradient, const double *squares, int64_t first,
                            int64_t count, bool guarded) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = first + i;
    if (guarded && !isfinite(squares[at / kAdamWNormChunk]))
      continue;
    const float g = __fmul_rn(gradient[at], k.gradScale);
    float p =
        __fadd_rn(__fmul_rn(__fsub_rn(joinHalves(high[i], low[i]), k.center), k.decay), k.center);
    const float mi = __fadd_rn(__fmul_rn(m[i], k.beta1), __fmul_rn(g, k.oneMinusBeta1));
    const float vi =
        __fadd_rn(__fmul_rn(v[i], k.beta2), __fmul_rn(__fmul_rn(g, g), k.oneMinusBeta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.correction2Sqrt), k.eps);
    p = __fadd_rn(p, __fmul_rn(k.negativeStepSize, __fdiv_rn(mi, denom)));
    m[i] = mi;
    v[i] = vi;
    splitMaster(p, high[i], low[i]);
  }
}

} // namespace

void launchChunkSquares(const float *gradient, int64_t count, double *squares,
                        cudaStream_t stream) {
  const int64_t chunks = (count + kAdamWNormChunk - 1) / kAdamWNormChunk;
  if (chunks == 0)
    return;
  chunkSquaresKernel<<<static_cast<unsigned>(chunks), kAdamWSquareLanes, 0, stream>>>(
      gradient, count, squares);
  MT_CUDA_CHECK(cudaGetLastError());
}

void launchAdamW(const AdamWConstants &k, uint16_t *high, uint16_t *low, float *m, float *v,
                 const float *gradient, const double *squares, int64_t first, int64_t count,
                 bool guarded, cudaStream_t stream) {
  if (count == 0)
    return;
  constexpr int kThreads = 256;
  const unsigned blocks = std::min<unsigned>(blocksFor(count, kThreads), 4096);
  adamwKernel<<<blocks, kThreads, 0, stream>>>(k, high, low, m, v, gradient, squares, first, count,
                                               guarded);
  MT_CUDA_CHECK(cudaGetLastError());
}

} // namespace mt::cuda
