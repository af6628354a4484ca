// Persistent weights: each update's bf16 copy, written into the host state's pinned copy, crosses
// to the weight's device memory a piece at a time while the update writes the next piece.
#ifndef MT_RUNTIME_CUDA_WEIGHTSENDER_H
#define MT_RUNTIME_CUDA_WEIGHTSENDER_H

#include "plan/DeviceLayout.h"
#include "runtime/cuda/CudaHandles.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace mt::cuda {

class PinnedMemory;

class WeightSender {
public:
  /// `pinned`: the registrations the copies lie in (a copy may not span two), the caller's,
  /// kept while the sender is.
  explicit WeightSender(const PinnedMemory &pinned) : pinned(pinned) {}

  /// Elements [first, first + count) of a weight's update: `write` updates each piece of
  /// kSendPiece elements (`first`, `count` of the piece), its bf16 copy included, into `copy`
  /// (pinned host memory indexed as the weight); the piece then crosses on the sender's own stream
  /// to the same place of each of `targets` (the device copies of the whole weight). Nothing waits
  /// for a crossing: the copy is the state's own, which nothing writes again before the next step's
  /// update of it, which the device's readers of the weight come before. One send at a time.
  using Write = std::function<void(int64_t first, int64_t count)>;
  void send(const std::vector<uint16_t *> &targets, const uint16_t *copy, int64_t first,
            int64_t count, const Write &write);
  /// Records `done` once everything sent so far has crossed.
  void mark(cudaEvent_t done);

  /// The bytes sent so far (each target's).
  int64_t bytesSent() const { return sentBytes.load(); }

private:
  const PinnedMemory &pinned;
  Stream stream = Stream::create();
  std::mutex sending;
  std::atomic<int64_t> sentBytes{0};
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_WEIGHTSENDER_H
