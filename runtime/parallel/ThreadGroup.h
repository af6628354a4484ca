// Ranks as threads of one process, sharing memory: the collectives of Communicator done by
// reading each other's buffers between barriers. It runs the data-parallel math on the host
// backend (CI has no GPU) exactly as N processes would.
#ifndef MT_RUNTIME_PARALLEL_THREADGROUP_H
#define MT_RUNTIME_PARALLEL_THREADGROUP_H

#include "runtime/parallel/Communicator.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace mt {

class ThreadGroup {
public:
  explicit ThreadGroup(int size);
  ~ThreadGroup();
  /// Rank `rank`'s end of the group; each rank's thread uses only its own.
  Communicator &member(int rank);
  /// Called by a rank that failed: every rank waiting in a collective, now or later, throws
  /// instead of waiting for it forever.
  void abort();

private:
  class Member;
  friend class Member;
  /// Blocks until every rank has arrived.
  void barrier();

  int size;
  std::vector<std::unique_ptr<Member>> members;
  std::vector<float *> buffers; // what each rank published for the running collective
  std::vector<double> values;
  std::mutex mutex;
  std::condition_variable arrived;
  int waiting = 0;
  bool aborted = false;
  uint64_t generation = 0;
};

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_THREADGROUP_H
