// A fixed pool of worker threads, one per core, fed one parallel loop at a time.
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mt {

namespace {

/// How long an idle worker watches for the next loop before it sleeps.
constexpr std::chrono::microseconds kWatch{50};
/// The most parts a loop spreads over the workers (a count fits 32 bits).
constexpr int64_t kMaxParts = (int64_t{1} << 31) - 1;

/// Whether this thread is the caller of the pool's loop now running (it holds `running`).
thread_local bool callingLoop = false;

/// Yields until `ready` holds or kWatch has passed; whether it holds.
template <typename Ready> bool watch(Ready ready) {
  auto until = std::chrono::steady_clock::now() + kWatch;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::yield();
  }
  return true;
}

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
    // One loop at a time: a loop started from inside one (by its caller or a worker), or
    // beside one, runs on its caller alone.
    std::unique_lock<std::mutex> busy;
    if (!callingLoop)
      busy = std::unique_lock<std::mutex>(running, std::try_to_lock);
    if (!busy.owns_lock() || parts <= 1 || parts > kMaxParts || threads.empty()) {
      for (int64_t part = 0; part < parts; ++part)
        body(part);
      return;
    }
    callingLoop = true;
    struct Called {
      ~Called() { callingLoop = false; }
    } called;
    {
      // What a worker reads once `cursor` hands it a part is written before it: a worker still
      // draining the loop before may take a part of this one, with this one's task.
      std::lock_guard<std::mutex> lock(mutex);
      task = &body;
      pending.store(parts, std::memory_order_relaxed);
      cursor.store(static_cast<uint64_t>(parts) << 32);
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    drain();
    auto finished = [&] { return pending.load(std::memory_order_acquire) == 0; };
    if (!watch(finished)) {
      std::unique_lock<std::mutex> lock(mutex);
      done.wait(lock, finished);
    }
    task = nullptr;
    // A part that threw: rethrown here once every part has run, none still reading `body`.
    std::exception_ptr thrown;
    {
      std::lock_guard<std::mutex> lock(mutex);
      std::swap(thrown, error);
    }
    if (thrown)
      std::rethrow_exception(thrown);
  }

private:
  /// Takes parts until none is left; the last part's worker wakes the loop's caller.
  void drain() {
    while (true) {
      uint64_t taken = cursor.fetch_add(1);
      int64_t part = static_cast<int64_t>(taken & 0xffffffffu);
      if (part >= static_cast<int64_t>(taken >> 32))
        return;
      try {
        (*task)(part);
      } catch (...) { // the first error of the loop, for its caller
        std::lock_guard<std::mutex> lock(mutex);
        if (!error)
          error = std::current_exception();
      }
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        done.notify_one();
      }
    }
  }

  void work() {
    uint64_t seen = 0;
    while (true) {
      // Loops often come back to back (an update's chunks as they are pulled): a worker
      // watches for the next one a while before it sleeps, so it joins without a wake-up
      // through the mutex, which 15 sleepers would take in turn.
      if (!watch([&] { return generation.load(std::memory_order_acquire) != seen; })) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation.load() != seen; });
        if (stopping)
          return;
      }
      seen = generation.load(std::memory_order_acquire);
      drain();
    }
  }

  std::vector<std::thread> threads;
  std::mutex mutex, running;
  std::condition_variable wake, done;
  const std::function<void(int64_t)> *task = nullptr;
  std::exception_ptr error; // the loop's first, under `mutex`
  /// The loop's next part (low 32 bits) and its count (high 32), in one word, so that a
  /// part taken is always measured against its own loop's count.
  std::atomic<uint64_t> cursor{0};
  std::atomic<int64_t> pending{0};
  std::atomic<uint64_t> generation{0};
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
