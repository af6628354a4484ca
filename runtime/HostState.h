// The model state in host memory: fp32 master weights and AdamW's two fp32 moments, one
// contiguous array each per parameter, in the plan's parameter order.
#ifndef MT_RUNTIME_HOSTSTATE_H
#define MT_RUNTIME_HOSTSTATE_H

#include "plan/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

class HostState {
public:
  explicit HostState(const plan::Plan &plan);

  /// Initial weights from the files the plan names (relative to `planDir`), converted to fp32.
  /// Throws naming the parameter and file when bytes are missing.
  void loadInitialWeights(const std::string &planDir);
  /// Weights drawn from N(0, 0.02) for matrices, ones for vectors (norm weights) except
  /// biases (names ending in "bias"), which start at zero.
  void initializeRandomly(uint64_t seed);

  const plan::Plan &plan;
  std::vector<std::vector<float>> master, firstMoment, secondMoment;
};

} // namespace mt

#endif // MT_RUNTIME_HOSTSTATE_H
