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
/// the next forward. Clipping by a measuring pass (`measuringPass`) holds no gradient: the
/// step runs twice, its first run's gradients only measured as they land, its second's
/// updated as they land, scaled by the first's norm. Two steps' work may be in flight at
/// once. A step that cannot overlap (the host backend's, or several runs accumulated) hands
/// every gradient over once it has run and waits for finished.
class OverlappedUpdates {
public:
  /// What the step's work is, per rank (over several ranks, "gradient" is this rank's shard
  /// of the mean gradient). Each runs on the worker, but norm when clipping (on the thread
  /// that calls backwardDone). norm and finish never run at once: when clipping, step s+1's
  /// norm waits for its measures, which the worker runs after step s's finish; so the ranks'
  /// collectives keep one order (norm s, loss s, norm s+1, ...) on one communicator.
  struct Optimizer {
    /// AdamW of parameter p at `step` from its gradient times `clip`; returns the squared
    /// norm of the gradient as given (Gated: guarded, not finite when it held such values).
    std::function<double(int p, int64_t step, float clip)> update;
    /// The squared norm of p's gradient, before any update (clipping only).
    std::function<double(int p)> measure;
    /// The global gradient norm from the sum of this rank's squares (over ranks, a collective).
    std::function<double(double squares)> norm;
    /// Optional: once a step, after its updates (over ranks, the loss's collective).
    std::function<void(int64_t step)> finish;
  };

  /// How a step whose loss or gradients are not finite is kept out of the weights.
  enum class Guard {
    None,
    /// Every gradient is measured before any update (as when clipping): a step whose loss
    /// or gradient norm is not finite applies no update. Exact; without clipping it costs
    /// the overlap of the updates with the backward.
    Whole,
    /// The updates start as gradients land, and `update` keeps any value that is not finite
    /// out of the state (guarded AdamW); from the first gradient that held one on, no update
    /// of the step runs (with `halt`, nor of any later step, so that a run that stops keeps
    /// that state). Updates landed before it stay applied; a non-finite loss makes every
    /// gradient non-finite, the first to land included.
    Gated,
  };

  /// `readOrder`: every parameter, in the order a step first reads them; `maxNorm` as
  /// clipScale takes it (<= 0: no clipping); `measuringPass`: clipping by a measuring pass
  /// (each step's gradients land twice, beginMeasuring before the first time; Guard::Whole).
  OverlappedUpdates(Optimizer optimizer, const std::vector<int> &readOrder, double maxNorm,
                    Guard guard = Guard::None, bool halt = false, bool measuringPass = false);

  /// With a measuring pass: `step`'s gradients that land until backwardDone are measured
  /// only; those of its second pass are updated as they land.
  void beginMeasuring(int64_t step) { measuring[step & 1] = true; }

  /// Parameter p's gradient of `step` is in host memory. Safe from any thread, including a
  /// CUDA host callback: it only takes a lock; an unknown p, or one that lands twice, becomes
  /// the next wait's error instead of an update.
  void landed(int p, int64_t step);
  /// Every gradient of `step` has landed (else it throws, naming a parameter that has not).
  /// When clipping or Guard::Whole, waits for them to be measured, then queues the updates
  /// (Whole: none when `loss` or the norm is not finite). Step s + 2 may begin only after
  /// finished(s): the two steps share their slots. After a measuring pass, queues nothing and
  /// returns whether the step is to run again for its updates (false: not finite, none).
  bool backwardDone(int64_t step, double loss = 0);
  /// Blocks until p's queued update (and measure) has run: before a step reads p or
  /// overwrites its gradient.
  void waitFor(int p) {
    queue.waitFor(p);
    if (measuringPass)
      queue.waitFor(parameters + p);
  }
  /// Blocks until `step`'s updates and finish have run; returns its gradient norm (before
  /// clipping). Every wait rethrows the first error the worker met.
  double finished(int64_t step);
  /// After finished(step): whether the guard kept `step`'s updates out (all of them, or
  /// Gated, those from the first non-finite gradient on), the first parameter whose
  /// gradient was not finite (-1: the loss alone, or a halted step), and how many of its
  /// updates applied before it (Gated).
  struct Outcome {
    bool skipped = false;
    int firstNonFinite = -1;
    int applied = 0;
  };
  Outcome outcome(int64_t step) const { return settled[step & 1]; }

private:
  void run(int item, int64_t step);

  Optimizer optimizer;
  const int parameters;
  const double maxNorm;
  const Guard guard;
  const bool halt, measureFirst; // measureFirst: clipping or Guard::Whole
  const bool measuringPass;
  std::atomic<bool> measuring[2] = {false, false}; // per step: gradients of the measuring pass
  // Per step, alternating: each gradient's squares, the norm and the clip scale.
  std::vector<double> squares[2];
  std::unique_ptr<std::atomic<bool>[]> landings[2]; // per parameter: its gradient landed
  double norms[2] = {0, 0};
  float clipScales[2] = {1.0f, 1.0f};
  // Per step: what the guard did so far (the worker's), and once finished (the caller's).
  Outcome live[2], settled[2];
  bool halted = false; // Gated with halt: a non-finite step stops every later update
  UpdateQueue queue; // last: its worker reads the members above
};

} // namespace mt

#endif // MT_RUNTIME_OVERLAPPEDUPDATES_H
