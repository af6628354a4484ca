// Unit test of the non-finite guard of the overlapped updates (runtime/OverlappedUpdates):
// which updates of a step with a gradient that is not finite reach the weights, Whole and
// Gated, and whether a later step's do (Gated, with and without halt).
#include "runtime/OverlappedUpdates.h"
#include "test/Unit/Expect.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using mt::test::check;
using mt::test::failures;

constexpr int kParameters = 4;

/// Runs steps 1 and 2 of four parameters whose gradients land last-read first (3, 2, 1, 0);
/// in step 1 parameter 2's is NaN. Returns the updates run, as "step:parameter" (Gated runs
/// the NaN gradient's own, which guarded AdamW keeps out of the state).
std::vector<std::string> run(mt::OverlappedUpdates::Guard guard, bool halt,
                             mt::OverlappedUpdates::Outcome outcomes[2]) {
  std::vector<std::string> applied;
  mt::OverlappedUpdates::Optimizer optimizer;
  int64_t current = 1;
  auto squares = [&](int p) { return current == 1 && p == 2 ? NAN : 1.0; };
  optimizer.update = [&](int p, int64_t step, float) {
    applied.push_back(std::to_string(step) + ":" + std::to_string(p));
    return squares(p);
  };
  optimizer.measure = squares;
  optimizer.norm = [](double s) { return std::sqrt(s); };
  mt::OverlappedUpdates updates(optimizer, {0, 1, 2, 3}, /*maxNorm=*/0, guard, halt);
  for (int64_t step = 1; step <= 2; ++step) {
    current = step;
    for (int p = kParameters - 1; p >= 0; --p) {
      updates.landed(p, step);
      if (guard == mt::OverlappedUpdates::Guard::Gated)
        updates.waitFor(p); // each lands after the last's update ran: the order is fixed
    }
    updates.backwardDone(step, 1.0);
    updates.finished(step);
    outcomes[step - 1] = updates.outcome(step);
  }
  return applied;
}

std::string join(const std::vector<std::string> &items) {
  std::string text;
  for (const std::string &item : items)
    text += (text.empty() ? "" : " ") + item;
  return text;
}

} // namespace

int main() {
  using Guard = mt::OverlappedUpdates::Guard;
  mt::OverlappedUpdates::Outcome outcomes[2];

  std::string whole = join(run(Guard::Whole, false, outcomes));
  check(whole == "2:0 2:1 2:2 2:3", "Whole applied " + whole);
  check(outcomes[0].skipped && outcomes[0].firstNonFinite == 2 && outcomes[0].applied == 0 &&
            !outcomes[1].skipped,
        "Whole's outcomes");
  std::printf("whole: no update of the step with a NaN gradient, every update of the next\n");

  std::string gated = join(run(Guard::Gated, false, outcomes));
  check(gated == "1:3 1:2 2:3 2:2 2:1 2:0", "Gated applied " + gated);
  check(outcomes[0].skipped && outcomes[0].firstNonFinite == 2 && outcomes[0].applied == 1 &&
            !outcomes[1].skipped,
        "Gated's outcomes");
  std::printf("gated: the update landed before the NaN gradient applied, the NaN gradient's "
              "own (guarded), none after it, every update of the next step\n");

  std::string halted = join(run(Guard::Gated, true, outcomes));
  check(halted == "1:3 1:2", "Gated with halt applied " + halted);
  check(outcomes[0].skipped && outcomes[1].skipped && outcomes[1].firstNonFinite == -1,
        "halted outcomes");
  std::printf("gated with halt: no update after the NaN gradient's, in any later step\n");
  return failures ? 1 : 0;
}
