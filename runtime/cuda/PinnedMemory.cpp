// Chunked registration of host memory with the CUDA driver.
#include "runtime/cuda/PinnedMemory.h"

#include "runtime/cuda/CudaCheck.h"

#include <algorithm>

namespace mt::cuda {

PinnedMemory::PinnedMemory(const std::vector<Region> &regions, size_t chunkBytes) {
  try {
    for (const Region &region : regions)
      for (size_t offset = 0; offset < region.bytes; offset += chunkBytes) {
        char *piece = static_cast<char *>(region.begin) + offset;
        MT_CUDA_CHECK(cudaHostRegister(piece, std::min(chunkBytes, region.bytes - offset),
                                       cudaHostRegisterDefault));
        registered.push_back(piece);
      }
  } catch (...) {
    for (void *piece : registered)
      cudaHostUnregister(piece);
    throw;
  }
}

PinnedMemory::~PinnedMemory() {
  for (void *piece : registered)
    cudaHostUnregister(piece);
}

} // namespace mt::cuda
