// mt-run on the CUDA backend: start-up table, per-step measures, traces and the host check.
#include "tools/mt-run/DeviceSteps.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/host/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mt {

namespace {

int64_t freeDeviceBytes() {
  size_t free = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

std::string deviceName() {
  int device = 0;
  cudaDeviceProp properties{};
  MT_CUDA_CHECK(cudaGetDevice(&device));
  MT_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

} // namespace

DeviceSteps::DeviceSteps(const plan::Plan &plan, HostState &state, bool serialize,
                         cuda::DeviceCollectives *collectives)
    : plan(plan) {
  MT_CUDA_CHECK(cudaFree(nullptr)); // the context first, so that it is not counted as ours
  baselineFree = freeDeviceBytes();
  cuda::ExecutorOptions options;
  options.serialize = serialize;
  options.timeCommands = true;
  options.collectives = collectives;
  executor = std::make_unique<cuda::Executor>(plan, state, options);
}

void DeviceSteps::printStartup(int64_t parameters) const {
  const cuda::DeviceMemory &memory = executor->memory();
  std::printf("device      | %s, %.1f GiB free at start\n", deviceName().c_str(),
              gib(baselineFree));
  std::printf("model       | %s | %lld parameters | %.3g GFLOP a step (model)\n",
              plan.model().c_str(), static_cast<long long>(parameters), plan.model_flops() / 1e9);
  std::printf("plan        | K=%lld layers per checkpoint | %lld micro-batches (%s) | %d "
              "templates | %d events | predicted step %.3f s\n",
              static_cast<long long>(plan.recompute_interval()),
              static_cast<long long>(std::max<int64_t>(1, plan.micro_batches())),
              plan.accumulation().empty() ? "layer-major" : plan.accumulation().c_str(),
              plan.templates_size(), plan.events(), plan.predicted_step_seconds());
  std::printf("device mem  | held %.3f GiB of the plan's peak %.3f GiB: arena %.3f GiB, "
              "kernel scratch %.1f MiB, cuBLASLt workspace %.1f MiB, token inputs %.1f KiB, "
              "constants %.1f KiB\n",
              gib(static_cast<double>(memory.total())), gib(static_cast<double>(planPeak())),
              gib(static_cast<double>(memory.arena)), memory.scratch / 1048576.0,
              memory.blasWorkspace / 1048576.0, memory.inputs / 1024.0,
              memory.constants / 1024.0);
}

double DeviceSteps::run(const TokenInputs &inputs) {
  last = executor->run(inputs);
  used = std::max(used, baselineFree - freeDeviceBytes());
  return last.loss;
}

int64_t DeviceSteps::planPeak() const {
  return plan.arena_bytes() + plan.scratch_bytes() + plan.blas_workspace_bytes() +
         plan.input_bytes() + plan.constant_bytes();
}

int64_t DeviceSteps::held() const {
  // Scratch counts as what the kernels used; the rest is held whole.
  const cuda::DeviceMemory &memory = executor->memory();
  return memory.total() - memory.scratch + memory.scratchUsed;
}

std::string DeviceSteps::report() const {
  char line[512];
  double seconds = last.ms / 1000.0;
  std::snprintf(line, sizeof line,
                " | device %.1f ms | %.1f TFLOPS | h2d %.1f GB/s | d2h %.1f GB/s | compute %.0f%% "
                "busy | device memory %.3f GiB <= plan %.3f GiB (process %.3f GiB)",
                last.ms, plan.model_flops() / seconds / 1e12, last.copiedBytes[0] / seconds / 1e9,
                last.copiedBytes[1] / seconds / 1e9, 100.0 * last.busyMs[1] / last.ms,
                gib(static_cast<double>(held())), gib(static_cast<double>(planPeak())),
                gib(static_cast<double>(used)));
  return line;
}

StepMeasureList DeviceSteps::measures() const {
  double seconds = last.ms / 1000.0;
  return {{"device_ms", last.ms},
          {"tflops", plan.model_flops() / seconds / 1e12},
          {"h2d_gbps", last.copiedBytes[0] / seconds / 1e9},
          {"d2h_gbps", last.copiedBytes[1] / seconds / 1e9},
          {"compute_busy", last.busyMs[1] / last.ms},
          {"device_bytes", static_cast<double>(held())},
          {"plan_peak_bytes", static_cast<double>(planPeak())},
          {"process_device_bytes", static_cast<double>(used)},
          {"scratch_used_bytes", static_cast<double>(executor->memory().scratchUsed)}};
}

void DeviceSteps::writeTrace(const std::string &path) const {
  std::ofstream out(path);
  if (!out)
    throw std::runtime_error("cannot write " + path);
  static const char *streams[] = {"h2d", "compute", "d2h", "cpu"};
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (int tid = 0; tid < 4; ++tid)
    out << (tid ? "," : "") << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << tid
        << ",\"args\":{\"name\":\"" << streams[tid] << "\"}}";
  for (const cuda::CommandTiming &timed : last.commands) {
    const plan::Command &command = plan.step().commands(timed.command);
    std::string name = command.op() == "mt.call"
                           ? plan.templates(command.attributes().at("template").i()).name()
                           : command.op();
    std::string where;
    for (char c : command.location())
      if (c != '"' && c != '\\')
        where += c;
    out << ",{\"name\":\"" << name << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << timed.stream
        << ",\"ts\":" << timed.start * 1000.0 << ",\"dur\":" << (timed.end - timed.start) * 1000.0
        << ",\"args\":{\"location\":\"" << where << "\"}}";
  }
  out << "]}\n";
}

namespace {

/// Element i of an array of T in `bytes`.
template <typename T>
T element(const char *bytes, int64_t i) {
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

std::vector<const float *> mastersOf(const HostState &state) {
  std::vector<const float *> masters;
  for (const ParameterState &parameter : state.parameters)
    masters.push_back(parameter.master);
  return masters;
}

} // namespace

double checkKernels(const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                    double tolerance) {
  std::vector<const float *> masters = mastersOf(state);
  host::Executor<float> reference(plan);
  cuda::ExecutorOptions options;
  options.serialize = true;
  cuda::Executor device(plan, state, options);
  device.run(inputs);
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
        reference.runStepCommand(command, pointers, masters);
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

double checkAgainstHost(const plan::Plan &plan, HostState &state, const TokenInputs &inputs) {
  host::Executor<float> reference(plan);
  host::StepResult<float> expected = reference.run(mastersOf(state), inputs);
  cuda::Executor device(plan, state);
  cuda::StepMeasures measured = device.run(inputs);
  double lossError = std::fabs(measured.loss - expected.loss) / std::max(1e-12, std::fabs(expected.loss));
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
