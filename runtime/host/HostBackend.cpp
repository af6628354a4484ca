// The host backend as a trainer's StepBackend: the plan's step in fp32 on the CPU, from the
// masters themselves, and its registration.
#include "runtime/Calibration.h"
#include "runtime/host/Executor.h"
#include "runtime/train/StepBackend.h"

#include <chrono>

namespace mt {

namespace {

class HostBackend final : public StepBackend {
public:
  HostBackend(const plan::Plan &plan, HostState &state, const BackendSettings &settings)
      : executor(plan), settings(settings) {
    for (const ParameterState &parameter : state.parameters)
      masters.push_back(parameter.master);
    if (settings.profile)
      executor.profileInto(&last);
  }

  double run(const TokenInputs &inputs, int64_t step, int64_t microBatch) override {
    last = {};
    auto begin = std::chrono::steady_clock::now();
    host::StepResult<float> result =
        settings.interleave ? executor.runInterleaved(masters, inputs,
                                                      settings.seed * 7919 + step * 31 + microBatch,
                                                      settings.ignoredEvent)
                            : executor.run(masters, inputs);
    gradients = std::move(result.gradients);
    if (settings.profile)
      last.setStepMs(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
              .count());
    return result.loss;
  }
  StepProfile profile() const override { return last; }

  float *gradient(int p) override { return gradients[p].data(); }

private:
  host::Executor<float> executor;
  BackendSettings settings;
  std::vector<const float *> masters;
  std::vector<std::vector<float>> gradients; // the last run's
  StepProfile last;                          // the last run's kernels (settings.profile)
};

BackendKind hostBackend() {
  BackendKind kind;
  kind.name = "host";
  kind.available = [] { return true; };
  kind.make = [](const plan::Plan &plan, HostState &state,
                 const BackendSettings &settings) -> std::unique_ptr<StepBackend> {
    return std::make_unique<HostBackend>(plan, state, settings);
  };
  kind.calibrate = calibrateHost;
  return kind;
}

const BackendRegistration registration(hostBackend());

} // namespace

} // namespace mt
