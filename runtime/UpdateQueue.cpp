// The optimizer's worker thread.
#include "runtime/UpdateQueue.h"

namespace mt {

UpdateQueue::UpdateQueue(Update update) : update(std::move(update)) {
  worker = std::thread([this] { work(); });
}

UpdateQueue::~UpdateQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_all();
  worker.join();
}

void UpdateQueue::push(int parameter) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    pending.push_back(parameter);
  }
  queued.notify_one();
}

void UpdateQueue::wait(int64_t count) {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return done >= count || error; });
  done = error ? 0 : done - count;
  if (error) {
    std::exception_ptr thrown = error;
    error = nullptr;
    std::rethrow_exception(thrown);
  }
}

void UpdateQueue::work() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    queued.wait(lock, [&] { return stopping || !pending.empty(); });
    if (stopping) // a run that ends early drops what it queued
      return;
    int parameter = pending.front();
    pending.pop_front();
    lock.unlock();
    std::exception_ptr thrown;
    try {
      update(parameter);
    } catch (...) {
      thrown = std::current_exception();
    }
    lock.lock();
    ++done;
    if (thrown && !error)
      error = thrown;
    finished.notify_all();
  }
}

} // namespace mt
