// Runs a plan's step program on the CPU: values materialized on demand, commands in order,
// each intermediate freed after its last use.
#ifndef MT_RUNTIME_HOST_EXECUTOR_H
#define MT_RUNTIME_HOST_EXECUTOR_H

#include "plan/plan.pb.h"
#include "runtime/host/HostTensor.h"
#include "runtime/train/StepProfile.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mt::host {

/// A scheduled plan misses a dependency: the message names the commands and the tensor.
struct ScheduleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

  /// Runs the step as the three streams of a scheduled plan might: commands in an order drawn
  /// from `seed` that keeps only each stream's order and the plan's events. Every device
  /// buffer is poisoned (NaN) when its last reader is done, and a command that reads a tensor
  /// not yet produced or already released, or writes over bytes of the arena another command
  /// still needs, is a ScheduleError naming both: a dependency the plan is missing.
  /// `ignoredEvent` drops one event's waits, to test that such a plan is caught.
  StepResult<T> runInterleaved(const std::vector<const T *> &parameters,
                               const std::map<std::string, std::vector<int64_t>> &inputs,
                               uint64_t seed, int ignoredEvent = -1) const;

  /// Times each kernel and copy of later runs into `profile` (null: none), which the caller
  /// resets between steps.
  void profileInto(StepProfile *into) { profile = into; }

  /// The results of one step command (a kernel or a template call) on given operands: the
  /// reference for one device kernel.
  std::vector<HostTensor<T>> runStepCommand(const plan::Command &command,
                                            const std::vector<const HostTensor<T> *> &operands,
                                            const std::vector<const T *> &parameters) const {
    return runCommand(plan.step(), command, operands, parameters);
  }

private:
  /// A value that no command computes: a parameter or a constant.
  std::unique_ptr<HostTensor<T>> sourceValue(const plan::Program &program, int id,
                                             const std::vector<const T *> &parameters) const;
  /// The results of one command (a kernel, a copy or a template call).
  std::vector<HostTensor<T>> runCommand(const plan::Program &program,
                                        const plan::Command &command,
                                        const std::vector<const HostTensor<T> *> &operands,
                                        const std::vector<const T *> &parameters) const;
  /// The step's token inputs, checked against the plan.
  std::vector<HostTensor<T>> tokenInputs(
      const std::map<std::string, std::vector<int64_t>> &inputs) const;
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
  StepProfile *profile = nullptr;
};

extern template class Executor<float>;
extern template class Executor<double>;

} // namespace mt::host

#endif // MT_RUNTIME_HOST_EXECUTOR_H
