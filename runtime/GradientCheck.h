// Checks a plan's backward against central finite differences of its loss, in fp64 on the
// host backend: the test that every op's gradient rule and kernel agree with its forward.
#ifndef MT_RUNTIME_GRADIENTCHECK_H
#define MT_RUNTIME_GRADIENTCHECK_H

#include "plan/plan.pb.h"

#include <cstdint>
#include <string>

namespace mt {

struct GradientCheckResult {
  int64_t checked = 0;          // parameter elements compared
  double worstError = 0;        // max |analytic - numeric| / max(1, |numeric|)
  std::string worstElement;     // "name[index]: analytic a, numeric n"
};

/// Draws every parameter from N(0, 1) and integer inputs from {0, 1} (valid indices for any
/// table of two rows or more), then compares up to `samples` elements of each parameter's
/// gradient with (loss(p + h) - loss(p - h)) / 2h.
GradientCheckResult checkGradients(const plan::Plan &plan, uint64_t seed, int64_t samples);

} // namespace mt

#endif // MT_RUNTIME_GRADIENTCHECK_H
