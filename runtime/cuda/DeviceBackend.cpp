// The CUDA backend as a trainer's StepBackend: the streaming executor with what a run reports
// of it (a start-up table, one line per step, a trace), over NCCL a rank that updates its
// shards, and its registration.
#include "runtime/PlanLoader.h"
#include "runtime/cuda/Calibration.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceChecks.h"
#include "runtime/cuda/Executor.h"
#include "runtime/cuda/FaultInjection.h"
#include "runtime/cuda/Launcher.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "runtime/parallel/DataParallel.h"
#include "runtime/train/StepBackend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <memory>

namespace mt {

namespace {

int64_t freeDeviceBytes() {
  size_t free = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

/// `text` without the characters a JSON string would have to escape.
std::string plain(const std::string &text) {
  std::string kept;
  for (char c : text)
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20)
      kept += c;
  return kept;
}

/// The host thread sleeps in a CUDA synchronization instead of spinning (CUDA's default with
/// a core to spare): the CPU's AdamW overlaps the device on every core, and a spinning issuer
/// takes one from it while it waits out each step. Best effort, before or after the context
/// exists (CUDA 12 records the flags either way); a refusal leaves the default.
void sleepInSynchronize() {
  if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess)
    cudaGetLastError(); // not sticky: clear it so that no later check reports it
}

std::string deviceName() {
  int device = 0;
  cudaDeviceProp properties{};
  MT_CUDA_CHECK(cudaGetDevice(&device));
  MT_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

class DeviceBackend final : public StepBackend {
public:
  DeviceBackend(const plan::Plan &plan, HostState &state, const BackendSettings &settings)
      : plan(plan), state(state), processes(settings.processes), processRank(settings.processRank) {
    // Over NCCL the executor averages each gradient on the device before offloading this
    // rank's shard, and gathers each weight on the device after uploading this rank's shard.
    if (processes > 0)
      nccl = std::make_unique<cuda::NcclCommunicator>(
          *static_cast<const ncclUniqueId *>(settings.group), processRank, processes);
    sleepInSynchronize();
    MT_CUDA_CHECK(cudaFree(nullptr)); // the context first, so that it is not counted as ours
    baselineFree = freeDeviceBytes();
    cuda::ExecutorOptions options;
    options.serialize = settings.serialize;
    options.timeCommands = true;
    options.profileKernels = settings.profile;
    options.collectives = nccl.get();
    options.gradientRing = settings.gradientsConsumedOnLanding;
    options.attention = settings.attention;
    options.deviceUpdateLayers = settings.deviceUpdateLayers;
    options.residentUpdateState = settings.residentUpdateState;
    executor = std::make_unique<cuda::Executor>(plan, state, options);
    // This rank updates its shards, from gradients the device averaged, as the updates
    // overlap the device; the loss and the norm over the ranks are the host's only
    // collectives.
    if (nccl)
      rank = std::make_unique<DataParallelRank>(state, *nccl, DataParallelRank::Backward{},
                                                DataParallelRank::Collectives::OnDevice);
  }

  double run(const TokenInputs &inputs, int64_t step, int64_t) override {
    if (step == cuda::injectedFaultStep())
      cuda::launchTrap(nullptr); // the legacy stream: every stream of the executor then fails
    int64_t pulledBefore = executor->gradientBytesPulled();
    int64_t sentBefore = executor->weightBytesSent();
    int64_t movedBefore = executor->updateBytesMoved();
    double waitedBefore = executor->gradientPullWaitMs();
    last = executor->run(inputs);
    // The updates pull while the steps run: the bytes since the last step's start, and the
    // time the updates waited for them.
    pulledInStep = executor->gradientBytesPulled() - pulledBefore;
    sentInStep = executor->weightBytesSent() - sentBefore;
    movedInStep = executor->updateBytesMoved() - movedBefore;
    pullWaitInStep = executor->gradientPullWaitMs() - waitedBefore;
    used = std::max(used, baselineFree - freeDeviceBytes());
    losses[step & 1] = last.loss;
    return last.loss;
  }
  float *gradient(int p) override {
    if (executor->gradientOnDevice(p))
      throw std::logic_error("the gradient of " + plan.parameters(p).name() +
                             " is pulled from the device: read it through readGradient");
    return executor->gradient(p);
  }
  void readGradient(int p, int64_t count, const GradientVisitor &visit) override {
    executor->pullGradient(p, count, visit);
  }
  void updateParameter(int p, int64_t count, const float *gradient,
                       const GradientVisitor &update) override {
    executor->updateParameter(p, count, gradient, update);
  }
  bool pullsGradient(int p) const override { return executor->gradientOnDevice(p); }
  bool updatesOnDevice(int p) const override { return executor->updatesOnDevice(p); }
  double updateOnDevice(int p, const AdamWConstants &constants, bool guarded) override {
    return executor->updateOnDevice(p, constants, guarded);
  }
  double gradientSquares(int p) override { return executor->gradientSquares(p); }
  void settleUpdates() override { executor->settleUpdates(); }

  bool overlapsUpdates() const override { return true; }
  bool reusesGradientMemory() const override { return executor->reusesGradientMemory(); }
  void onGradient(std::function<void(int p)> listener) override {
    executor->onGradient(std::move(listener));
  }
  void awaitParameter(std::function<void(int p)> await) override {
    executor->awaitParameter(std::move(await));
  }
  std::vector<int> readOrder(int) const override { return executor->readOrder(); }

  bool sharesUpdates() const override { return rank != nullptr; }
  OverlappedUpdates::Optimizer sharedUpdates(OverlappedUpdates::Optimizer own,
                                             const UpdateSources &sources) override {
    if (!rank)
      return own;
    int deviceId = 0;
    MT_CUDA_CHECK(cudaGetDevice(&deviceId));
    // NCCL runs on the update worker, which must use the rank's GPU.
    auto bound = [deviceId] {
      thread_local int boundDevice = -1;
      if (boundDevice != deviceId)
        MT_CUDA_CHECK(cudaSetDevice(deviceId));
      boundDevice = deviceId;
    };
    OverlappedUpdates::Optimizer optimizer =
        rank->overlappedOptimizer(sources.gradient, sources.learningRate, sources.decay, losses);
    optimizer.norm = [bound, norm = std::move(optimizer.norm)](double squares) {
      bound();
      return norm(squares);
    };
    optimizer.finish = [bound, finish = std::move(optimizer.finish)](int64_t step) {
      bound();
      finish(step);
    };
    return optimizer;
  }
  double stepLoss(int64_t step, double own) const override { return rank ? losses[step & 1] : own; }

  void printStartup(int64_t parameters) const override;
  bool measuresStreams() const override { return true; }
  std::string report() const override;
  StepMeasureList measures() const override;
  void writeTrace(const std::string &path, const std::vector<UpdateSpan> &updates) const override;
  StepProfile profile() const override { return last.profile; }

  void abandon() override {
    // The device's collectives and the updates' may wait for a peer that is gone: aborting
    // them first lets both end.
    if (nccl)
      nccl->abort();
    executor->drain();
  }

  std::vector<std::vector<float>> gatherMasters() override {
    if (!rank)
      return {};
    // Every rank gathers each parameter (collectives) and rank 0 keeps them, after the
    // executor is freed, so that the gathers' staging fits beside nothing of the plan's.
    executor.reset();
    std::vector<std::vector<float>> gathered(plan.parameters_size());
    try {
      for (int p = 0; p < plan.parameters_size(); ++p) {
        std::vector<float> weights = rank->gathered(p);
        if (processRank == 0)
          gathered[p] = std::move(weights);
      }
    } catch (...) {
      nccl->abort(); // the peers wait in the gathers
      throw;
    }
    return gathered;
  }

private:
  /// What the step's buffers and kernels used: the arena, pools and workspace the executor
  /// holds, and the most scratch one command used.
  int64_t held() const {
    const cuda::DeviceMemory &memory = executor->memory();
    return memory.total() - memory.scratch + memory.scratchUsed;
  }

  const plan::Plan &plan;
  const HostState &state;
  int processes, processRank;
  std::unique_ptr<cuda::NcclCommunicator> nccl;
  std::unique_ptr<cuda::Executor> executor;
  std::unique_ptr<DataParallelRank> rank;
  cuda::StepMeasures last;
  int64_t baselineFree = 0;  // free device memory before the executor allocated anything
  int64_t used = 0;          // device memory the process holds after the last step
  int64_t pulledInStep = 0;  // gradient bytes the updates pulled while the last step ran
  int64_t sentInStep = 0;    // persistent weights' bytes the updates sent meanwhile
  int64_t movedInStep = 0;   // the device's updates' state bytes, both ways, meanwhile
  double pullWaitInStep = 0; // ms the updates waited for those pulls
  double losses[2] = {0, 0}; // this rank's loss of the last two steps, then over the ranks
};

void DeviceBackend::printStartup(int64_t parameters) const {
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
              gib(static_cast<double>(memory.total())),
              gib(static_cast<double>(planDeviceBytes(plan))),
              gib(static_cast<double>(memory.arena)), memory.scratch / 1048576.0,
              memory.blasWorkspace / 1048576.0, memory.inputs / 1024.0, memory.constants / 1024.0);
  std::printf("attention   | %s\n", executor->attentionKernels().c_str());
  if (memory.gradientRing > 0)
    std::printf("gradients   | pulled: a ring of %.3f GiB of device memory beside the plan's, "
                "each update pulling its gradient across PCIe in chunks of 4 MB, then 8, "
                "then 16\n",
                gib(static_cast<double>(memory.gradientRing)));
  else if (!executor->gradientsLanded().empty())
    std::printf("gradients   | landed in host memory, though the plan pulls them: %s\n",
                executor->gradientsLanded().c_str());
  if (memory.updates > 0) {
    int updated = 0;
    int64_t elements = 0;
    for (int p = 0; p < plan.parameters_size(); ++p)
      if (executor->updatesOnDevice(p)) {
        ++updated;
        elements += state.parameters[p].count;
      }
    const int64_t resident = executor->residentUpdateElements();
    std::printf(
        "updates     | %d parameters (%.1f%% of the elements: the embedding's and "
        "layers spread over the step) updated on the device: the state of %.1f%% of theirs "
        "resident there, the rest crossing in and back, %.1f MiB of device memory beside the "
        "plan's\n",
        updated, 100.0 * static_cast<double>(elements) / static_cast<double>(parameters),
        100.0 * static_cast<double>(resident) / static_cast<double>(elements),
        memory.updates / 1048576.0);
  } else if (!executor->updatesOnHost().empty()) {
    std::printf("updates     | on the host, though the device was asked for (--device-updates, "
                "or the plan's count): %s\n",
                executor->updatesOnHost().c_str());
  }
  if (nccl)
    std::printf("data parallel | %d GPUs over NCCL | host state %.1f MiB on rank 0 (its "
                "shards) | gradients averaged and weights gathered on the device, a "
                "shard of each over PCIe | shard updates %s | NCCL holds %.1f MiB of device "
                "memory beside the plan's\n",
                processes, state.bytes() / 1048576.0,
                plan.optimizer().grad_clip() > 0 ? "once every gradient is measured (clipping)"
                                                 : "as gradients land",
                nccl->deviceBytes() / 1048576.0);
}

std::string DeviceBackend::report() const {
  char line[512];
  double seconds = last.ms / 1000.0;
  // What lies beside the plan's peak is named: cuDNN's own workspace (an engine asking more
  // than the plan's kernel scratch holds) and a ring of pulled gradients.
  const cuda::DeviceMemory &memory = executor->memory();
  const int64_t held = this->held(), planned = planDeviceBytes(plan);
  char beside[160] = "";
  if (memory.cudnnBeside > 0 || memory.gradientRing > 0 || memory.updates > 0)
    std::snprintf(beside, sizeof beside,
                  ", beside it cuDNN's own workspace %.3f GiB, the gradient ring %.3f GiB and "
                  "the device's updates %.3f GiB",
                  gib(static_cast<double>(memory.cudnnBeside)),
                  gib(static_cast<double>(memory.gradientRing)),
                  gib(static_cast<double>(memory.updates)));
  std::snprintf(line, sizeof line,
                " | device %.1f ms | %.1f TFLOPS | h2d %.1f GB/s | d2h %.1f GB/s | compute %.0f%% "
                "busy | device memory %.3f GiB %s plan %.3f GiB%s (process %.3f GiB)",
                last.ms, plan.model_flops() / seconds / 1e12, last.copiedBytes[0] / seconds / 1e9,
                last.copiedBytes[1] / seconds / 1e9, 100.0 * last.busyMs[1] / last.ms,
                gib(static_cast<double>(held)), held <= planned ? "<=" : ">",
                gib(static_cast<double>(planned)), beside, gib(static_cast<double>(used)));
  return line;
}

StepMeasureList DeviceBackend::measures() const {
  double seconds = last.ms / 1000.0;
  auto [cudnnForward, cudnnBackward] = executor->cudnnAttentionCalls();
  return {
      {"device_ms", last.ms},
      {"tflops", plan.model_flops() / seconds / 1e12},
      {"h2d_gbps", last.copiedBytes[0] / seconds / 1e9},
      {"d2h_gbps", last.copiedBytes[1] / seconds / 1e9},
      // A plan that pulls its gradients: the updates' pulls while the step ran, beside its d2h.
      {"pulled_gbps", pulledInStep / seconds / 1e9},
      {"pull_wait_ms", pullWaitInStep},
      // A plan with persistent weights: the updates' copies sent to them meanwhile.
      {"sent_gbps", sentInStep / seconds / 1e9},
      // --device-updates: the state of the updates enqueued while the step ran, in and back.
      {"device_update_gbps", movedInStep / seconds / 1e9},
      {"compute_busy", last.busyMs[1] / last.ms},
      {"device_bytes", static_cast<double>(held())},
      {"plan_peak_bytes", static_cast<double>(planDeviceBytes(plan))},
      {"process_device_bytes", static_cast<double>(used)},
      {"scratch_used_bytes", static_cast<double>(executor->memory().scratchUsed)},
      // cuDNN's own workspace for engines asking more than the plan's scratch: in
      // device_bytes, beyond what the compiler can count (cuDNN picks the engine).
      {"cudnn_beside_bytes", static_cast<double>(executor->memory().cudnnBeside)},
      // A plan that pulls its gradients: the gradients' ring, in device_bytes beside the plan's.
      {"gradient_ring_device_bytes", static_cast<double>(executor->memory().gradientRing)},
      // --device-updates: their pieces in flight and squares, in device_bytes beside the plan's.
      {"device_updates_bytes", static_cast<double>(executor->memory().updates)},
      {"cudnn_attention_forward_calls", static_cast<double>(cudnnForward)},
      {"cudnn_attention_backward_calls", static_cast<double>(cudnnBackward)}};
}

void DeviceBackend::writeTrace(const std::string &path,
                               const std::vector<UpdateSpan> &updates) const {
  std::ofstream out(path);
  if (!out)
    throw std::runtime_error("cannot write " + path);
  static const char *streams[] = {"h2d", "compute", "d2h", "cpu", "device updates"};
  // --device-updates: each update's span on the device, on a track of its own.
  std::vector<cuda::UpdateTiming> onDevice = executor->deviceUpdateTimings();
  out << std::fixed << std::setprecision(3); // microseconds, to the nanosecond
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (int tid = 0; tid < (onDevice.empty() ? 4 : 5); ++tid)
    out << (tid ? "," : "") << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << tid
        << ",\"args\":{\"name\":\"" << streams[tid] << "\"}}";
  for (const cuda::CommandTiming &timed : last.commands) {
    const plan::Command &command = plan.step().commands(timed.command);
    std::string name = command.op() == "mt.call"
                           ? plan.templates(command.attributes().at("template").i()).name()
                           : command.op();
    out << ",{\"name\":\"" << name << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << timed.stream
        << ",\"ts\":" << timed.start * 1000.0 << ",\"dur\":" << (timed.end - timed.start) * 1000.0
        << ",\"args\":{\"location\":\"" << plain(command.location()) << "\"}}";
  }
  for (const cuda::UpdateTiming &update : onDevice)
    out << ",{\"name\":\"device AdamW " << plain(plan.parameters(update.parameter).name())
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":4,\"ts\":" << update.start * 1000.0
        << ",\"dur\":" << (update.end - update.start) * 1000.0 << "}";
  // The updates on the device's clock, from the host's view of the step's end.
  auto origin = last.hostEnd - std::chrono::duration<double, std::milli>(last.ms);
  auto at = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - origin).count();
  };
  for (const UpdateSpan &update : updates) {
    if (update.end < origin) // before the step
      continue;
    out << ",{\"name\":\"AdamW " << plain(plan.parameters(update.parameter).name())
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":3,\"ts\":" << at(update.begin)
        << ",\"dur\":" << at(update.end) - at(update.begin) << ",\"args\":{\"step\":" << update.step
        << "}}";
  }
  out << "]}\n";
}

