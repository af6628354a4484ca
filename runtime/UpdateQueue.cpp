// The optimizer's worker thread.
#include "runtime/UpdateQueue.h"

#include <stdexcept>
#include <string>

namespace mt {

UpdateQueue::UpdateQueue(Update update, std::vector<int> need)
    : update(std::move(update)), need(std::move(need)), outstanding(this->need.size(), 0) {
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

void UpdateQueue::push(int parameter, int64_t step) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (parameter < 0 || parameter >= static_cast<int>(need.size())) {
      if (!error)
        error = std::make_exception_ptr(std::out_of_range(
            "update queued for parameter " + std::to_string(parameter) + " of " +
            std::to_string(need.size())));
      finished.notify_all();
      return;
    }
    pending.emplace(step, need[parameter], parameter);
    ++outstanding[parameter];
  }
  queued.notify_one();
}

void UpdateQueue::rethrow() {
  if (!error)
    return;
  std::exception_ptr thrown = error;
  error = nullptr;
  std::rethrow_exception(thrown);
}

void UpdateQueue::waitFor(int parameter) {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return outstanding.at(parameter) == 0 || error; });
  rethrow();
}

void UpdateQueue::waitStep(int64_t step, int64_t count) {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return done[step] >= count || error; });
  rethrow();
  done.erase(step);
}

void UpdateQueue::work() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    queued.wait(lock, [&] { return stopping || !pending.empty(); });
    if (stopping) // a run that ends early drops what it queued
      return;
    auto [step, place, parameter] = *pending.begin();
    pending.erase(pending.begin());
    lock.unlock();
    std::exception_ptr thrown;
    try {
      update(parameter, step);
    } catch (...) {
      thrown = std::current_exception();
    }
    lock.lock();
    --outstanding[parameter];
    ++done[step];
    if (thrown && !error)
      error = thrown;
    finished.notify_all();
  }
}

} // namespace mt
