// Checkpoints written while training goes on: writer threads move the host state to disk in
// pieces, the updates that would change a piece not yet written copy it first (or wait for
// it), and the checkpoint becomes visible atomically (a .partial folder, fsync, rename).
#ifndef MT_RUNTIME_TRAIN_CHECKPOINTWRITER_H
#define MT_RUNTIME_TRAIN_CHECKPOINTWRITER_H

#include "runtime/train/Checkpoint.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mt {

class CheckpointWriter {
public:
  /// Checkpoints under `folder` (made if missing), keeping the newest `keep`. Throws when the
  /// folder cannot be made or written.
  CheckpointWriter(const std::string &folder, int keep);
  /// Waits for a write in flight (its error, if any, is finish()'s to report).
  ~CheckpointWriter();

  /// A checkpoint whose write has ended.
  struct Written {
    int64_t step = 0;
    std::string path;
    int64_t bytes = 0;
    double seconds = 0;     // from begin to the rename
    double heldSeconds = 0; // what the updates waiting in release() lost to it
  };

  /// Starts writing `state` and `info` as folder/step-NNNNNNNN and returns once the write
  /// runs on threads of its own (a write before it must have been finished). From then on,
  /// until the write ends, whatever changes parameter p's master or moments calls release(p)
  /// first. The writers take the parameters in `updateOrder`, the order the updates will
  /// reach them; an update that reaches a parameter first copies it into up to `copyBytes`
  /// of host memory, or waits for the disk once that is spent.
  void begin(const HostState &state, const CheckpointInfo &info,
             const std::vector<int> &updateOrder, int64_t copyBytes);
  /// Returns once parameter p's part of the checkpoint in flight is written or copied (at
  /// once when none is in flight, or after the write failed). Safe from any thread.
  void release(int p);
  /// The write in flight once it has ended, without waiting (nullopt while it runs, or when
  /// none is in flight); throws its error.
  std::optional<Written> poll();
  /// Waits for the write in flight, if any; throws its error.
  std::optional<Written> finish();
  /// Whether a write has begun and not been ended by poll() or finish(): until then only
  /// what release() allows may change the state (the trainer settles device updates after).
  bool writing() { return current() != nullptr; }

  /// The copy memory `begin` takes by default: three quarters of what the host has available
  /// now (0 where the kernel does not say).
  static int64_t spareHostBytes();

private:
  struct Flight;
  std::shared_ptr<Flight> current(); // the write in flight, or null
  std::optional<Written> end(bool wait);

  std::string folder;
  int keep;
  std::mutex guard; // over `flight`, which release() reads from the update worker
  std::shared_ptr<Flight> flight;
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_CHECKPOINTWRITER_H
