// The host backend's executor: the reference every other backend is compared against.
#include "runtime/host/Executor.h"

#include "runtime/PlanLoader.h"
#include "runtime/host/Kernels.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

namespace mt::host {

namespace {

template <typename T>
HostTensor<T> emptyTensor(const plan::TensorType &type) {
  HostTensor<T> tensor;
  tensor.shape.assign(type.shape().begin(), type.shape().end());
  tensor.isFloat = isFloatDType(type.dtype());
  if (tensor.isFloat)
    tensor.reals.assign(tensor.size(), T(0));
  else
    tensor.ints.assign(tensor.size(), 0);
  return tensor;
}

/// For each value of `program`, the last command that reads it; outputs count as read after
/// the last command, values nobody reads as -1.
std::vector<int> lastUses(const plan::Program &program, const std::vector<int> &outputs) {
  std::vector<int> last(program.values_size(), -1);
  for (int c = 0; c < program.commands_size(); ++c)
    for (int id : program.commands(c).operands())
      last[id] = c;
  for (int id : outputs)
    last[id] = program.commands_size();
  return last;
}

} // namespace

template <typename T>
Executor<T>::Executor(const plan::Plan &plan) : plan(plan) {
  stepOutputs.push_back(plan.step().loss());
  stepOutputs.insert(stepOutputs.end(), plan.step().gradients().begin(),
                     plan.step().gradients().end());
  stepLastUse = lastUses(plan.step(), stepOutputs);
  for (const plan::Template &layer : plan.templates())
    templateLastUse.push_back(
        lastUses(layer.body(), {layer.results().begin(), layer.results().end()}));
}

template <typename T>
std::unique_ptr<HostTensor<T>>
Executor<T>::sourceValue(const plan::Program &program, int id,
                         const std::vector<const T *> &parameters) const {
  const plan::Value &value = program.values(id);
  auto tensor = std::make_unique<HostTensor<T>>(emptyTensor<T>(value.type()));
  int64_t count = tensor->size();
  if (value.has_parameter()) {
    const T *data = parameters.at(value.parameter());
    tensor->reals.assign(data, data + count);
  } else if (value.has_constant()) {
    const char *bytes = value.constant().data();
    int64_t width = bytesPerElement(value.type().dtype());
    for (int64_t i = 0; i < count; ++i) {
      if (tensor->isFloat)
        tensor->reals[i] = static_cast<T>(decodeReal(bytes + i * width, value.type().dtype()));
      else
        tensor->ints[i] = decodeInteger(bytes + i * width, value.type().dtype());
    }
  } else {
    throw KernelError("value " + std::to_string(id) + " is read but never computed");
  }
  return tensor;
}

template <typename T>
std::vector<HostTensor<T>>
Executor<T>::runCommand(const plan::Program &program, const plan::Command &command,
                        const std::vector<const HostTensor<T> *> &operands,
                        const std::vector<const T *> &parameters) const {
  if (command.op() == "mt.call") {
    int index = command.attributes().at("template").i();
    const plan::Template &layer = plan.templates(index);
    return execute(layer.body(), templateLastUse[index], operands, parameters,
                   {layer.results().begin(), layer.results().end()});
  }
  auto begin = std::chrono::steady_clock::now();
  std::vector<HostTensor<T>> results;
  // Host and device memory are one here: a copy between them is a copy.
  if (command.op() == "mt.prefetch" || command.op() == "mt.offload") {
    for (int r = 0; r < command.results_size(); ++r)
      results.push_back(*operands.at(r));
  } else {
    for (int id : command.results())
      results.push_back(emptyTensor<T>(program.values(id).type()));
    std::vector<HostTensor<T> *> pointers;
    for (HostTensor<T> &result : results)
      pointers.push_back(&result);
    runKernel<T>(command, operands, pointers);
  }
  if (profile)
    profile->addKernel(
        command, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
                     .count());
  return results;
}

template <typename T>
std::vector<HostTensor<T>> Executor<T>::execute(const plan::Program &program,
                                                const std::vector<int> &lastUse,
                                                const std::vector<const HostTensor<T> *> &inputs,
                                                const std::vector<const T *> &parameters,
                                                const std::vector<int> &outputs) const {
  // `at` is every live value; `owned` those this call made (inputs belong to the caller).
  std::vector<const HostTensor<T> *> at(program.values_size(), nullptr);
  std::vector<std::unique_ptr<HostTensor<T>>> owned(program.values_size());
  auto materialize = [&](int id) -> const HostTensor<T> & {
    if (!at[id]) {
      if (program.values(id).has_input()) {
        at[id] = inputs.at(program.values(id).input());
      } else {
        owned[id] = sourceValue(program, id, parameters);
        at[id] = owned[id].get();
      }
    }
    return *at[id];
  };
  for (int c = 0; c < program.commands_size(); ++c) {
    const plan::Command &command = program.commands(c);
    std::vector<const HostTensor<T> *> operands;
    for (int id : command.operands())
      operands.push_back(&materialize(id));
    std::vector<HostTensor<T>> results = runCommand(program, command, operands, parameters);
    for (int r = 0; r < command.results_size(); ++r) {
      int id = command.results(r);
      owned[id] = std::make_unique<HostTensor<T>>(std::move(results[r]));
      at[id] = owned[id].get();
    }
    for (int id : command.operands())
      if (lastUse[id] == c) {
        owned[id].reset();
        at[id] = nullptr;
      }
    for (int id : command.results())
      if (lastUse[id] < 0) {
        owned[id].reset();
        at[id] = nullptr;
      }
  }
  std::vector<HostTensor<T>> values;
  for (int id : outputs)
    values.push_back(materialize(id));
  return values;
}

template <typename T>
std::vector<HostTensor<T>> Executor<T>::tokenInputs(
    const std::map<std::string, std::vector<int64_t>> &inputs) const {
  const plan::Program &step = plan.step();
  std::vector<HostTensor<T>> tokens;
  for (const plan::Input &input : step.inputs()) {
    HostTensor<T> tensor = emptyTensor<T>(step.values(input.value()).type());
    tensor.ints = stepInput(step, input, inputs);
    tokens.push_back(std::move(tensor));
  }
  return tokens;
}

template <typename T>
StepResult<T> Executor<T>::run(const std::vector<const T *> &parameters,
                               const std::map<std::string, std::vector<int64_t>> &inputs) const {
  std::vector<HostTensor<T>> tokens = tokenInputs(inputs);
  std::vector<const HostTensor<T> *> pointers;
  for (const HostTensor<T> &tensor : tokens)
    pointers.push_back(&tensor);
  std::vector<HostTensor<T>> values =
      execute(plan.step(), stepLastUse, pointers, parameters, stepOutputs);
  StepResult<T> result;
  result.loss = static_cast<double>(values.front().reals.at(0));
  for (size_t g = 1; g < values.size(); ++g)
    result.gradients.push_back(std::move(values[g].reals));
  return result;
}

template class Executor<float>;
template class Executor<double>;

} // namespace mt::host
