// Unit test of the host's worker threads (runtime/ThreadPool): every part of a loop runs once,
// a part that throws reaches the caller as its exception once no part is running, and the pool
// runs the next loop as before.
#include "runtime/ThreadPool.h"

#include "test/Unit/Expect.h"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using mt::test::check;
using mt::test::failures;

int main() {
  const int64_t parts = 4 * mt::parallelism() + 3;
  std::vector<std::atomic<int>> runs(parts);
  mt::runParallel(parts, [&](int64_t part) { runs[part].fetch_add(1); });
  bool once = true;
  for (const std::atomic<int> &count : runs)
    once = once && count.load() == 1;
  check(once, "a loop ran some part other than once");
  std::printf("%lld parts over %lld threads: each ran once\n", static_cast<long long>(parts),
              static_cast<long long>(mt::parallelism()));

  // Parts that throw, on the workers and on the caller alike: the caller gets the first
  // exception only after the parts still running have ended (they read the loop's state).
  std::atomic<int> running{0}, runningAtThrow{-1};
  std::string caught;
  try {
    mt::runParallel(parts, [&](int64_t part) {
      running.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      running.fetch_sub(1);
      if (part % 3 == 1)
        throw std::runtime_error("part " + std::to_string(part) + " failed");
    });
  } catch (const std::runtime_error &error) {
    caught = error.what();
    runningAtThrow = running.load();
  }
  check(caught.rfind("part ", 0) == 0 && caught.find(" failed") != std::string::npos,
        "a part's exception did not reach the caller: '" + caught + "'");
  check(runningAtThrow.load() == 0, "the caller got the exception while " +
                                        std::to_string(runningAtThrow.load()) + " parts still ran");
  std::printf("a part that threw: its exception reached the caller once no part ran\n");

  std::atomic<int64_t> sum{0};
  mt::runParallel(parts, [&](int64_t part) { sum.fetch_add(part); });
  check(sum.load() == parts * (parts - 1) / 2, "the loop after a failed one lost parts");
  std::printf("the next loop: every part ran\n");
  return failures ? 1 : 0;
}
