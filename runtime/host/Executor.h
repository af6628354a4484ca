// Runs a plan's step program on the CPU: values materialized on demand, commands in order,
// each intermediate freed after its last use.
#ifndef MT_RUNTIME_HOST_EXECUTOR_H
#define MT_RUNTIME_HOST_EXECUTOR_H

#include "plan/plan.pb.h"
#include "runtime/host/HostTensor.h"

#include <map>
#include <string>
#include <vector>

namespace mt::host {

/// What one step produces: the loss and one gradient per plan parameter (row-major, in the
/// executor's precision).
template <typename T>
struct StepResult {
  double loss = 0;
  std::vector<std::vector<T>> gradients;
};

template <typename T>
class Executor {
public:
  explicit Executor(const plan::Plan &plan);

  /// Runs the step with `parameters` (one row-major array per plan parameter) and named
  /// integer inputs ("input_ids", "targets").
  StepResult<T> run(const std::vector<const T *> &parameters,
                    const std::map<std::string, std::vector<int64_t>> &inputs) const;

private:
  const plan::Plan &plan;
  /// For each value, the index of the last command reading it (-1: none); the loss and the
  /// gradients are read after the last command.
  std::vector<int> lastUse;
};

extern template class Executor<float>;
extern template class Executor<double>;

} // namespace mt::host

#endif // MT_RUNTIME_HOST_EXECUTOR_H
