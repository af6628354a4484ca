// Persistent weights: pieces of an update's bf16 copy into cached slots, and across PCIe.
#include "runtime/cuda/WeightSender.h"

#include "runtime/cuda/CudaCheck.h"

#include <algorithm>

namespace mt::cuda {

WeightSender::WeightSender(uint16_t *slots, int64_t slotElements)
    : slots(slots), slotElements(slotElements) {
  for (int s = 0; s < kSendSlots; ++s)
    crossed.push_back(Event::forOrdering());
}

void WeightSender::send(const std::vector<uint16_t *> &targets, int64_t first, int64_t count,
                        const Fill &fill) {
  std::lock_guard<std::mutex> lock(sending);
  try {
    for (int64_t at = first; at < first + count; at += slotElements) {
      int64_t n = std::min(slotElements, first + count - at);
      int s = static_cast<int>(next++ % kSendSlots);
      uint16_t *slot = slots + s * slotElements;
      // The slot's previous piece has crossed before this one overwrites it (an event not
      // yet recorded is complete).
      MT_CUDA_CHECK(cudaEventSynchronize(crossed[s]));
      fill(at, n, slot);
      for (uint16_t *target : targets)
        MT_CUDA_CHECK(cudaMemcpyAsync(target + at, slot, n * sizeof(uint16_t),
                                      cudaMemcpyHostToDevice, stream));
      MT_CUDA_CHECK(cudaEventRecord(crossed[s], stream));
      sentBytes += n * static_cast<int64_t>(sizeof(uint16_t) * targets.size());
    }
  } catch (...) {
    // The pieces still crossing land before the caller may free or reuse the slots.
    cudaStreamSynchronize(stream);
    throw;
  }
}

void WeightSender::mark(cudaEvent_t done) {
  std::lock_guard<std::mutex> lock(sending);
  MT_CUDA_CHECK(cudaEventRecord(done, stream));
}

} // namespace mt::cuda
