// Pulled gradients: chunks into pinned slots on a stream of their own, ahead of the update.
#include "runtime/cuda/GradientPuller.h"

#include "plan/DeviceLayout.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/PinnedMemory.h"

#include <algorithm>

namespace mt::cuda {

GradientPuller::GradientPuller(float *slots, int64_t slotElements, const PinnedMemory &pinned)
    : slots(slots), slotElements(slotElements), pinned(pinned) {
  for (int s = 0; s < kPullSlots; ++s)
    landed.push_back(Event::forOrdering());
}

void GradientPuller::pull(const float *from, int64_t count, const Visitor &visit) {
  std::lock_guard<std::mutex> lock(pulling);
  // The first chunk smaller than a slot, so the update starts once 4 MB have crossed rather
  // than 16 (a step's hundreds of updates would each wait that long).
  const std::vector<int64_t> begins = pullChunks(count, slotElements);
  const int64_t chunks = static_cast<int64_t>(begins.size()) - 1;
  auto slot = [&](int64_t k) { return slots + (k % kPullSlots) * slotElements; };
  auto issue = [&](int64_t k) {
    pinned.copy(const_cast<float *>(from + begins[k]), slot(k),
                (begins[k + 1] - begins[k]) * sizeof(float), cudaMemcpyDeviceToHost, stream);
    MT_CUDA_CHECK(cudaEventRecord(landed[k % kPullSlots], stream));
  };
  // Each slot's next chunk is pulled once the update has read the one before: the chunk then
  // lands while the update reads the three ahead of it.
  try {
    for (int64_t k = 0; k < std::min<int64_t>(kPullSlots, chunks); ++k)
      issue(k);
    for (int64_t k = 0; k < chunks; ++k) {
      auto waiting = std::chrono::steady_clock::now();
      MT_CUDA_CHECK(cudaEventSynchronize(landed[k % kPullSlots]));
      waitedNanos += std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - waiting)
                         .count();
      visit(slot(k), begins[k], begins[k + 1] - begins[k]);
      pulledBytes += (begins[k + 1] - begins[k]) * static_cast<int64_t>(sizeof(float));
      if (k + kPullSlots < chunks)
        issue(k + kPullSlots);
    }
  } catch (...) {
    // The chunks still crossing land before the caller may free or reuse the slots.
    cudaStreamSynchronize(stream);
    throw;
  }
}

} // namespace mt::cuda
