// The scratch region of the CUDA kernels.
#include "runtime/cuda/Scratch.h"

#include "runtime/cuda/CudaCheck.h"

namespace mt::cuda {

Scratch::~Scratch() {
  for (void *block : overflow)
    cudaFree(block);
  cudaFree(region);
}

void *Scratch::take(size_t bytes) {
  bytes = (bytes + 255) / 256 * 256;
  if (used + bytes <= regionBytes) {
    void *at = region + used;
    used += bytes;
    return at;
  }
  void *block = nullptr;
  MT_CUDA_CHECK(cudaMalloc(&block, bytes));
  overflow.push_back(block);
  overflowBytes += bytes;
  return block;
}

void Scratch::reset() {
  if (!overflow.empty()) {
    // cudaFree waits for the device, so work that reads these blocks has finished.
    size_t needed = used + overflowBytes;
    for (void *block : overflow)
      MT_CUDA_CHECK(cudaFree(block));
    overflow.clear();
    overflowBytes = 0;
    MT_CUDA_CHECK(cudaFree(region));
    region = nullptr;
    MT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&region), needed));
    regionBytes = needed;
  }
  used = 0;
}

} // namespace mt::cuda
