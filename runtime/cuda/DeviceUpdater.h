// AdamW on the device for weights kept there across steps, from gradients that wait in device
// memory: the low halves and moments cross in a piece at a time, are updated beside the
// gradient and the weight's device copy (the high halves), and cross back.
#ifndef MT_RUNTIME_CUDA_DEVICEUPDATER_H
#define MT_RUNTIME_CUDA_DEVICEUPDATER_H

#include "plan/DeviceLayout.h"
#include "runtime/AdamWConstants.h"
#include "runtime/HostState.h"
#include "runtime/cuda/CudaHandles.h"

#include <atomic>
#include <cstdint>
#include <map>
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

  /// The device memory an updater of `parameters` holds: two pieces of state in flight (low
  /// halves and moments, 10 bytes an element) and a double for each gradient chunk's squares.
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
  /// `done`) and the chunk squares measured. The high halves are the weight's device copies
  /// (`targets`, each the whole weight, holding the host's high halves as of p's last
  /// update): the update reads and writes the first, and the others take its pieces. The low
  /// halves and moments cross in and back a piece at a time. The host's high halves of p are
  /// brought up to date only by settle: 10 bytes a parameter cross each way, not 12. Records
  /// `done` once the moments, low halves and targets hold the update. From one thread at a
  /// time; returns without waiting.
  void update(int p, const float *gradient, const AdamWConstants &constants, bool guarded,
              const std::vector<uint16_t *> &targets, cudaEvent_t done);
  /// Brings the high halves of the parameters updated since the last settle from their device
  /// copies into the host state, and blocks until every update enqueued and those copies have
  /// reached it: before the state is read (a checkpoint, the run's end). Not during updates.
  void settle();
  /// Blocks until what was enqueued has run, bringing no high halves (after a failure).
  void wait();

  /// Each update's span on the device, where timed (timeUpdates, for mt-run --trace): from
  /// before its first piece crosses in to after its last crosses back.
  struct Span {
    int parameter;
    Event start, end;
  };
  void timeUpdates() { timed = true; }
  /// The spans of the updates enqueued since the last call; forgets them.
  std::vector<Span> takeSpans();
  /// The bytes that crossed PCIe for the updates so far, both ways, settles included.
  int64_t bytesMoved() const { return movedBytes.load(); }

private:
  const HostState &state;
  const PinnedMemory &pinned;
  std::vector<int64_t> at; // per plan parameter: its first chunk's squares, or -1
  int64_t piece = 0;       // elements a piece (pieceFor: at most kUpdatePiece)
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
  /// Per parameter updated since the last settle, its first device copy.
  std::map<int, const uint16_t *> unsettled;
  bool timed = false;
  std::vector<Span> spans;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_DEVICEUPDATER_H
