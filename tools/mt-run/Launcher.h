// mt-run --nproc-per-node N: one process per GPU of this host, joined in one NCCL group.
#ifndef MT_TOOLS_MT_RUN_LAUNCHER_H
#define MT_TOOLS_MT_RUN_LAUNCHER_H

#include <nccl.h>

#include <functional>

namespace mt {

/// Makes an NCCL group, forks `ranks` processes that each run body(rank, group) on GPU
/// `rank` and exit with its result, and returns the worst exit code (naming failed ranks).
/// It must run before this process touches CUDA: a forked child cannot use a parent's CUDA.
int launchRanks(int ranks, const std::function<int(int rank, const ncclUniqueId &group)> &body);

} // namespace mt

#endif // MT_TOOLS_MT_RUN_LAUNCHER_H
