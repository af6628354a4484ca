// Optimizer updates that start as soon as a parameter's gradient is on the host, on a worker
// thread, while the device computes the rest of the backward: the CPU AdamW of layer L
// overlaps the backward of the layers before it.
#ifndef MT_RUNTIME_UPDATEQUEUE_H
#define MT_RUNTIME_UPDATEQUEUE_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace mt {

class UpdateQueue {
public:
  using Update = std::function<void(int parameter)>;
  explicit UpdateQueue(Update update);
  ~UpdateQueue();
  UpdateQueue(const UpdateQueue &) = delete;
  UpdateQueue &operator=(const UpdateQueue &) = delete;

  /// Queues parameter's update. Safe from any thread, including a CUDA host callback: it
  /// only takes a lock.
  void push(int parameter);
  /// Blocks until `count` updates have run since the last wait, and rethrows the first
  /// error an update threw. Destroying the queue finishes the running update and drops the
  /// queued ones.
  void wait(int64_t count);

private:
  void work();

  Update update;
  std::mutex mutex;
  std::condition_variable queued, finished;
  std::deque<int> pending;
  int64_t done = 0;
  bool stopping = false;
  std::exception_ptr error;
  std::thread worker;
};

} // namespace mt

#endif // MT_RUNTIME_UPDATEQUEUE_H
