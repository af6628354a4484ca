// Persistent weights: each update's bf16 copy crosses to the weight's device memory a piece at
// a time, through a few pinned slots small enough to stay in the CPU's cache.
#ifndef MT_RUNTIME_CUDA_WEIGHTSENDER_H
#define MT_RUNTIME_CUDA_WEIGHTSENDER_H

#include "runtime/cuda/CudaHandles.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace mt::cuda {

/// Slots a sender cycles through: one is written while those before it cross.
constexpr int kSendSlots = 3;

class WeightSender {
public:
  /// `slots`: pinned host memory of kSendSlots slots of `slotElements` bf16 values each, the
  /// caller's, kept while the sender is.
  WeightSender(uint16_t *slots, int64_t slotElements);

  /// Elements [first, first + count) of a weight: `fill` writes each piece's bf16 values into
  /// a slot (`first`, `count` of the piece), which then crosses on the sender's own stream to
  /// that place of each of `targets` (the device copies of the whole weight). A slot is
  /// written again once its last piece has crossed. One send at a time.
  using Fill = std::function<void(int64_t first, int64_t count, uint16_t *slot)>;
  void send(const std::vector<uint16_t *> &targets, int64_t first, int64_t count, const Fill &fill);
  /// Records `done` once everything sent so far has crossed.
  void mark(cudaEvent_t done);

  int64_t slotCapacity() const { return slotElements; }
  /// The bytes sent so far (each target's).
  int64_t bytesSent() const { return sentBytes.load(); }

private:
  uint16_t *slots;
  int64_t slotElements;
  Stream stream = Stream::create();
  std::vector<Event> crossed; // per slot: its last piece has crossed
  int64_t next = 0;           // the slot the next piece takes
  std::mutex sending;
  std::atomic<int64_t> sentBytes{0};
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_WEIGHTSENDER_H
