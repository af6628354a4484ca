// Chunked registration of host memory with the CUDA driver.
#include "runtime/cuda/PinnedMemory.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/FaultInjection.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace mt::cuda {

PinnedMemory::PinnedMemory(const std::vector<Region> &regions, size_t chunkBytes) {
  size_t total = 0, pinned = 0;
  for (const Region &region : regions)
    total += region.bytes;
  try {
    for (const Region &region : regions)
      for (size_t offset = 0; offset < region.bytes; offset += chunkBytes) {
        Chunk chunk{static_cast<char *>(region.begin) + offset,
                    std::min(chunkBytes, region.bytes - offset)};
        cudaError_t status = injectedPinFault() ? cudaErrorMemoryAllocation
                                                : cudaHostRegister(chunk.begin, chunk.bytes,
                                                                   cudaHostRegisterDefault);
        check(status, ("cudaHostRegister of " + std::to_string(chunk.bytes) + " bytes").c_str(),
              __FILE__, __LINE__);
        registered.push_back(chunk);
        pinned += chunk.bytes;
      }
  } catch (...) {
    for (const Chunk &chunk : registered)
      cudaHostUnregister(chunk.begin);
    try {
      throw;
    } catch (const CudaError &error) {
      char pinnedSoFar[96];
      std::snprintf(pinnedSoFar, sizeof pinnedSoFar, "%.1f of %.1f MiB", pinned / 1048576.0,
                    total / 1048576.0);
      throw CudaError(std::string("pinning the host state for the device failed after ") +
                      pinnedSoFar + ": " + error.what());
    }
  }
  std::sort(registered.begin(), registered.end(),
            [](const Chunk &a, const Chunk &b) { return a.begin < b.begin; });
}

PinnedMemory::~PinnedMemory() {
  for (const Chunk &chunk : registered)
    cudaHostUnregister(chunk.begin);
}

void PinnedMemory::copy(void *device, void *host, size_t bytes, cudaMemcpyKind kind,
                        cudaStream_t stream) const {
  char *at = static_cast<char *>(host), *end = at + bytes;
  char *deviceAt = static_cast<char *>(device);
  while (at < end) {
    // The chunk holding `at`: the last one that begins at or before it.
    auto next = std::upper_bound(registered.begin(), registered.end(), at,
                                 [](char *address, const Chunk &c) { return address < c.begin; });
    if (next == registered.begin() || at >= std::prev(next)->begin + std::prev(next)->bytes)
      throw CudaError("a copy touches host memory that is not pinned");
    const Chunk &chunk = *std::prev(next);
    size_t piece = std::min<size_t>(end - at, chunk.begin + chunk.bytes - at);
    if (kind == cudaMemcpyHostToDevice)
      MT_CUDA_CHECK(cudaMemcpyAsync(deviceAt, at, piece, kind, stream));
    else
      MT_CUDA_CHECK(cudaMemcpyAsync(at, deviceAt, piece, kind, stream));
    at += piece;
    deviceAt += piece;
  }
}

} // namespace mt::cuda
