// The processes of a data-parallel run over GPUs.
#include "runtime/cuda/Launcher.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "runtime/parallel/Rendezvous.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

namespace mt {

namespace {

/// This process as the rank a launcher started.
int joinLaunched(const RankBody &body) {
  LaunchEnvironment launched = launchEnvironment();
  std::vector<char> id(sizeof(ncclUniqueId));
  if (launched.rank == 0) {
    ncclUniqueId made = cuda::newNcclGroup();
    std::memcpy(id.data(), &made, sizeof made);
  }
  id = shareFromRankZero(launched, id);
  ncclUniqueId group;
  std::memcpy(&group, id.data(), sizeof group);
  MT_CUDA_CHECK(cudaSetDevice(launched.localRank));
  return body(launched.rank, launched.worldSize, &group);
}

} // namespace

int launchRanks(int ranks, const RankBody &body) {
  if (ranks == 0)
    return joinLaunched(body);
  ncclUniqueId group = cuda::newNcclGroup();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> children;
  // A rank that fails leaves the others waiting in NCCL: stop them all.
  auto stopAll = [&] {
    for (pid_t child : children)
      kill(child, SIGTERM);
  };
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t child = fork();
    if (child < 0) {
      std::perror("mt-run: fork");
      stopAll();
      for (pid_t started : children)
        waitpid(started, nullptr, 0);
      return 1;
    }
    if (child == 0) {
      int code = 1;
      try {
        MT_CUDA_CHECK(cudaSetDevice(rank));
        code = body(rank, ranks, &group);
      } catch (const std::exception &error) {
        std::fprintf(stderr, "mt-run: rank %d: %s\n", rank, error.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    children.push_back(child);
  }
  int worst = 0;
  for (size_t left = children.size(); left > 0; --left) {
    int status = 0;
    pid_t done = waitpid(-1, &status, 0);
    int rank =
        static_cast<int>(std::find(children.begin(), children.end(), done) - children.begin());
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && worst == 0) {
      std::fprintf(stderr, "mt-run: rank %d exited with %d; stopping the others\n", rank, code);
      stopAll();
    }
    worst = std::max(worst, code);
  }
  return worst;
}

} // namespace mt
