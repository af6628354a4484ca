// How the processes of a data-parallel run meet: rank 0 hands a few bytes (NCCL's group id)
// to every other rank over TCP at MASTER_ADDR:MASTER_PORT, as torchrun's variables name them.
#ifndef MT_RUNTIME_PARALLEL_RENDEZVOUS_H
#define MT_RUNTIME_PARALLEL_RENDEZVOUS_H

#include <string>
#include <vector>

namespace mt {

/// Where this process stands in a run started by a launcher: RANK, WORLD_SIZE, LOCAL_RANK
/// (torchrun) or OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (OpenMPI's mpirun), with
/// MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500).
struct LaunchEnvironment {
  int rank = 0, worldSize = 1, localRank = 0;
  std::string address = "127.0.0.1";
  int port = 29500;
};

/// The launcher's variables, or a world of one when there are none; throws naming a
/// variable that is malformed.
LaunchEnvironment launchEnvironment();

/// Rank 0 serves `bytes` to the other worldSize - 1 ranks and returns them; the others
/// connect (retrying for `timeoutSeconds`) and return what they received. Throws with the
/// address and the system's reason when it cannot.
std::vector<char> shareFromRankZero(const LaunchEnvironment &environment,
                                    std::vector<char> bytes, int timeoutSeconds = 60);

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_RENDEZVOUS_H
