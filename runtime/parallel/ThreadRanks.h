// Data parallel over threads of this process (mt-run --ranks): each rank a host executor, its
// own host state (the moments of its shards) and a DataParallelRank over a ThreadGroup, as
// processes would hold them; N ranks see what one rank with N times the batch sees.
#ifndef MT_RUNTIME_PARALLEL_THREADRANKS_H
#define MT_RUNTIME_PARALLEL_THREADRANKS_H

#include "runtime/host/Executor.h"
#include "runtime/parallel/DataParallel.h"
#include "runtime/parallel/ThreadGroup.h"

#include <memory>
#include <vector>

namespace mt {

class ThreadRanks {
public:
  /// Every rank starts from `start`'s masters and takes its shards of `start`'s moments
  /// (zero for a new run, a checkpoint's when resumed).
  ThreadRanks(const plan::Plan &plan, const HostState &start, int ranks);

  int size() const { return static_cast<int>(ranks.size()); }
  /// One optimizer step, inputs[r] rank r's batch: every rank's backward, collectives and
  /// update of its shards on its own thread. The first rank to fail stops the others' waits
  /// and its error is thrown.
  DataParallelRank::Result step(const std::vector<DataParallelRank::Inputs> &inputs, int64_t step,
                                double lr, const std::vector<WeightDecay> &decays);
  /// Copies the gathered weights (the same on every rank) into `state`'s masters.
  void copyMasters(HostState &state) const;
  /// Copies the masters and every rank's shards of the moments into `state` (whole): the
  /// state one rank would hold, which a checkpoint writes, so that a checkpoint does not
  /// depend on the ranks that wrote it.
  void gatherInto(HostState &state) const;
  /// Rank 0's host state.
  int64_t rankBytes() const { return states.front()->bytes(); }

private:
  host::Executor<float> executor;
  ThreadGroup group;
  std::vector<std::unique_ptr<HostState>> states;
  std::vector<std::vector<std::vector<float>>> gradients; // each rank's last backward's
  std::vector<std::unique_ptr<DataParallelRank>> ranks;
};

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_THREADRANKS_H
