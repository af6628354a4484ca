// Chunked registration of host memory with the CUDA driver.
#include "runtime/cuda/PinnedMemory.h"

#include "runtime/ThreadPool.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/FaultInjection.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace mt::cuda {

PinnedMemory::PinnedMemory(const std::vector<Region> &regions, size_t chunkBytes) {
  std::vector<Chunk> chunks;
  size_t total = 0;
  for (const Region &region : regions) {
    total += region.bytes;
    for (size_t offset = 0; offset < region.bytes; offset += chunkBytes)
      chunks.push_back({static_cast<char *>(region.begin) + offset,
                        std::min(chunkBytes, region.bytes - offset)});
  }
  // Registered on every core: the driver pins each chunk's pages on the calling thread.
  std::vector<cudaError_t> status(chunks.size(), cudaSuccess);
  int device = 0;
  MT_CUDA_CHECK(cudaGetDevice(&device));
  runParallel(static_cast<int64_t>(chunks.size()), [&](int64_t c) {
    status[c] = cudaSetDevice(device); // a worker's first CUDA call would take device 0
    if (status[c] == cudaSuccess)
      status[c] = injectedPinFault()
                      ? cudaErrorMemoryAllocation
                      : cudaHostRegister(chunks[c].begin, chunks[c].bytes, cudaHostRegisterDefault);
  });
  size_t pinned = 0;
  int failed = -1;
  for (size_t c = 0; c < chunks.size(); ++c)
    if (status[c] == cudaSuccess) {
      registered.push_back(chunks[c]);
      pinned += chunks[c].bytes;
    } else if (failed < 0) {
      failed = static_cast<int>(c);
    }
  if (failed >= 0) {
    for (const Chunk &chunk : registered)
      cudaHostUnregister(chunk.begin);
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, "%.1f of %.1f MiB", pinned / 1048576.0,
                  total / 1048576.0);
    throw CudaError("pinning the host state for the device failed (" + std::string(numbers) +
                    " pinned): cudaHostRegister of " + std::to_string(chunks[failed].bytes) +
                    " bytes: " + cudaGetErrorString(status[failed]));
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
