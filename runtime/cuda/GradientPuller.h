// Pulled gradients: a gradient waiting in device memory crosses into a few pinned host slots a
// chunk at a time, each chunk just before the update that reads it (the plan's pull_gradients).
#ifndef MT_RUNTIME_CUDA_GRADIENTPULLER_H
#define MT_RUNTIME_CUDA_GRADIENTPULLER_H

#include "runtime/cuda/CudaHandles.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace mt::cuda {

class PinnedMemory;

class GradientPuller {
public:
  /// `slots`: pinned host memory of kPullSlots slots of `slotElements` floats each, the
  /// caller's, kept while the puller is; `pinned`: the registrations they lie in (a copy may
  /// not span two), kept as long.
  GradientPuller(float *slots, int64_t slotElements, const PinnedMemory &pinned);

  /// Hands `visit` the `count` floats at device address `from` a chunk at a time (`first`,
  /// `count`), each pulled across PCIe on the puller's own stream as the update reads the ones
  /// before it (pullChunks). One pull at a time: callers on other threads wait.
  using Visitor = std::function<void(const float *chunk, int64_t first, int64_t count)>;
  void pull(const float *from, int64_t count, const Visitor &visit);

  /// The bytes pulled so far, and the time the pulls' callers waited for chunks to land.
  int64_t bytesPulled() const { return pulledBytes.load(); }
  double waitedMs() const { return waitedNanos.load() / 1e6; }

private:
  float *slots;
  int64_t slotElements;
  const PinnedMemory &pinned;
  Stream stream = Stream::create();
  std::vector<Event> landed; // per slot: its chunk has crossed
  std::mutex pulling;
  std::atomic<int64_t> pulledBytes{0}, waitedNanos{0};
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_GRADIENTPULLER_H
