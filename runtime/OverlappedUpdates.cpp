// Overlapped updates: the queue's items are parameter p's update (p), its gradient's measure
// when clipping or guarded (P + p), and the step's end (2P).
#include "runtime/OverlappedUpdates.h"

#include "runtime/AdamW.h"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace mt {

namespace {

/// The queue's order within a step: the updates as the next forward reads the parameters,
/// the measures as the backward's gradients land (the reverse), then the step's end.
std::vector<int> needOf(const std::vector<int> &readOrder) {
  const int P = static_cast<int>(readOrder.size());
  std::vector<int> need(2 * P + 1);
  for (int place = 0; place < P; ++place) {
    need[readOrder[place]] = place;
    need[P + readOrder[place]] = 2 * P - 1 - place;
  }
  need[2 * P] = 2 * P;
  return need;
}

} // namespace

OverlappedUpdates::OverlappedUpdates(Optimizer optimizer, const std::vector<int> &readOrder,
                                     double maxNorm, Guard guard, bool halt, bool measuringPass)
    : optimizer(std::move(optimizer)), parameters(static_cast<int>(readOrder.size())),
      maxNorm(maxNorm), guard(guard), halt(halt),
      measureFirst(maxNorm > 0 || guard == Guard::Whole),
      measuringPass(measuringPass), squares{std::vector<double>(readOrder.size(), 0.0),
                                            std::vector<double>(readOrder.size(), 0.0)},
      landings{std::make_unique<std::atomic<bool>[]>(readOrder.size()),
               std::make_unique<std::atomic<bool>[]>(readOrder.size())},
      queue([this](int item, int64_t step) { run(item, step); }, needOf(readOrder)) {}

void OverlappedUpdates::run(int item, int64_t step) {
  const int P = parameters;
  std::vector<double> &stepSquares = squares[step & 1];
  Outcome &outcome = live[step & 1];
  if (item < P) {
    if (guard == Guard::Gated) {
      // After a gradient that was not finite, no update of the step runs (halted: of any
      // later step). That gradient's own update (guarded AdamW) left the chunks holding such
      // values as they were.
      if (outcome.skipped || halted) {
        outcome.skipped = true;
        stepSquares[item] = NAN;
        return;
      }
      double itemSquares = optimizer.update(item, step, clipScales[step & 1]);
      stepSquares[item] = itemSquares;
      if (std::isfinite(itemSquares)) {
        ++outcome.applied;
      } else {
        outcome.skipped = true;
        outcome.firstNonFinite = item;
        halted = halt;
      }
      return;
    }
    double itemSquares = optimizer.update(item, step, clipScales[step & 1]);
    if (!measureFirst)
      stepSquares[item] = itemSquares;
  } else if (item < 2 * P) {
    stepSquares[item - P] = optimizer.measure(item - P);
  } else {
    if (!measureFirst)
      norms[step & 1] =
          optimizer.norm(std::accumulate(stepSquares.begin(), stepSquares.end(), 0.0));
    if (optimizer.finish)
      optimizer.finish(step);
  }
}

void OverlappedUpdates::landed(int p, int64_t step) {
  // The queue turns an item it does not know into its error: -1 for an unknown parameter or
  // a second landing.
  bool first = p >= 0 && p < parameters && !landings[step & 1][p].exchange(true);
  bool measure = measuringPass ? measuring[step & 1].load() : measureFirst;
  queue.push(!first ? -1 : measure ? parameters + p : p, step);
}

bool OverlappedUpdates::backwardDone(int64_t step, double loss) {
  std::atomic<bool> *landed = landings[step & 1].get();
  for (int p = 0; p < parameters; ++p)
    if (!landed[p])
      throw std::logic_error("step " + std::to_string(step) + " ended without parameter " +
                             std::to_string(p) + "'s gradient");
  for (int p = 0; p < parameters; ++p)
    landed[p] = false;
  // The updating pass of a measured step: its updates were queued as its gradients landed.
  const bool updatingPass = measuringPass && !measuring[step & 1];
  if (measureFirst && !updatingPass) {
    queue.waitStep(step, parameters); // the measures
    const std::vector<double> &stepSquares = squares[step & 1];
    norms[step & 1] =
        optimizer.norm(std::accumulate(stepSquares.begin(), stepSquares.end(), 0.0));
    clipScales[step & 1] = clipScale(norms[step & 1], maxNorm);
    Outcome &outcome = live[step & 1];
    if (guard == Guard::Whole && !(std::isfinite(norms[step & 1]) && std::isfinite(loss))) {
      outcome.skipped = true;
      for (int p = 0; p < parameters && outcome.firstNonFinite < 0; ++p)
        if (!std::isfinite(stepSquares[p]))
          outcome.firstNonFinite = p;
    }
    if (measuringPass) {
      measuring[step & 1] = false;
      if (!outcome.skipped)
        return true;
    } else if (!outcome.skipped) {
      for (int p = 0; p < parameters; ++p)
        queue.push(p, step);
    }
  }
  queue.push(2 * parameters, step);
  return false;
}

double OverlappedUpdates::finished(int64_t step) {
  Outcome &outcome = live[step & 1];
  bool none = guard == Guard::Whole && outcome.skipped; // no update was queued
  queue.waitStep(step, none ? 1 : parameters + 1);
  // The slot is step + 2's from now on.
  settled[step & 1] = outcome;
  outcome = Outcome{};
  return norms[step & 1];
}

} // namespace mt
