// Optimizer updates that start as soon as a parameter's gradient is on the host, on a worker
// thread, while the device computes the rest of the backward; the next step waits only for
// the parameters it is about to read, so the last updates overlap its forward.
#ifndef MT_RUNTIME_UPDATEQUEUE_H
#define MT_RUNTIME_UPDATEQUEUE_H

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

namespace mt {

class UpdateQueue {
public:
  /// Runs item `parameter` of step `step`: a parameter's update, or another piece of the
  /// optimizer's work (OverlappedUpdates numbers them past the parameters).
  using Update = std::function<void(int parameter, int64_t step)>;
  /// `need[p]` is item p's place in the order a step first reads the parameters. Queued
  /// items run oldest step first, then in that order: the backward hands gradients over
  /// last layer first, but the next forward needs the first layer first.
  UpdateQueue(Update update, std::vector<int> need);
  ~UpdateQueue();
  UpdateQueue(const UpdateQueue &) = delete;
  UpdateQueue &operator=(const UpdateQueue &) = delete;

  /// Queues parameter's update of `step`. Safe from any thread, including a CUDA host
  /// callback: it only takes a lock.
  void push(int parameter, int64_t step);
  /// Blocks until every queued update of `parameter` has run. Rethrows the first error an
  /// update threw, as both waits do.
  void waitFor(int parameter);
  /// Blocks until `count` updates of `step` have run since the last waitStep of `step`, which
  /// forgets those it counted.
  void waitStep(int64_t step, int64_t count);

private:
  void work();
  void rethrow(); // with the lock held

  Update update;
  std::vector<int> need;
  std::mutex mutex;
  std::condition_variable queued, finished;
  std::set<std::tuple<int64_t, int, int>> pending; // step, need, parameter
  std::vector<int> outstanding;                    // per parameter: queued or running
  std::map<int64_t, int64_t> done;                 // updates run, per step
  bool stopping = false;
  std::exception_ptr error;
  std::thread worker;
};

} // namespace mt

#endif // MT_RUNTIME_UPDATEQUEUE_H
