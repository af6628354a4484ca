// The scratch region of the CUDA kernels.
#include "runtime/cuda/Scratch.h"

#include "runtime/cuda/CudaCheck.h"

#include <algorithm>

namespace mt::cuda {

Scratch::Scratch(size_t capacity) : bytes(capacity) {
  if (bytes > 0)
    MT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&region), bytes));
}

Scratch::~Scratch() { cudaFree(region); }

void *Scratch::take(size_t request) {
  request = (request + 255) / 256 * 256;
  if (used + request > bytes)
    return nullptr;
  void *at = region + used;
  used += request;
  highest = std::max(highest, used);
  return at;
}

} // namespace mt::cuda
