// A fixed pool of worker threads, one per core, fed one parallel loop at a time.
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace mt {

namespace {

class ThreadPool {
public:
  ThreadPool() {
    int64_t workers = std::max<int64_t>(1, std::thread::hardware_concurrency()) - 1;
    for (int64_t w = 0; w < workers; ++w)
      threads.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread &thread : threads)
      thread.join();
  }

  int64_t size() const { return static_cast<int64_t>(threads.size()) + 1; }

  void run(int64_t parts, const std::function<void(int64_t)> &body) {
    // One loop at a time; a loop started from inside one runs on its caller alone.
    std::unique_lock<std::mutex> busy(running, std::try_to_lock);
    if (!busy.owns_lock() || parts <= 1 || threads.empty()) {
      for (int64_t part = 0; part < parts; ++part)
        body(part);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      task = &body;
      total = parts;
      next = 0;
      pending = parts;
      ++generation;
    }
    wake.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
    task = nullptr;
  }

private:
  /// Takes parts until none is left.
  void drain() {
    while (true) {
      int64_t part = next.fetch_add(1);
      if (part >= total)
        return;
      (*task)(part);
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0)
        done.notify_one();
    }
  }

  void work() {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping)
          return;
        seen = generation;
      }
      drain();
    }
  }

  std::vector<std::thread> threads;
  std::mutex mutex, running;
  std::condition_variable wake, done;
  const std::function<void(int64_t)> *task = nullptr;
  int64_t total = 0, pending = 0;
  std::atomic<int64_t> next{0};
  uint64_t generation = 0;
  bool stopping = false;
};

ThreadPool &pool() {
  static ThreadPool instance;
  return instance;
}

} // namespace

void runParallel(int64_t parts, const std::function<void(int64_t)> &body) {
  pool().run(parts, body);
}

int64_t parallelism() { return pool().size(); }

} // namespace mt
