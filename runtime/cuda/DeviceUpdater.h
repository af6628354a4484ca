// AdamW on the device for parameters whose gradients wait in device memory: each piece of the
// host state's split masters and moments crosses in, is updated beside its gradient, and
// crosses back; the updated high halves go on into the weight's device copies.
#ifndef MT_RUNTIME_CUDA_DEVICEUPDATER_H
#define MT_RUNTIME_CUDA_DEVICEUPDATER_H

#include "plan/DeviceLayout.h"
#include "runtime/AdamWConstants.h"
#include "runtime/HostState.h"
#include "runtime/cuda/CudaHandles.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace mt::cuda {

class PinnedMemory;

class DeviceUpdater {
public:
  /// Updates `parameters` (plan parameter ids) of `state`, whose split masters and moments
  /// lie in `pinned`'s registrations (the caller's, kept while the updater is).
  DeviceUpdater(const HostState &state, const std::vector<int> &parameters,
                const PinnedMemory &pinned);
  ~DeviceUpdater();
  DeviceUpdater(const DeviceUpdater &) = delete;
  DeviceUpdater &operator=(const DeviceUpdater &) = delete;

  /// The device memory an updater of `parameters` holds: two pieces of state in flight and
  /// a double for each gradient chunk's squares.
  static int64_t deviceBytesFor(const HostState &state, const std::vector<int> &parameters);

  bool updates(int p) const { return p >= 0 && p < static_cast<int>(at.size()) && at[p] >= 0; }
  /// The device memory it holds.
  int64_t deviceBytes() const { return bytes; }

  /// Enqueues on `stream`, after p's gradient (`gradient`, device memory) is there, the
  /// squares of its chunks, which reach host memory before what `stream` runs next.
  void measure(int p, const float *gradient, cudaStream_t stream);
  /// The squares of p's gradient of the last measure, once `stream` ran past it: the host's
  /// squaredNorm, bit for bit.
  double squares(int p) const;
  /// Enqueues p's AdamW from its gradient (`gradient`, device memory, which must stay until
  /// `done`) and the chunk squares measured: its state crosses in and back a piece at a time,
  /// and each updated piece's high halves (the bf16 weight) go into `targets` (device copies
  /// of the whole weight). Records `done` once the state and the targets hold the update.
  /// From one thread at a time; returns without waiting.
  void update(int p, const float *gradient, const AdamWConstants &constants, bool guarded,
              const std::vector<uint16_t *> &targets, cudaEvent_t done);
  /// Blocks until every update enqueued has reached the host state.
  void settle();
  /// The bytes that crossed PCIe for the updates so far, both ways.
  int64_t bytesMoved() const { return movedBytes.load(); }

private:
  const HostState &state;
  const PinnedMemory &pinned;
  std::vector<int64_t> at; // per plan parameter: its first chunk's squares, or -1
  int64_t piece = 0;       // elements a piece: kUpdatePiece, or the largest parameter's count
  int64_t bytes = 0;
  DeviceAllocation squaresOnDevice, staging;
  struct FreePinned {
    void operator()(double *host) const;
  };
  std::unique_ptr<double, FreePinned> squaresOnHost;
  /// Two pieces in flight: piece i crosses in, is updated and crosses back on streams[i % 2],
  /// so one piece's crossing in overlaps the other's crossing back.
  Stream streams[2] = {Stream::create(), Stream::create()};
  Event joined = Event::forOrdering();
  std::mutex updating;
  std::atomic<int64_t> movedBytes{0};
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_DEVICEUPDATER_H
