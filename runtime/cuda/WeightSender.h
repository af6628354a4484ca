// Persistent weights: each update's fp32 masters cross to the device a piece at a time, right
// after the update writes the piece and while it is still in the CPU's cache, and are cast there.
#ifndef MT_RUNTIME_CUDA_WEIGHTSENDER_H
#define MT_RUNTIME_CUDA_WEIGHTSENDER_H

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
  /// `pinned`: the registrations the masters lie in (a copy may not span two); `staging`:
  /// device memory for `pieceElements` fp32 values, where each piece lands before its cast.
  /// Both the caller's, kept while the sender is.
  WeightSender(const PinnedMemory &pinned, float *staging, int64_t pieceElements);

  /// Elements [first, first + count) of a weight's update: `write` updates each piece
  /// (`first`, `count` of the piece) of `masters` (pinned host memory indexed as the weight),
  /// which then crosses on the sender's own stream and is rounded to bf16 (nearest even, as
  /// the host rounds) into the same place of each of `targets` (the device copies of the
  /// whole weight). The update writes no bf16 copy into host memory, and the crossing reads
  /// bytes the update has just written: on a coherent host the DMA takes them from the CPU's
  /// cache, not from its memory. Nothing waits for a crossing: nothing writes the masters
  /// again before the next step's update of the weight, which the device's readers of it
  /// come before. One send at a time.
  using Write = std::function<void(int64_t first, int64_t count)>;
  void send(const std::vector<uint16_t *> &targets, const float *masters, int64_t first,
            int64_t count, const Write &write);
  /// Records `done` once everything sent so far has crossed and been cast.
  void mark(cudaEvent_t done);

  /// The bytes sent across PCIe so far.
  int64_t bytesSent() const { return sentBytes.load(); }

private:
  const PinnedMemory &pinned;
  float *staging;
  int64_t pieceElements;
  Stream stream = Stream::create();
  std::mutex sending;
  std::atomic<int64_t> sentBytes{0};
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_WEIGHTSENDER_H
