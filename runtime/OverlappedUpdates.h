// The optimizer's side of a step, on a worker that may overlap the device: each update starts
// when its gradient lands on the host, or, when clipping, once every gradient is measured.
#ifndef MT_RUNTIME_OVERLAPPEDUPDATES_H
#define MT_RUNTIME_OVERLAPPEDUPDATES_H

#include "runtime/UpdateQueue.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace mt {

/// The updates of a step run on one worker while the device goes on: the rest of the
/// backward, then the next step's forward, which waits only for each parameter it is about to
/// read. Without clipping a parameter's update is queued as its gradient lands. Clipping needs
/// the global norm first: each gradient is measured as it lands instead, and the step's
/// updates are queued once the last is, scaled by clipScale of the norm; they still overlap
/// the next forward. Two steps' work may be in flight at once. A step that cannot overlap (the
/// host backend's, or several runs accumulated) hands every gradient over once it has run
/// and waits for finished.
class OverlappedUpdates {
public:
  /// What the step's work is, per rank (over several ranks, "gradient" is this rank's shard
  /// of the mean gradient). Each runs on the worker, but norm when clipping (on the thread
  /// that calls backwardDone). norm and finish never run at once: when clipping, step s+1's
  /// norm waits for its measures, which the worker runs after step s's finish; so the ranks'
  /// collectives keep one order (norm s, loss s, norm s+1, ...) on one communicator.
  struct Optimizer {
    /// AdamW of parameter p at `step` from its gradient times `clip`; returns the squared
    /// norm of the gradient as given.
    std::function<double(int p, int64_t step, float clip)> update;
    /// The squared norm of p's gradient, before any update (clipping only).
    std::function<double(int p)> measure;
    /// The global gradient norm from the sum of this rank's squares (over ranks, a collective).
    std::function<double(double squares)> norm;
    /// Optional: once a step, after its updates (over ranks, the loss's collective).
    std::function<void(int64_t step)> finish;
  };

  /// `readOrder`: every parameter, in the order a step first reads them; `maxNorm` as
  /// clipScale takes it (<= 0: no clipping). `guarded`: every gradient is measured before
  /// any update, as when clipping, and a step whose loss or gradient norm is not finite
  /// applies no update at all (skipped).
  OverlappedUpdates(Optimizer optimizer, const std::vector<int> &readOrder, double maxNorm,
                    bool guarded = false);

  /// Parameter p's gradient of `step` is in host memory. Safe from any thread, including a
  /// CUDA host callback: it only takes a lock; an unknown p, or one that lands twice, becomes
  /// the next wait's error instead of an update.
  void landed(int p, int64_t step);
  /// Every gradient of `step` has landed (else it throws, naming a parameter that has not).
  /// When clipping or guarded, waits for them to be measured, then queues the updates (none,
  /// guarded, when `loss` or the norm is not finite). Step s + 2 may begin only after
  /// finished(s): the two steps share their slots.
  void backwardDone(int64_t step, double loss = 0);
  /// Blocks until p's queued update has run: before a step reads p or overwrites its gradient.
  void waitFor(int p) { queue.waitFor(p); }
  /// Blocks until `step`'s updates and finish have run; returns its gradient norm (before
  /// clipping). Every wait rethrows the first error the worker met.
  double finished(int64_t step);
  /// Whether `step` applied no update (guarded), and then the first parameter (plan order)
  /// whose gradient is not finite, or -1 when only the loss is not.
  bool skipped(int64_t step) const { return skips[step & 1]; }
  int firstNonFinite(int64_t step) const;

private:
  void run(int item, int64_t step);

  Optimizer optimizer;
  const int parameters;
  const double maxNorm;
  const bool guarded, measureFirst; // measureFirst: clipping or guarded
  // Per step, alternating: each gradient's squares, the norm and the clip scale.
  std::vector<double> squares[2];
  std::unique_ptr<std::atomic<bool>[]> landings[2]; // per parameter: its gradient landed
  double norms[2] = {0, 0};
  float clipScales[2] = {1.0f, 1.0f};
  bool skips[2] = {false, false};
  UpdateQueue queue; // last: its worker reads the members above
};

} // namespace mt

#endif // MT_RUNTIME_OVERLAPPEDUPDATES_H
