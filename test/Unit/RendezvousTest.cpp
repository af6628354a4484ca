// Unit test of the rendezvous of data-parallel processes: four processes on this host get
// rank 0's bytes over TCP, a rank that comes up before rank 0 waits for it, and the launcher
// variables (torchrun's, OpenMPI's) are read or refused with the variable named.
#include "runtime/parallel/Rendezvous.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

int main() {
  int failures = 0;
  mt::LaunchEnvironment world;
  world.worldSize = 4;
  world.port = 20000 + getpid() % 20000;
  std::vector<char> secret(128);
  for (size_t i = 0; i < secret.size(); ++i)
    secret[i] = static_cast<char>(i * 37 + 11);
  for (int rank = 1; rank < world.worldSize; ++rank)
    if (fork() == 0) {
      mt::LaunchEnvironment own = world;
      own.rank = rank;
      std::vector<char> got;
      try {
        got = mt::shareFromRankZero(own, {}, 20);
      } catch (const std::exception &error) {
        std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
      }
      _exit(got == secret ? 0 : 1);
    }
  // Rank 0 comes up last: the others must wait for it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  mt::shareFromRankZero(world, secret);
  for (int rank = 1; rank < world.worldSize; ++rank) {
    int status = 0;
    wait(&status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("FAIL: a rank did not receive rank 0's bytes\n");
      ++failures;
    }
  }
  std::printf("4 processes share rank 0's 128 bytes\n");

  setenv("WORLD_SIZE", "8", 1);
  setenv("RANK", "5", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("MASTER_ADDR", "10.0.0.2", 1);
  setenv("MASTER_PORT", "1234", 1);
  mt::LaunchEnvironment torchrun = mt::launchEnvironment();
  if (torchrun.worldSize != 8 || torchrun.rank != 5 || torchrun.localRank != 1 ||
      torchrun.address != "10.0.0.2" || torchrun.port != 1234) {
    std::printf("FAIL: torchrun's variables misread\n");
    ++failures;
  }
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  mt::LaunchEnvironment mpi = mt::launchEnvironment();
  if (mpi.worldSize != 2 || mpi.rank != 1 || mpi.localRank != 1) {
    std::printf("FAIL: OpenMPI's variables misread\n");
    ++failures;
  }
  std::printf("launcher variables read (torchrun, OpenMPI)\n");
  setenv("OMPI_COMM_WORLD_RANK", "two", 1);
  try {
    mt::launchEnvironment();
    std::printf("FAIL: a malformed rank was accepted\n");
    ++failures;
  } catch (const std::runtime_error &error) {
    std::printf("%s\n", error.what());
  }
  return failures == 0 ? 0 : 1;
}
