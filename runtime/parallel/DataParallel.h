// One rank of data-parallel training with ZeRO-style sharded optimizer state: the rank runs
// the step on its own batch with full weights, the gradients are averaged over the ranks and
// scattered so that each rank holds the mean of its shard of every parameter, the rank
// updates the fp32 masters and AdamW moments of that shard only (1/N of the state), and the
// updated shards are gathered into every rank's weights for the next step.
#ifndef MT_RUNTIME_PARALLEL_DATAPARALLEL_H
#define MT_RUNTIME_PARALLEL_DATAPARALLEL_H

#include "plan/plan.pb.h"
#include "runtime/host/Executor.h"
#include "runtime/parallel/Communicator.h"

#include <map>
#include <regex>
#include <string>
#include <vector>

namespace mt {

class DataParallelRank {
public:
  /// `initial` holds every parameter's starting weights (the same on every rank).
  DataParallelRank(const plan::Plan &plan, Communicator &communicator,
                   const std::vector<const float *> &initial);

  struct Result {
    double loss;     // the mean over the ranks
    double gradNorm; // of the averaged gradients, before clipping
  };
  /// One optimizer step (from 1) on this rank's inputs, with the host backend.
  Result step(const std::map<std::string, std::vector<int64_t>> &inputs, int64_t step,
              double lr, const std::regex &noDecay);

  const std::vector<std::vector<float>> &weights() const { return full; }
  /// Bytes of optimizer state (masters and moments of this rank's shards).
  int64_t stateBytes() const;

private:
  const plan::Plan &plan;
  Communicator &communicator;
  host::Executor<float> executor;
  std::vector<std::vector<float>> full;               // every parameter, for the forward
  std::vector<std::vector<float>> master, first, second; // this rank's shards
};

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_DATAPARALLEL_H
