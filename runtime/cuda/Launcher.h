// The processes of a data-parallel run over GPUs, one NCCL group: forked here, one a GPU of
// this host (mt-run --nproc-per-node), or started by a launcher (torchrun, mpirun).
#ifndef MT_RUNTIME_CUDA_LAUNCHER_H
#define MT_RUNTIME_CUDA_LAUNCHER_H

#include "runtime/train/StepBackend.h"

namespace mt {

/// processes > 0: makes an NCCL group, forks `processes` children that each run
/// body(rank, processes, &group) on GPU `rank` and exit with its result, and returns the
/// worst exit code (naming failed ranks); it must run before this process touches CUDA (a
/// forked child cannot use a parent's CUDA). processes == 0: this process is the rank the
/// launcher's variables name (launchEnvironment), on GPU LOCAL_RANK; rank 0 makes the group
/// and hands it to the others (shareFromRankZero) before body runs.
int launchRanks(int processes, const RankBody &body);

} // namespace mt

#endif // MT_RUNTIME_CUDA_LAUNCHER_H
