// Persistent weights: an update's pieces across PCIe from the state's bf16 copy as they are
// written.
#include "runtime/cuda/WeightSender.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/PinnedMemory.h"

#include <algorithm>

namespace mt::cuda {

void WeightSender::send(const std::vector<uint16_t *> &targets, const uint16_t *copy, int64_t first,
                        int64_t count, const Write &write) {
  std::lock_guard<std::mutex> lock(sending);
  for (int64_t at = first; at < first + count; at += kSendPiece) {
    int64_t n = std::min(kSendPiece, first + count - at);
    write(at, n);
    void *from = const_cast<uint16_t *>(copy + at);
    for (uint16_t *target : targets)
      pinned.copy(target + at, from, n * sizeof(uint16_t), cudaMemcpyHostToDevice, stream);
    sentBytes += n * static_cast<int64_t>(sizeof(uint16_t) * targets.size());
  }
}

void WeightSender::mark(cudaEvent_t done) {
  std::lock_guard<std::mutex> lock(sending);
  MT_CUDA_CHECK(cudaEventRecord(done, stream));
}

} // namespace mt::cuda
