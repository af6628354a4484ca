// Host memory made pinned for the copy engines by registering it in chunks: single pinned
// allocations of many GB fail on some drivers, registration of 1 GiB pieces does not. A copy
// may not span two registrations (the driver refuses it), so copies go through here, split
// at chunk boundaries.
#ifndef MT_RUNTIME_CUDA_PINNEDMEMORY_H
#define MT_RUNTIME_CUDA_PINNEDMEMORY_H

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mt::cuda {

class PinnedMemory {
public:
  /// Registers [begin, begin + bytes) of each region in pieces of at most `chunkBytes`.
  /// Throws (after unregistering what it registered) when the driver refuses a piece.
  struct Region {
    void *begin;
    size_t bytes;
  };
  explicit PinnedMemory(const std::vector<Region> &regions, size_t chunkBytes = 1ull << 30);
  ~PinnedMemory();
  PinnedMemory(const PinnedMemory &) = delete;
  PinnedMemory &operator=(const PinnedMemory &) = delete;

  size_t chunks() const { return registered.size(); }

  /// Enqueues a copy between `host` (inside the registered regions) and `device` on `stream`,
  /// one cudaMemcpyAsync per chunk it touches.
  void copy(void *device, void *host, size_t bytes, cudaMemcpyKind kind,
            cudaStream_t stream) const;

private:
  struct Chunk {
    char *begin;
    size_t bytes;
  };
  std::vector<Chunk> registered; // ascending by address
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_PINNEDMEMORY_H
