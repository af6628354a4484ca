// The host backend's executor: the reference every other backend is compared against.
#include "runtime/host/Executor.h"

#include "runtime/PlanLoader.h"
#include "runtime/host/Kernels.h"

#include <cmath>
#include <cstring>
#include <memory>

namespace mt::host {

namespace {

bool isFloatType(plan::DType dtype) {
  return dtype == plan::F32 || dtype == plan::F64 || dtype == plan::F16 || dtype == plan::BF16;
}

/// One stored element as a double: little-endian bytes of `dtype`.
double decodeReal(const char *bytes, plan::DType dtype) {
  switch (dtype) {
  case plan::F64: {
    double d;
    std::memcpy(&d, bytes, 8);
    return d;
  }
  case plan::F32: {
    float f;
    std::memcpy(&f, bytes, 4);
    return f;
  }
  case plan::BF16: {
    uint32_t bits = static_cast<uint32_t>(static_cast<uint8_t>(bytes[0]) |
                                          static_cast<uint8_t>(bytes[1]) << 8)
                    << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  default: { // F16
    uint16_t h = static_cast<uint16_t>(static_cast<uint8_t>(bytes[0]) |
                                       static_cast<uint8_t>(bytes[1]) << 8);
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                       : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                        : std::ldexp(mantissa + 1024, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
  }
  }
}

int64_t decodeInteger(const char *bytes, plan::DType dtype) {
  switch (dtype) {
  case plan::I64: {
    int64_t i;
    std::memcpy(&i, bytes, 8);
    return i;
  }
  case plan::I32: {
    int32_t i;
    std::memcpy(&i, bytes, 4);
    return i;
  }
  case plan::I8:
    return static_cast<int8_t>(bytes[0]);
  default: // BOOL
    return bytes[0] != 0;
  }
}

template <typename T>
HostTensor<T> emptyTensor(const plan::TensorType &type) {
  HostTensor<T> tensor;
  tensor.shape.assign(type.shape().begin(), type.shape().end());
  tensor.isFloat = isFloatType(type.dtype());
  if (tensor.isFloat)
    tensor.reals.assign(tensor.size(), T(0));
  else
    tensor.ints.assign(tensor.size(), 0);
  return tensor;
}

} // namespace

template <typename T>
Executor<T>::Executor(const plan::Plan &plan) : plan(plan) {
  const plan::Program &step = plan.step();
  lastUse.assign(step.values_size(), -1);
  for (int c = 0; c < step.commands_size(); ++c)
    for (int id : step.commands(c).operands())
      lastUse[id] = c;
  lastUse[step.loss()] = step.commands_size();
  for (int id : step.gradients())
    lastUse[id] = step.commands_size();
}

template <typename T>
StepResult<T> Executor<T>::run(const std::vector<const T *> &parameters,
                               const std::map<std::string, std::vector<int64_t>> &inputs) const {
  const plan::Program &step = plan.step();
  std::vector<std::unique_ptr<HostTensor<T>>> live(step.values_size());

  // Inputs, parameters and constants exist before any command; they are built when first read.
  auto materialize = [&](int id) -> HostTensor<T> & {
    if (live[id])
      return *live[id];
    const plan::Value &value = step.values(id);
    auto tensor = std::make_unique<HostTensor<T>>(emptyTensor<T>(value.type()));
    int64_t count = tensor->size();
    if (value.has_input()) {
      const std::string &name = step.inputs(value.input()).name();
      auto it = inputs.find(name);
      if (it == inputs.end() || static_cast<int64_t>(it->second.size()) != count)
        throw KernelError("the step needs input '" + name + "' of " + std::to_string(count) +
                          " tokens");
      tensor->ints = it->second;
    } else if (value.has_parameter()) {
      const T *data = parameters[value.parameter()];
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
    live[id] = std::move(tensor);
    return *live[id];
  };

  for (int c = 0; c < step.commands_size(); ++c) {
    const plan::Command &command = step.commands(c);
    std::vector<const HostTensor<T> *> operands;
    for (int id : command.operands())
      operands.push_back(&materialize(id));
    std::vector<HostTensor<T> *> results;
    for (int id : command.results()) {
      live[id] = std::make_unique<HostTensor<T>>(emptyTensor<T>(step.values(id).type()));
      results.push_back(live[id].get());
    }
    runKernel<T>(command, operands, results);
    for (int id : command.operands())
      if (lastUse[id] == c)
        live[id].reset();
    for (int id : command.results())
      if (lastUse[id] < 0)
        live[id].reset();
  }

  StepResult<T> result;
  result.loss = static_cast<double>(materialize(step.loss()).reals.at(0));
  for (int id : step.gradients())
    result.gradients.push_back(materialize(id).reals);
  return result;
}

template class Executor<float>;
template class Executor<double>;

} // namespace mt::host
