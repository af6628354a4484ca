// AdamW on the device for weights kept there across steps, from gradients that wait in device
// memory: the low halves and moments stay in device memory where it holds them, or cross in a
// piece at a time, are updated beside the gradient and the weight's device copy (the high
// halves), and cross back.
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
  /// lie in `pinned`'s registrations (the caller's, kept while the updater is). Those whose
  /// low halves and moments fit in `residentBytes` of device memory, taken in the order given,
  /// keep them there (resident): they cross in at the parameter's first update and back only
  /// when settled, so its updates cross nothing. The others cross in and back every update.
  DeviceUpdater(const HostState &state, const std::vector<int> &parameters,
                const PinnedMemory &pinned, int64_t residentBytes = 0);
  ~DeviceUpdater();
  DeviceUpdater(const DeviceUpdater &) = delete;
  DeviceUpdater &operator=(const DeviceUpdater &) = delete;

  /// The least device memory an updater of `parameters` holds, none of them resident: two
  /// pieces of state in flight (low halves and moments, 10 bytes an element) and a double for
  /// each gradient chunk's squares.
  static int64_t deviceBytesFor(const HostState &state, const std::vector<int> &parameters);

  bool updates(int p) const { return p >= 0 && p < static_cast<int>(at.size()) && at[p] >= 0; }
  /// Whether p's low halves and moments stay in device memory between settles.
  bool resident(int p) const { return updates(p) && residentState[p].data(); }
  /// How many of its parameters' elements are resident.
  int64_t residentElements() const { return residentCount; }
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
  /// halves and moments cross in and back a piece at a time, unless resident. The host's high
  /// halves of p (and a resident p's low halves and moments) are brought up to date only by
  /// settle: 10 bytes a parameter cross each way, not 12, and a resident one's none. Records
  /// `done` once the moments, low halves and targets hold the update. From one thread at a
  /// time; returns without waiting.
  void update(int p, const float *gradient, const AdamWConstants &constants, bool guarded,
              const std::vector<uint16_t *> &targets, cudaEvent_t done);
  /// Brings the high halves of the parameters updated since the last settle from their device
  /// copies into the host state, and resident ones' low halves and moments, and blocks until
  /// every update enqueued and those copies have reached it: before the state is read (a
  /// checkpoint, the run's end). Not during updates.
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
  /// Where a run of a parameter's low halves and moments lies on the device (three arrays
  /// from `base`, `span` elements apart) and in the host state (from element `first`).
  class StateParts {
  public:
    StateParts(const ParameterState &parameter, char *base, int64_t span, int64_t first);
    /// Copies n elements of each array between the device and the host state.
    void cross(const PinnedMemory &pinned, int64_t n, cudaMemcpyKind kind,
               cudaStream_t stream) const;
    uint16_t *low() const { return static_cast<uint16_t *>(parts[0].device); }
    float *m() const { return static_cast<float *>(parts[1].device); }
    float *v() const { return static_cast<float *>(parts[2].device); }

  private:
    struct Part {
      void *device, *host;
      int64_t width;
    } parts[3];
  };
  /// A resident parameter's whole state.
  StateParts residentParts(int p) const;

  const HostState &state;
  const PinnedMemory &pinned;
  std::vector<int64_t> at; // per plan parameter: its first chunk's squares, or -1
  int64_t piece = 0;       // elements a piece (pieceFor: at most kUpdatePiece)
  int64_t bytes = 0;
  DeviceAllocation squaresOnDevice, staging;
  /// Per plan parameter, its resident low halves and moments (none where it streams), and
  /// whether they have crossed in yet.
  std::vector<DeviceAllocation> residentState;
  std::vector<bool> loaded;
  int64_t residentCount = 0;
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