BackendKind cudaBackend() {
  BackendKind kind;
  kind.name = "cuda";
  kind.preference = 1; // auto takes a GPU where one answers
  kind.available = cuda::deviceAvailable;
  kind.unavailable = "no CUDA device answers";
  kind.streamCopies = true;
  kind.make = [](const plan::Plan &plan, HostState &state,
                 const BackendSettings &settings) -> std::unique_ptr<StepBackend> {
    return std::make_unique<DeviceBackend>(plan, state, settings);
  };
  kind.admit = [](const plan::Plan &plan) {
    sleepInSynchronize();
    MT_CUDA_CHECK(cudaFree(nullptr)); // the context first: what is free is what the plan gets
    cuda::checkDeviceMemory(planDeviceBytes(plan), plan.arena_bytes(),
                            plan.scratch_bytes() + plan.blas_workspace_bytes() +
                                plan.staging_bytes());
  };
  kind.calibrate = cuda::calibrateDevice;
  kind.check = [](const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                  DeviceCheck which, double tolerance, const BackendSettings &settings) {
    return which == DeviceCheck::Kernels
               ? checkKernels(plan, state, inputs, tolerance, settings.attention)
               : checkAgainstHost(plan, state, inputs, settings.attention);
  };
  kind.launch = launchRanks;
  return kind;
}

const BackendRegistration registration(cudaBackend());

} // namespace

} // namespace mt
