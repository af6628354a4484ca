// A device step checked against the host backend's: the whole step, or kernel by kernel.
#include "runtime/cuda/DeviceChecks.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/Executor.h"
#include "runtime/host/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

namespace mt {

namespace {

/// Element i of an array of T in `bytes`.
template <typename T> T element(const char *bytes, int64_t i) {
  T x;
  std::memcpy(&x, bytes + i * sizeof(T), sizeof(T));
  return x;
}

/// A device tensor's elements on the host, as the host backend holds them.
host::HostTensor<float> download(const cuda::DeviceTensor &tensor) {
  host::HostTensor<float> out;
  out.shape = tensor.shape;
  out.isFloat = tensor.isFloat();
  std::vector<char> bytes(tensor.bytes());
  MT_CUDA_CHECK(cudaMemcpy(bytes.data(), tensor.data, bytes.size(), cudaMemcpyDeviceToHost));
  const char *data = bytes.data();
  for (int64_t i = 0; i < tensor.size(); ++i)
    switch (tensor.storage) {
    case cuda::Storage::F32:
      out.reals.push_back(element<float>(data, i));
      break;
    case cuda::Storage::BF16: { // the high half of an fp32
      uint32_t bits = static_cast<uint32_t>(element<uint16_t>(data, i)) << 16;
      out.reals.push_back(element<float>(reinterpret_cast<const char *>(&bits), 0));
      break;
    }
    case cuda::Storage::I64:
      out.ints.push_back(element<int64_t>(data, i));
      break;
    case cuda::Storage::I32:
      out.ints.push_back(element<int32_t>(data, i));
      break;
    case cuda::Storage::U8:
      out.ints.push_back(element<uint8_t>(data, i));
      break;
    }
  return out;
}

/// How far a result is from its reference: the largest |want|, and the largest |got - want|
/// over it (infinite where either is not finite).
struct Agreement {
  double largest = 0, relative = 0;
};

Agreement compare(const float *got, const std::vector<float> &want) {
  Agreement agreement;
  for (float x : want)
    agreement.largest = std::max(agreement.largest, std::fabs(static_cast<double>(x)));
  double error = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {
      agreement.relative = INFINITY; // std::max would skip a NaN
      return agreement;
    }
    error = std::max(error, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  agreement.relative = agreement.largest > 0 ? error / agreement.largest : error;
  return agreement;
}

/// Every parameter's masters as floats, which the host reference computes with (split
/// masters joined), and pointers to them.
struct MasterCopies {
  std::vector<std::vector<float>> values;
  std::vector<const float *> pointers;

  explicit MasterCopies(const HostState &state) {
    for (const ParameterState &parameter : state.parameters)
      values.push_back(parameter.masters());
    for (const std::vector<float> &masters : values)
      pointers.push_back(masters.data());
  }
};

} // namespace

double checkKernels(const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                    double tolerance, AttentionKernels attention) {
  MasterCopies masters(state);
  host::Executor<float> reference(plan);
  cuda::ExecutorOptions options;
  options.serialize = true;
  options.attention = attention;
  cuda::Executor device(plan, state, options);
  device.run(inputs);
  std::printf("attention | %s\n", device.attentionKernels().c_str());
  std::map<std::string, std::pair<int, double>> worstByOp; // commands, worst error
  double worst = 0;
  for (const plan::Command &command : plan.step().commands()) {
    if (command.op() == "mt.prefetch" || command.op() == "mt.offload" || command.op() == "mt.call")
      continue;
    std::vector<host::HostTensor<float>> operands;
    for (int id : command.operands())
      operands.push_back(download(device.stepValue(id)));
    std::vector<const host::HostTensor<float> *> pointers;
    for (const host::HostTensor<float> &operand : operands)
      pointers.push_back(&operand);
    std::vector<host::HostTensor<float>> expected =
        reference.runStepCommand(command, pointers, masters.pointers);
    auto &[count, error] = worstByOp[command.op()];
    ++count;
    for (int r = 0; r < command.results_size(); ++r) {
      host::HostTensor<float> got = download(device.stepValue(command.results(r)));
      if (!got.isFloat)
        continue;
      double relative = compare(got.reals.data(), expected.at(r).reals).relative;
      if (relative > tolerance)
        std::printf("kernel check | %s at %s: result %d off by %.3g\n", command.op().c_str(),
                    command.location().c_str(), r, relative);
      error = std::max(error, relative);
    }
    worst = std::max(worst, error);
  }
  for (const auto &[op, countAndError] : worstByOp)
    std::printf("kernel check | %-24s | %3d commands | worst relative error %.3g\n", op.c_str(),
                countAndError.first, countAndError.second);
  std::printf("kernel check | worst relative error %.3g\n", worst);
  return worst;
}

double checkAgainstHost(const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                        AttentionKernels attention) {
  host::Executor<float> reference(plan);
  host::StepResult<float> expected = reference.run(MasterCopies(state).pointers, inputs);
  cuda::ExecutorOptions options;
  options.attention = attention;
  cuda::Executor device(plan, state, options);
  cuda::StepMeasures measured = device.run(inputs);
  std::printf("attention | %s\n", device.attentionKernels().c_str());
  // Relative to the loss, or absolute below 1: a test graph's loss (a signed sum) can cancel
  // to near zero, where a relative error measures the cancellation, not the kernels.
  double lossError =
      std::fabs(measured.loss - expected.loss) / std::max(1.0, std::fabs(expected.loss));
  std::printf("device check | loss host %.6f device %.6f | relative error %.3g\n", expected.loss,
              measured.loss, lossError);
  double worst = lossError;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    const std::vector<float> &want = expected.gradients[p];
    Agreement agreement = compare(device.gradient(p), want);
    std::printf("device check | gradient %-40s | %8lld elements | largest %.3g | worst relative "
                "error %.3g\n",
                plan.parameters(p).name().c_str(), static_cast<long long>(want.size()),
                agreement.largest, agreement.relative);
    worst = std::max(worst, agreement.relative);
  }
  std::printf("device check | worst relative error %.3g\n", worst);
  return worst;
}

} // namespace mt
