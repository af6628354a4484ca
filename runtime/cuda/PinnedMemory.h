// Host memory made pinned for the copy engines by registering it in chunks: single pinned
// allocations of many GB fail on some drivers, registration of 1 GiB pieces does not.
#ifndef MT_RUNTIME_CUDA_PINNEDMEMORY_H
#define MT_RUNTIME_CUDA_PINNEDMEMORY_H

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

private:
  std::vector<void *> registered;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_PINNEDMEMORY_H
