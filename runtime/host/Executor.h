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
  /// Runs `program` with its inputs given by `inputs` (Program.inputs order, not owned) and
  /// returns the values `outputs` names.
  std::vector<HostTensor<T>> execute(const plan::Program &program,
                                     const std::vector<int> &lastUse,
                                     const std::vector<const HostTensor<T> *> &inputs,
                                     const std::vector<const T *> &parameters,
                                     const std::vector<int> &outputs) const;

  const plan::Plan &plan;
  std::vector<int> stepOutputs;
  /// Per value, the index of the last command reading it (-1: none; the command count when
  /// it is an output), for the step and for each template.
  std::vector<int> stepLastUse;
  std::vector<std::vector<int>> templateLastUse;
};

extern template class Executor<float>;
extern template class Executor<double>;

} // namespace mt::host

#endif // MT_RUNTIME_HOST_EXECUTOR_H
